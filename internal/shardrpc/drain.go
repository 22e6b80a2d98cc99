package shardrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
)

// PathDrain takes POST with a JSON DrainRequest: it starts (Draining
// true) or cancels (false) the drain of the receiving shard server. The
// server persists the flag in its data dir and advertises it in its
// gossip meta (cluster.Meta.Draining); the answer is a DrainResponse.
const PathDrain = "/v1/drain"

// DrainRequest sets a shard server's drain flag.
type DrainRequest struct {
	Draining bool `json:"draining"`
}

// DrainResponse is a shard server's drain flag after a DrainRequest.
type DrainResponse struct {
	NodeID   string `json:"node_id"`
	Draining bool   `json:"draining"`
	// Changed is false when the flag already had the requested value.
	Changed bool `json:"changed"`
}

// SetDraining starts or cancels the drain of the shard server at addr.
func (c *Client) SetDraining(ctx context.Context, addr string, draining bool) (DrainResponse, error) {
	body, err := json.Marshal(DrainRequest{Draining: draining})
	if err != nil {
		return DrainResponse{}, &NodeError{Addr: addr, Op: "drain", Err: err}
	}
	var out DrainResponse
	err = c.call(ctx, addr, "drain", http.MethodPost, PathDrain, nil, bytes.NewReader(body), &out)
	return out, err
}
