package shardrpc

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Repair endpoints. Repairs run between shard servers: a coordinator sends
// one small control request and the servers move the data among
// themselves, so the coordinator never relays shard bytes.
//
//   - POST PathRepairPull (JSON PullRequest): the server reads whole shards
//     from Sources (its own from disk), decodes the Targets' shards and
//     stores them (PULL-Rep on the destination, PULL-Sur on a survivor).
//   - POST PathRepairCore (JSON CoreRequest): the server is a CORE relayer:
//     it asks every helper for its encoding (PathRepairHelper), solves and
//     stores the Targets' shards.
//   - POST PathRepairHelper (JSON HelperRequest): the answer streams, stripe
//     by stripe, what this helper sends for the failure set: raw sub-chunk
//     runs (Clay), dot products (PM) or whole chunks (conventional plans).
//     Errors after the first byte arrive in TrailerError, as for shard GETs.
//     Gateways ask it too, for a few stripes, to read a lost shard's bytes
//     at repair bandwidth (degraded reads of regenerating codes).
//   - POST PathRepairPush (PUSH hop): HeaderRepairSpec carries the JSON
//     PushRequest; the body is the stream of partial slices from the
//     previous hop (empty for the first). The hop adds its coefficient
//     times its local slice and forwards to the next hop, or, as the last
//     hop, stores the rebuilt shards on their targets.
//   - POST PathRepairCopy (JSON CopyRequest): the server copies one whole
//     shard, unchanged, from Source (a draining server that still holds
//     it) to Target: no decoding, the shard's bytes cross the network once.
//   - PUT PathRepairStore{file}/{idx}?size=&crc32c= stores a rebuilt shard:
//     like a shard PUT, but the server checks size and CRC-32C against the
//     manifest's before the file becomes visible.
//
// Every repair answer (pull, core, push) is a JSON RepairReport; a failure
// is an error response whose RepairErrorBody names the node to blame.
const (
	PathRepairPull   = "/v1/repair/pull"
	PathRepairCore   = "/v1/repair/core"
	PathRepairHelper = "/v1/repair/helper"
	PathRepairPush   = "/v1/repair/push"
	PathRepairCopy   = "/v1/repair/copy"
	PathRepairStore  = "/v1/repair/store/"

	// HeaderRepairSpec carries a PUSH hop's PushRequest, base64url JSON,
	// because the body is the partial-slice stream.
	HeaderRepairSpec = "X-Regen-Repair-Spec"
	// ParamSize and ParamCRC are the expected size and CRC-32C (decimal)
	// of a rebuilt shard.
	ParamSize = "size"
	ParamCRC  = "crc32c"

	// CodeRepairFailed marks a repair that failed; RepairErrorBody.Node
	// says which node made it fail.
	CodeRepairFailed = "RepairFailed"
)

// ErrRepair is matched by every *RepairFailure.
var ErrRepair = errors.New("shardrpc: repair failed")

// RepairGroup identifies a stripe group and its geometry.
type RepairGroup struct {
	Code      string `json:"code"`
	FileID    string `json:"file_id"`
	ChunkSize int64  `json:"chunk_size"`
	PartSize  int64  `json:"part_size"`
}

// RepairPeer is a shard server taking part in a repair, with the index of
// the shard it holds (or -1).
type RepairPeer struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
	Idx  int    `json:"idx"`
}

// RepairTarget is a rebuilt shard and the server that stores it; Size and
// CRC are what the manifest says the shard must be.
type RepairTarget struct {
	Idx  int    `json:"idx"`
	ID   string `json:"id"`
	Addr string `json:"addr"`
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc32c"`
}

// PullRequest asks a server to decode Targets from Sources.
type PullRequest struct {
	Method string `json:"method"` // for metrics: pull-rep or pull-sur
	RepairGroup
	Sources []RepairPeer   `json:"sources"` // k shards to decode from
	Targets []RepairTarget `json:"targets"`
	SRU     int            `json:"sru"`
}

// CoreRequest asks a relayer to rebuild Lost from the helpers' encodings.
// Targets lists, for each lost shard, where it is stored.
type CoreRequest struct {
	Method string `json:"method"`
	RepairGroup
	Lost []int `json:"lost"`
	// Erased are shards lost too but not rebuilt now (no target yet): the
	// plan's failure set is Lost plus Erased, and their rebuilt data is
	// dropped.
	Erased  []int          `json:"erased,omitempty"`
	Helpers []RepairPeer   `json:"helpers"` // every live survivor
	Targets []RepairTarget `json:"targets"`
}

