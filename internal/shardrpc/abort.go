package shardrpc

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/regen-s3/regen/metadata"
)

// PathManifestAbort takes back a manifest write that failed to reach its
// write quorum: POST ?bucket=&key=&version= makes the server restore the
// version it held before, if the aborted one is still its current. The
// writer calls it on the servers that did store the manifest, so a failed
// PUT leaves nothing visible even when it reached k servers.
const PathManifestAbort = "/v1/manifests/abort"

// ParamVersion carries a metadata.Version in its String form.
const ParamVersion = "version"

// AbortManifest asks addr to roll back version v of bucket/key if that is
// still its current manifest. Aborting a version the server does not hold
// as current succeeds and changes nothing.
func (c *Client) AbortManifest(ctx context.Context, addr, bucket, key string, v metadata.Version) error {
	op := fmt.Sprintf("abort manifest %s/%s@%s", bucket, key, v)
	q := url.Values{ParamBucket: {bucket}, ParamKey: {key}, ParamVersion: {v.String()}}
	return c.call(ctx, addr, op, http.MethodPost, PathManifestAbort, q, nil, nil)
}
