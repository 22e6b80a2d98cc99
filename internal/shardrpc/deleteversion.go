package shardrpc

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// PathManifestDeleteVersion removes one version of a key for good (S3's
// DeleteObject with a versionId): POST ?bucket=&key=&version_id= makes the
// server remove every manifest of that version ID it holds, current or
// previous, synced before it answers. An empty version_id is the key's
// null version. See metadata.Store.DeleteVersion.
const PathManifestDeleteVersion = "/v1/manifests/delete-version"

// ParamVersionID carries a metadata.Manifest.VersionID.
const ParamVersionID = "version_id"

// ParamBypassGovernance ("true") asks a removal to bypass GOVERNANCE
// retention: S3's x-amz-bypass-governance-retention, which the gateway
// sends only for a caller with the right. Without it the server refuses
// (ErrLocked) to remove a version under retention; with it, one under
// COMPLIANCE retention or a legal hold all the same.
const ParamBypassGovernance = "bypass_governance"

// DeleteVersionResponse answers PathManifestDeleteVersion: how many
// manifests of the version the server removed (0: it held none).
type DeleteVersionResponse struct {
	Removed int `json:"removed"`
}

// DeleteVersion asks addr to remove every manifest of version ID id of
// bucket/key, and returns how many it removed. Removing a version the
// server does not hold succeeds and removes nothing. lease fences it as
// ParamLease fences a manifest write (the key's lease holder, or
// NoLease): a removal is a write of the key. The server refuses with
// ErrLocked, removing nothing, while the version's object lock keeps it
// (bypass: ParamBypassGovernance).
func (c *Client) DeleteVersion(ctx context.Context, addr, bucket, key, id, lease string, bypass bool) (int, error) {
	op := fmt.Sprintf("delete version %s/%s@%q", bucket, key, id)
	q := url.Values{ParamBucket: {bucket}, ParamKey: {key}, ParamVersionID: {id}, ParamLease: {lease}}
	if bypass {
		q.Set(ParamBypassGovernance, "true")
	}
	var resp DeleteVersionResponse
	if err := c.call(ctx, addr, op, http.MethodPost, PathManifestDeleteVersion, q, nil, &resp); err != nil {
		return 0, err
	}
	return resp.Removed, nil
}
