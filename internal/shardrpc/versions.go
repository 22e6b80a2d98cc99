package shardrpc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/regen-s3/regen/metadata"
)

// PathManifestVersions answers GET ?bucket=&key= with every version of the
// key the node holds: its current manifest and the previous versions it
// keeps until the current one is confirmed (see metadata.Store.Versions).
const PathManifestVersions = "/v1/manifests/versions"

// ParamInline set to "0" asks PathManifestVersions to leave out the inline
// data of small objects: a lookup that asks n servers needs it from one.
// ParamFormat=FormatBinary asks it, and PathManifestVersionsBatch, for
// the binary reply (versions_bin.go).
const ParamInline = "inline"

// ManifestVersionsResponse answers GET PathManifestVersions. Current is
// nil, and Previous empty, when the node holds no version of the key (the
// reply is then a NotFound error instead).
type ManifestVersionsResponse struct {
	Current  *metadata.Manifest   `json:"current"`
	Previous []*metadata.Manifest `json:"previous"`
	// Committed is the retired committed mark (metadata flagCommitted):
	// servers no longer set it, and gateways ignore it (a mark never
	// stands in for votes: docs/CONSISTENCY.md, rule 1). Kept for wire
	// compatibility only: servers that predate the retirement still send
	// it, and the gateway's tests use it to show such marks change no
	// answer. Decoders ignore it, so it can go once no such server runs.
	Committed bool `json:"committed,omitempty"`
}

// GetManifestVersions returns the node's current manifest of (bucket, key)
// and its previous versions, newest first, tombstones included;
// ErrNotFound when it holds none. Readers count every version a node holds
// as that node's vote, so a failed overwrite does not hide the version it
// failed to replace.
func (c *Client) GetManifestVersions(ctx context.Context, addr, bucket, key string) (cur *metadata.Manifest, prev []*metadata.Manifest, err error) {
	resp, err := c.getManifestVersions(ctx, addr, bucket, key, url.Values{ParamBucket: {bucket}, ParamKey: {key}})
	return resp.Current, resp.Previous, err
}

// LookupVersions is GetManifestVersions for a reader: the whole answer,
// with the committed mark of the current manifest; with inline false the
// inline data of small objects is left out (their Inline is nil; Size
// still tells their length).
func (c *Client) LookupVersions(ctx context.Context, addr, bucket, key string, inline bool) (ManifestVersionsResponse, error) {
	q := url.Values{ParamBucket: {bucket}, ParamKey: {key}}
	if !inline {
		q.Set(ParamInline, "0")
	}
	return c.getManifestVersions(ctx, addr, bucket, key, q)
}

func (c *Client) getManifestVersions(ctx context.Context, addr, bucket, key string, q url.Values) (ManifestVersionsResponse, error) {
	op := fmt.Sprintf("get manifest versions %s/%s", bucket, key)
	q.Set(ParamFormat, FormatBinary)
	var resp ManifestVersionsResponse
	keys, err := c.versionsCall(ctx, addr, op, http.MethodGet, PathManifestVersions, q, nil, &resp)
	switch {
	case err != nil:
		return ManifestVersionsResponse{}, err
	case keys != nil && len(keys) != 1:
		return ManifestVersionsResponse{}, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("%d answers for one key", len(keys))}
	case keys != nil && keys[0].Err != "":
		return ManifestVersionsResponse{}, &NodeError{Addr: addr, Op: op, Err: errors.New(keys[0].Err)}
	case keys != nil:
		resp = ManifestVersionsResponse{Current: keys[0].Current, Previous: keys[0].Previous, Committed: keys[0].Committed}
	}
	if resp.Current == nil {
		return ManifestVersionsResponse{}, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("reply without a current manifest: %w", ErrNotFound)}
	}
	return resp, nil
}
