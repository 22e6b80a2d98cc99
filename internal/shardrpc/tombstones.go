package shardrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/regen-s3/regen/metadata"
)

// PathTombstonesRemove removes collected tombstones: POST
// RemoveTombstonesRequest, answered with a RemoveTombstonesResponse. A
// server removes each named tombstone only if it is still that exact
// version, current, with nothing under it (metadata.Store.RemoveTombstone),
// so the call is idempotent and a newer write, or an older version that
// arrived under the tombstone, is left alone.
const PathTombstonesRemove = "/v1/manifests/tombstones/remove"

// TombstoneRef names one tombstone of a RemoveTombstonesRequest.
type TombstoneRef struct {
	Key     string           `json:"key"`
	Version metadata.Version `json:"version"`
}

// RemoveTombstonesRequest names up to MaxBatch tombstones of one bucket.
type RemoveTombstonesRequest struct {
	Bucket     string         `json:"bucket"`
	Tombstones []TombstoneRef `json:"tombstones"`
}

// RemoveTombstonesResponse answers a RemoveTombstonesRequest in request
// order: Removed[i] is true when the server removed tombstone i, false
// when it held something else (or nothing).
type RemoveTombstonesResponse struct {
	Removed []bool `json:"removed"`
}

// RemoveTombstones asks addr to remove the tombstones refs of bucket (see
// PathTombstonesRemove) and returns, per ref, whether it removed it.
func (c *Client) RemoveTombstones(ctx context.Context, addr, bucket string, refs []TombstoneRef) ([]bool, error) {
	if len(refs) > MaxBatch {
		return nil, fmt.Errorf("%w: %d tombstones in one batch (at most %d)", ErrBadRequest, len(refs), MaxBatch)
	}
	body, err := json.Marshal(RemoveTombstonesRequest{Bucket: bucket, Tombstones: refs})
	if err != nil {
		return nil, err
	}
	op := fmt.Sprintf("remove %d tombstones in %s", len(refs), bucket)
	var resp RemoveTombstonesResponse
	if err := c.call(ctx, addr, op, http.MethodPost, PathTombstonesRemove, nil, bytes.NewReader(body), &resp); err != nil {
		return nil, err
	}
	if len(resp.Removed) != len(refs) {
		return nil, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("%d answers for %d tombstones", len(resp.Removed), len(refs))}
	}
	return resp.Removed, nil
}
