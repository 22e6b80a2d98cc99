package shardrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/regen-s3/regen/metadata"
)

// PathAccessKeys takes POST with a JSON metadata.AccessKey (stored if newer
// than the node's record of that ID; answered with a PutBucketResponse)
// and GET, which answers every access key record of the node, tombstones
// included, as a JSON array. The records hold sealed secrets only (see
// metadata.AccessKey), and like every shard path it needs the cluster
// secret's signature.
const PathAccessKeys = "/v1/access-keys"

// PutAccessKey stores the access key record on addr if it is newer than
// the node's.
func (c *Client) PutAccessKey(ctx context.Context, addr string, k *metadata.AccessKey) error {
	op := "put access key " + k.ID
	body, err := json.Marshal(k)
	if err != nil {
		return &NodeError{Addr: addr, Op: op, Err: err}
	}
	return c.call(ctx, addr, op, http.MethodPost, PathAccessKeys, nil, bytes.NewReader(body), &PutBucketResponse{})
}

// ListAccessKeys returns every access key record of addr, tombstones
// included.
func (c *Client) ListAccessKeys(ctx context.Context, addr string) ([]metadata.AccessKey, error) {
	var out []metadata.AccessKey
	if err := c.call(ctx, addr, "list access keys", http.MethodGet, PathAccessKeys, nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}
