package shardrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/regen-s3/regen/metadata"
)

// PathCommitted takes a CommittedRequest: the gateway (or the repair
// worker, of a manifest switch) tells the servers that stored a manifest
// that a write quorum stored it. A server's confirm
// job for that version then needs to ask no peer (they would all answer
// what the gateway already knows): an overwrite or a delete costs one
// notice per server instead of n-1 lookups per server.
const PathCommitted = "/v1/manifests/committed"

// VersionRef names one version of a key.
type VersionRef struct {
	Bucket  string           `json:"bucket"`
	Key     string           `json:"key"`
	Version metadata.Version `json:"version"`
}

// CommittedRequest lists versions each stored by a write quorum.
type CommittedRequest struct {
	Versions []VersionRef `json:"versions"`
}

// Committed tells addr that each of refs (at most MaxBatch) is stored on a
// write quorum.
func (c *Client) Committed(ctx context.Context, addr string, refs []VersionRef) error {
	if len(refs) > MaxBatch {
		return fmt.Errorf("%w: %d versions in one notice (at most %d)", ErrBadRequest, len(refs), MaxBatch)
	}
	body, err := json.Marshal(CommittedRequest{Versions: refs})
	if err != nil {
		return err
	}
	return c.call(ctx, addr, fmt.Sprintf("committed %d versions", len(refs)), http.MethodPost, PathCommitted, nil, bytes.NewReader(body), nil)
}
