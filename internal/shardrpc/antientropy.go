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

// Anti-entropy endpoints (metadata/digest.go): a shard server compares
// what it shares with a peer range by range, and lists only the ranges
// that differ.
//
//   - GET PathSyncDigest?peer=ID answers the server's range sums of the
//     manifests it shares with node ID (the caller), as JSON SyncDigest.
//   - POST PathSyncEntries (JSON SyncEntriesRequest) answers the entries
//     of those ranges, as JSON SyncEntriesResponse.
const (
	PathSyncDigest  = "/v1/sync/digest"
	PathSyncEntries = "/v1/sync/entries"

	ParamPeer = "peer"

	// MaxSyncRanges bounds the ranges of one entries request.
	MaxSyncRanges = 256
)

// SyncDigest answers GET PathSyncDigest.
type SyncDigest struct {
	// Sums are metadata.RangeSums in their binary form.
	Sums []byte `json:"sums"`
}

// SyncEntriesRequest asks for the entries of Ranges shared with Peer.
type SyncEntriesRequest struct {
	Peer   string `json:"peer"`
	Ranges []int  `json:"ranges"`
}

// SyncEntriesResponse answers POST PathSyncEntries.
type SyncEntriesResponse struct {
	Entries []metadata.RangeEntry `json:"entries"`
}

// SyncDigest returns the range sums the server at addr keeps for peer
// (the caller's node ID).
func (c *Client) SyncDigest(ctx context.Context, addr, peer string) (*metadata.RangeSums, error) {
	const op = "sync digest"
	var resp SyncDigest
	if err := c.call(ctx, addr, op, http.MethodGet, PathSyncDigest, url.Values{ParamPeer: {peer}}, nil, &resp); err != nil {
		return nil, err
	}
	sums := new(metadata.RangeSums)
	if err := sums.UnmarshalBinary(resp.Sums); err != nil {
		return nil, &NodeError{Addr: addr, Op: op, Err: err}
	}
	return sums, nil
}

// SyncEntries returns the entries of ranges the server at addr shares
// with peer; more than MaxSyncRanges ranges take several calls.
func (c *Client) SyncEntries(ctx context.Context, addr, peer string, ranges []int) ([]metadata.RangeEntry, error) {
	var out []metadata.RangeEntry
	for len(ranges) > 0 {
		n := min(len(ranges), MaxSyncRanges)
		body, err := json.Marshal(SyncEntriesRequest{Peer: peer, Ranges: ranges[:n]})
		if err != nil {
			return nil, err
		}
		var resp SyncEntriesResponse
		op := fmt.Sprintf("sync entries (%d ranges)", n)
		if err := c.call(ctx, addr, op, http.MethodPost, PathSyncEntries, nil, bytes.NewReader(body), &resp); err != nil {
			return nil, err
		}
		out = append(out, resp.Entries...)
		ranges = ranges[n:]
	}
	return out, nil
}
