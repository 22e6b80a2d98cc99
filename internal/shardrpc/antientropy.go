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
	// ParamRoot is the caller's metadata.RangeSums.Root of its sums for
	// the server: equal roots are answered with Same instead of the sums
	// (a server of an older version ignores it and sends them).
	ParamRoot = "root"

	// MaxSyncRanges bounds the ranges of one entries request.
	MaxSyncRanges = 256
)

// SyncDigest answers GET PathSyncDigest.
type SyncDigest struct {
	// Sums are metadata.RangeSums in their binary form; none when Same.
	Sums []byte `json:"sums,omitempty"`
	// Same: the caller sent its root (ParamRoot) and it equals the
	// server's, so the shared sets are equal and no sums are sent.
	Same bool `json:"same,omitempty"`
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
// (the caller's node ID), or same (and no sums) when their root is root,
// the caller's root of its own sums for that server.
func (c *Client) SyncDigest(ctx context.Context, addr, peer string, root metadata.Sum) (sums *metadata.RangeSums, same bool, _ error) {
	const op = "sync digest"
	var resp SyncDigest
	if err := c.call(ctx, addr, op, http.MethodGet, PathSyncDigest, url.Values{ParamPeer: {peer}, ParamRoot: {root.String()}}, nil, &resp); err != nil {
		return nil, false, err
	}
	if resp.Same {
		return nil, true, nil
	}
	sums = new(metadata.RangeSums)
	if err := sums.UnmarshalBinary(resp.Sums); err != nil {
		return nil, false, &NodeError{Addr: addr, Op: op, Err: err}
	}
	return sums, false, nil
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
