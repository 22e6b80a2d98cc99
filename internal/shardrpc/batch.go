package shardrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/regen-s3/regen/metadata"
)

// Batched manifest calls: one request carries the lookups or writes of
// many keys, so that an operation on many keys (DeleteObjects) costs one
// round trip per server instead of one per key and server. Each key's
// result is its own; the batch fails as a whole only when the request
// does.
const (
	// PathManifestVersionsBatch answers POST VersionsBatchRequest with a
	// VersionsBatchResponse.
	PathManifestVersionsBatch = "/v1/manifests/versions/batch"
	// PathManifestsBatch stores the manifests of a PutBatchRequest
	// (?lease= as for PathManifests) and answers a PutBatchResponse.
	PathManifestsBatch = "/v1/manifests/batch"
	// MaxBatch is the most keys or manifests one batched call carries.
	MaxBatch = 500
)

// VersionsBatchRequest asks for every version of several keys of a bucket.
type VersionsBatchRequest struct {
	Bucket string   `json:"bucket"`
	Keys   []string `json:"keys"`
}

// KeyVersions is one key's answer in a VersionsBatchResponse: Current is
// nil when the node holds no version of the key.
type KeyVersions struct {
	Current  *metadata.Manifest   `json:"current,omitempty"`
	Previous []*metadata.Manifest `json:"previous,omitempty"`
	// Committed is ManifestVersionsResponse.Committed: retired, kept for
	// wire compatibility only (never set by current servers, ignored by
	// gateways).
	Committed bool `json:"committed,omitempty"`
	// Err is set when the node failed to read the key (Current is nil).
	Err string `json:"err,omitempty"`
}

// VersionsBatchResponse answers a VersionsBatchRequest, one entry per key
// in request order.
type VersionsBatchResponse struct {
	Keys []KeyVersions `json:"keys"`
}

// GetManifestVersionsBatch is GetManifestVersions for up to MaxBatch keys
// of one bucket.
func (c *Client) GetManifestVersionsBatch(ctx context.Context, addr, bucket string, keys []string) ([]KeyVersions, error) {
	if len(keys) > MaxBatch {
		return nil, fmt.Errorf("%w: %d keys in one batch (at most %d)", ErrBadRequest, len(keys), MaxBatch)
	}
	body, err := json.Marshal(VersionsBatchRequest{Bucket: bucket, Keys: keys})
	if err != nil {
		return nil, err
	}
	op := fmt.Sprintf("get manifest versions of %d keys in %s", len(keys), bucket)
	var resp VersionsBatchResponse
	bin, err := c.versionsCall(ctx, addr, op, http.MethodPost, PathManifestVersionsBatch, url.Values{ParamFormat: {FormatBinary}}, bytes.NewReader(body), &resp)
	if err != nil {
		return nil, err
	}
	if bin != nil {
		resp.Keys = bin
	}
	if len(resp.Keys) != len(keys) {
		return nil, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("%d answers for %d keys", len(resp.Keys), len(keys))}
	}
	return resp.Keys, nil
}

// PutBatchRequest carries manifests to store, each as PutManifestFenced
// would.
type PutBatchRequest struct {
	Manifests []*metadata.Manifest `json:"manifests"`
}

// PutResult is one manifest's outcome in a PutBatchResponse.
type PutResult struct {
	Stored bool `json:"stored"`
	// Current is the key's current version on the server after the write:
	// newer than the manifest written when a newer write got there first
	// (the writer then tries again with a newer version, as after a
	// single PutManifest). Nil from servers older than this field.
	Current *metadata.Version `json:"current,omitempty"`
	// Replaced and Held are PutManifestResponse's: the manifest replaced
	// a current one (a gateway's commit notice of it is urgent), and its
	// version is held on the server after the write. False from servers
	// older than these fields.
	Replaced bool `json:"replaced,omitempty"`
	Held     bool `json:"held,omitempty"`
	// Code and Message describe a failure (Code as in error replies:
	// CodeLeaseHeld when the key's lease refused the write).
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// Err is the result's failure as an error (matching ErrLeaseHeld and
// friends), nil on success.
func (r PutResult) Err() error {
	if r.Code == "" {
		return nil
	}
	return &RemoteError{Status: http.StatusOK, Code: r.Code, Message: r.Message}
}

// PutBatchResponse answers a PutBatchRequest, one result per manifest in
// request order.
type PutBatchResponse struct {
	Results []PutResult `json:"results"`
}

// Unfenced is the lease fence of a batch of internal writes that a single
// PutManifest (no lease parameter) would make, with no lease check: the
// repair switches of inline objects (repair/switch_batch.go). A switch's
// version is old.TS+1ns, below every client write made after the object
// (docs/CONSISTENCY.md, rule 3), so it never needs the key's lease to
// stay behind one. A server that predates it refuses each such manifest
// as not held by this holder (ErrLeaseHeld).
const Unfenced = "*"

// PutManifestsFenced stores up to MaxBatch manifests as client writes
// fenced by lease (see PutManifestFenced), or with lease Unfenced as
// PutManifest stores them; the results are in the order of ms.
func (c *Client) PutManifestsFenced(ctx context.Context, addr string, ms []*metadata.Manifest, lease string) ([]PutResult, error) {
	if len(ms) > MaxBatch {
		return nil, fmt.Errorf("%w: %d manifests in one batch (at most %d)", ErrBadRequest, len(ms), MaxBatch)
	}
	body, err := json.Marshal(PutBatchRequest{Manifests: ms})
	if err != nil {
		return nil, err
	}
	op := fmt.Sprintf("put %d manifests", len(ms))
	var resp PutBatchResponse
	if err := c.call(ctx, addr, op, http.MethodPost, PathManifestsBatch, url.Values{ParamLease: {lease}}, bytes.NewReader(body), &resp); err != nil {
		return nil, err
	}
	if len(resp.Results) != len(ms) {
		return nil, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("%d results for %d manifests", len(resp.Results), len(ms))}
	}
	return resp.Results, nil
}
