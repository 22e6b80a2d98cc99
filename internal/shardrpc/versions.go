package shardrpc

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/regen-s3/regen/metadata"
)

// PathManifestVersions answers GET ?bucket=&key= with every version of the
// key the node holds: its current manifest and the previous versions it
// keeps until the current one is confirmed (see metadata.Store.Versions).
const PathManifestVersions = "/v1/manifests/versions"

// ManifestVersionsResponse answers GET PathManifestVersions. Current is
// nil, and Previous empty, when the node holds no version of the key (the
// reply is then a NotFound error instead).
type ManifestVersionsResponse struct {
	Current  *metadata.Manifest   `json:"current"`
	Previous []*metadata.Manifest `json:"previous"`
}

// GetManifestVersions returns the node's current manifest of (bucket, key)
// and its previous versions, newest first, tombstones included;
// ErrNotFound when it holds none. Readers count every version a node holds
// as that node's vote, so a failed overwrite does not hide the version it
// failed to replace.
func (c *Client) GetManifestVersions(ctx context.Context, addr, bucket, key string) (cur *metadata.Manifest, prev []*metadata.Manifest, err error) {
	op := fmt.Sprintf("get manifest versions %s/%s", bucket, key)
	q := url.Values{ParamBucket: {bucket}, ParamKey: {key}}
	var resp ManifestVersionsResponse
	if err := c.call(ctx, addr, op, http.MethodGet, PathManifestVersions, q, nil, &resp); err != nil {
		return nil, nil, err
	}
	if resp.Current == nil {
		return nil, nil, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("reply without a current manifest: %w", ErrNotFound)}
	}
	return resp.Current, resp.Previous, nil
}