// HelperRequest asks a helper for its repair encoding of shard Idx for the
// failure set Lost, every stripe of the group back to back; or, when Count
// is set, only stripes [First, First+Count) (a degraded read rebuilding a
// lost shard's chunks where the range needs them).
type HelperRequest struct {
	RepairGroup
	Lost  []int `json:"lost"`
	Idx   int   `json:"idx"`
	First int64 `json:"first,omitempty"`
	Count int64 `json:"count,omitempty"`
}

// PushRequest describes a PUSH chain and the receiving hop's place in it.
// Each slice position carries one partial slice per lost shard, in Lost
// order. Targets lists where the last hop stores each lost shard.
type PushRequest struct {
	Method string `json:"method"`
	RepairGroup
	Lost    []int          `json:"lost"`
	Chain   []RepairPeer   `json:"chain"` // k survivors, first hop first
	Pos     int            `json:"pos"`
	Targets []RepairTarget `json:"targets"`
	SRU     int            `json:"sru"`
}

// CopyRequest asks a server to copy shard Target.Idx of a group from
// Source (which holds that very index) to Target, verified against the
// size and CRC the manifest records. Sent to the target server, it pulls.
type CopyRequest struct {
	Method string `json:"method"`
	RepairGroup
	Source RepairPeer   `json:"source"`
	Target RepairTarget `json:"target"`
	SRU    int          `json:"sru"`
}

// NodeBytes counts repair bytes a node received from and sent to peers.
type NodeBytes struct {
	In  int64 `json:"in"`
	Out int64 `json:"out"`
}

// RepairReport answers a repair: the bytes each node (by ID) received and
// sent, and the shards stored.
type RepairReport struct {
	Traffic map[string]NodeBytes `json:"traffic"`
	Stored  []RepairTarget       `json:"stored"`
}

// AddTransfer records n bytes sent from node from to node to.
func (r *RepairReport) AddTransfer(from, to string, n int64) {
	if n == 0 {
		return
	}
	if r.Traffic == nil {
		r.Traffic = map[string]NodeBytes{}
	}
	f := r.Traffic[from]
	f.Out += n
	r.Traffic[from] = f
	t := r.Traffic[to]
	t.In += n
	r.Traffic[to] = t
}

// Merge adds o's traffic and stored shards to r.
func (r *RepairReport) Merge(o RepairReport) {
	for id, b := range o.Traffic {
		if r.Traffic == nil {
			r.Traffic = map[string]NodeBytes{}
		}
		c := r.Traffic[id]
		c.In += b.In
		c.Out += b.Out
		r.Traffic[id] = c
	}
	r.Stored = append(r.Stored, o.Stored...)
}

// RepairErrorBody is the error body of a failed repair; Node names the
// node that made it fail ("" when none is to blame).
type RepairErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Node    string `json:"node,omitempty"`
}

// RepairFailure is a repair a server reported as failed, and the node it
// blames.
type RepairFailure struct {
	Node    string
	Message string
}

// Error describes the failure.
func (e *RepairFailure) Error() string {
	return fmt.Sprintf("repair failed (node %s): %s", e.Node, e.Message)
}

// Is makes every RepairFailure match ErrRepair.
func (e *RepairFailure) Is(target error) bool { return target == ErrRepair }

// WriteRepairError answers a failed repair.
func WriteRepairError(w http.ResponseWriter, node string, err error) {
	w.Header().Set(HeaderCode, CodeRepairFailed)
	WriteJSON(w, http.StatusBadGateway, RepairErrorBody{Code: CodeRepairFailed, Message: err.Error(), Node: node})
}

// EncodeSpec encodes a PUSH spec for HeaderRepairSpec.
func EncodeSpec(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// DecodeSpec decodes HeaderRepairSpec into v.
func DecodeSpec(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("%w: bad %s: %w", ErrBadRequest, HeaderRepairSpec, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: bad %s: %w", ErrBadRequest, HeaderRepairSpec, err)
	}
	return nil
}

// RepairStorePath is the URL path that stores rebuilt shard idx of fileID.
func RepairStorePath(fileID string, idx int) string {
	return PathRepairStore + fileID + "/" + fmt.Sprint(idx)
}
