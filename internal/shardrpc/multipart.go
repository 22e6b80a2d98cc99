package shardrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/regen-s3/regen/metadata"
)

// Multipart upload and lease paths.
const (
	// PathUploads: POST stores an upload record, GET (bucket, key,
	// upload) returns one.
	PathUploads = "/v1/uploads"
	// PathUploadList: GET lists open uploads of a bucket.
	PathUploadList = "/v1/uploads/list"
	// PathUploadParts: POST (bucket, key) stores a part record, GET
	// (upload) lists an upload's parts.
	PathUploadParts = "/v1/uploads/parts"
	// PathUploadFinish: POST removes a completed or aborted upload.
	PathUploadFinish = "/v1/uploads/finish"
	// PathLeases: POST acquires or renews a lease, DELETE releases it.
	PathLeases = "/v1/leases"
)

// More query parameters.
const (
	ParamUpload    = "upload"
	ParamKeyMarker = "key_marker"
	ParamIDMarker  = "id_marker"
	ParamName      = "name"
	ParamHolder    = "holder"
	// ParamLease fences a client's manifest write against per-key leases
	// (PutManifestFenced): the lease holder, or NoLease.
	ParamLease = "lease"
)

// NoLease is the fence of a write made without a lease: the server
// refuses it while any other writer holds the key's lease.
const NoLease = "-"

// LeaseName is the name of the per-key lease of bucket/key, the one the
// shard server checks client manifest writes against.
func LeaseName(bucket, key string) string { return "obj/" + bucket + "/" + key }

// BucketLeaseName is the name of the lease on bucket's record, the one
// the shard server checks fenced bucket writes (PutBucketFenced) against.
func BucketLeaseName(bucket string) string { return "bucket/" + bucket }

// CodeLeaseHeld is the error code of a lease held by someone else.
const CodeLeaseHeld = "LeaseHeld"

// ErrLeaseHeld: the lease is held by another holder and has not expired.
var ErrLeaseHeld = errors.New("shardrpc: lease held")

// PutPartResponse answers POST PathUploadParts. Loser is the part record
// that lost to a newer one (its shard files are being collected), if any.
type PutPartResponse struct {
	Loser *metadata.UploadPart `json:"loser,omitempty"`
}

// UploadListResponse answers GET PathUploadList.
type UploadListResponse struct {
	Uploads   []metadata.Upload `json:"uploads"`
	Truncated bool              `json:"truncated"`
}

// FinishRequest is the body of POST PathUploadFinish.
type FinishRequest struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Upload string `json:"upload"`
	// Keep lists the shard file IDs the completed object uses.
	Keep []string `json:"keep,omitempty"`
}

// LeaseRequest is the body of POST PathLeases.
type LeaseRequest struct {
	Name   string `json:"name"`
	Holder string `json:"holder"`
	TTLms  int64  `json:"ttl_ms"`
}

// PutUpload stores an upload record on addr.
func (c *Client) PutUpload(ctx context.Context, addr string, u *metadata.Upload) error {
	body, err := json.Marshal(u)
	if err != nil {
		return &NodeError{Addr: addr, Op: "put upload", Err: err}
	}
	return c.call(ctx, addr, "put upload "+u.ID, http.MethodPost, PathUploads, nil, bytes.NewReader(body), nil)
}

// GetUpload returns the record of an open upload; ErrNotFound if addr has
// none.
func (c *Client) GetUpload(ctx context.Context, addr, bucket, key, id string) (*metadata.Upload, error) {
	q := url.Values{ParamBucket: {bucket}, ParamKey: {key}, ParamUpload: {id}}
	u := new(metadata.Upload)
	if err := c.call(ctx, addr, "get upload "+id, http.MethodGet, PathUploads, q, nil, u); err != nil {
		return nil, err
	}
	return u, nil
}

// ListUploads returns one page of addr's open uploads.
func (c *Client) ListUploads(ctx context.Context, addr string, uq metadata.UploadQuery) ([]metadata.Upload, bool, error) {
	q := url.Values{
		ParamBucket: {uq.Bucket}, ParamPrefix: {uq.Prefix}, ParamKeyMarker: {uq.KeyMarker},
		ParamIDMarker: {uq.IDMarker}, ParamLimit: {strconv.Itoa(uq.Limit)},
	}
	var resp UploadListResponse
	if err := c.call(ctx, addr, "list uploads "+uq.Bucket, http.MethodGet, PathUploadList, q, nil, &resp); err != nil {
		return nil, false, err
	}
	return resp.Uploads, resp.Truncated, nil
}

// PutUploadPart stores a part record of an open upload of bucket/key.
func (c *Client) PutUploadPart(ctx context.Context, addr, bucket, key string, p *metadata.UploadPart) (*metadata.UploadPart, error) {
	op := fmt.Sprintf("put part %s/%d", p.UploadID, p.Number)
	body, err := json.Marshal(p)
	if err != nil {
		return nil, &NodeError{Addr: addr, Op: op, Err: err}
	}
	var resp PutPartResponse
	q := url.Values{ParamBucket: {bucket}, ParamKey: {key}}
	if err := c.call(ctx, addr, op, http.MethodPost, PathUploadParts, q, bytes.NewReader(body), &resp); err != nil {
		return nil, err
	}
	return resp.Loser, nil
}

// ListUploadParts returns every part record of an upload on addr.
func (c *Client) ListUploadParts(ctx context.Context, addr, id string) ([]metadata.UploadPart, error) {
	var out []metadata.UploadPart
	q := url.Values{ParamUpload: {id}}
	if err := c.call(ctx, addr, "list parts "+id, http.MethodGet, PathUploadParts, q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// FinishUpload removes a completed or aborted upload from addr.
func (c *Client) FinishUpload(ctx context.Context, addr string, r FinishRequest) error {
	body, err := json.Marshal(r)
	if err != nil {
		return &NodeError{Addr: addr, Op: "finish upload", Err: err}
	}
	return c.call(ctx, addr, "finish upload "+r.Upload, http.MethodPost, PathUploadFinish, nil, bytes.NewReader(body), nil)
}

// AcquireLease takes or renews the lease name for holder on addr. It
// fails with ErrLeaseHeld while another holder's lease is live.
func (c *Client) AcquireLease(ctx context.Context, addr, name, holder string, ttl time.Duration) error {
	body, err := json.Marshal(LeaseRequest{Name: name, Holder: holder, TTLms: ttl.Milliseconds()})
	if err != nil {
		return &NodeError{Addr: addr, Op: "acquire lease", Err: err}
	}
	return c.call(ctx, addr, "acquire lease "+name, http.MethodPost, PathLeases, nil, bytes.NewReader(body), nil)
}

// ReleaseLease releases holder's lease name on addr; releasing a lease
// not held succeeds.
func (c *Client) ReleaseLease(ctx context.Context, addr, name, holder string) error {
	q := url.Values{ParamName: {name}, ParamHolder: {holder}}
	return c.call(ctx, addr, "release lease "+name, http.MethodDelete, PathLeases, q, nil, nil)
}
