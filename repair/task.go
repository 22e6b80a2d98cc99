package repair

import (
	"fmt"
	"slices"
)

// Method is a repair method.
type Method string

// The methods. "Rep" rebuilds lost shards on replacement servers; "Sur"
// spreads the rebuilding over surviving servers, each rebuilding one lost
// shard (and then storing it on its destination).
const (
	PullRep Method = "pull-rep" // the destination reads k shards and decodes
	PullSur Method = "pull-sur" // each lost shard decoded on a different survivor
	PushRep Method = "push-rep" // chain of k survivors ending at the destination
	PushSur Method = "push-sur" // chains ending at survivors, rotated
	Core    Method = "core"     // relayer asks n-t helpers for their encodings (MSR codes)
	// Copy moves shards off a draining server: each destination copies
	// its shard, unchanged, from the server that still holds it. It is
	// not a reconstruction (the "lost" shards are all still there), so
	// it is no candidate for lost shards and not in Methods.
	Copy Method = "copy"
)

// Methods lists every method, in the order benchmarks report them.
var Methods = []Method{PullRep, PullSur, PushRep, PushSur, Core}

// ParseMethod validates a method name.
func ParseMethod(s string) (Method, error) {
	m := Method(s)
	if !slices.Contains(Methods, m) {
		return "", fmt.Errorf("repair: unknown method %q (want one of %v)", s, Methods)
	}
	return m, nil
}

// Node is a shard server as a task sees it.
type Node struct {
	ID   string `json:"id"`
	Addr string `json:"addr"` // shard API host:port
}

// Task is one repair of one stripe group (an object's or part's shard
// files): everything an executor needs, nothing it must look up.
type Task struct {
	// Code is the codec name of the group, e.g. "clay-6-3".
	Code string `json:"code"`
	// FileID names the group's shard files (shard i is FileID.i on
	// Placement[i]).
	FileID string `json:"file_id"`
	// ChunkSize is the shard chunk of a full stripe; PartSize the group's
	// data bytes. Together with Code they give the stripe geometry
	// (metadata.StripeGeometry).
	ChunkSize int64 `json:"chunk_size"`
	PartSize  int64 `json:"part_size"`
	// ShardCRC is the CRC-32C of every shard file's data (from the
	// manifest); rebuilt shards are verified against it.
	ShardCRC []uint32 `json:"shard_crc"`
	// Placement holds the server of each shard index; lost shards' entries
	// name the server that held them (it may be dead).
	Placement []Node `json:"placement"`
	// Lost are the shard indexes to rebuild, ascending. For Copy they are
	// the shards to move; Placement still names their (live) holders.
	Lost []int `json:"lost"`
	// Unavailable are the other shards that cannot help, ascending: lost
	// ones no server can take yet, and any on a dead or suspect server.
	// They are never helpers, and a CORE repair plans for Lost and
	// Unavailable together: a Clay or PM single-failure plan would ask
	// them for their part.
	Unavailable []int `json:"unavailable,omitempty"`
	// Method is how to rebuild them.
	Method Method `json:"method"`
	// Helpers are the shard indexes to read from, in order: for PUSH the
	// chain order (first hop first); for PULL the k shards to decode from;
	// for CORE the n-t helpers. Empty means the executor chooses.
	Helpers []int `json:"helpers,omitempty"`
	// Dest maps each lost index to the server that will store the rebuilt
	// shard. It never names a server holding another shard of the group.
	Dest map[int]Node `json:"dest"`
	// SRU is the slice (request unit) size in bytes for pipelined methods.
	SRU int `json:"sru"`
}

// Validate checks the task's internal consistency.
func (t *Task) Validate() error {
	switch {
	case t.Code == "" || t.FileID == "":
		return fmt.Errorf("repair: task needs a code and a file ID")
	case len(t.Lost) == 0:
		return fmt.Errorf("repair: task %s has nothing to rebuild", t.FileID)
	case len(t.ShardCRC) != len(t.Placement):
		return fmt.Errorf("repair: task %s: %d CRCs for %d shards", t.FileID, len(t.ShardCRC), len(t.Placement))
	}
	holders := map[string]bool{}
	lost := map[int]bool{}
	for _, i := range t.Lost {
		if i < 0 || i >= len(t.Placement) {
			return fmt.Errorf("repair: task %s: lost shard %d out of range", t.FileID, i)
		}
		lost[i] = true
	}
	for _, i := range t.Unavailable {
		if i < 0 || i >= len(t.Placement) || lost[i] {
			return fmt.Errorf("repair: task %s: unavailable shard %d is out of range or also to rebuild", t.FileID, i)
		}
	}
	for i, n := range t.Placement {
		if !lost[i] {
			holders[n.ID] = true
		} else if t.Method == Copy && n.Addr == "" {
			return fmt.Errorf("repair: task %s: shard %d to copy has no live holder", t.FileID, i)
		}
	}
	for _, i := range t.Lost {
		d, ok := t.Dest[i]
		if !ok || d.Addr == "" {
			return fmt.Errorf("repair: task %s: no destination for shard %d", t.FileID, i)
		}
		if holders[d.ID] {
			return fmt.Errorf("repair: task %s: destination %s already holds a shard of the group", t.FileID, d.ID)
		}
	}
	return nil
}

// Result is what an executor did.
type Result struct {
	Method Method `json:"method"`
	// BytesMoved counts every byte sent between servers for this task;
	// MaxNodeIn the bytes received by the busiest server.
	BytesMoved int64 `json:"bytes_moved"`
	MaxNodeIn  int64 `json:"max_node_in"`
	// NodeIn is the bytes each server (by ID) received, for callers that
	// sum the load of many tasks per server.
	NodeIn  map[string]int64 `json:"node_in,omitempty"`
	Seconds float64          `json:"seconds"`
	// Rebuilt maps each rebuilt shard index to the server now holding it,
	// durable and verified against ShardCRC.
	Rebuilt map[int]Node `json:"rebuilt"`
}

// ExecError says which node made a repair fail.
type ExecError struct {
	Node string // node ID, or "" when no single node is to blame
	Op   string
	Err  error
}

// Error describes the failure.
func (e *ExecError) Error() string {
	if e.Node == "" {
		return fmt.Sprintf("repair %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("repair %s: node %s: %v", e.Op, e.Node, e.Err)
}

// Unwrap returns the underlying error, for errors.Is and errors.As.
func (e *ExecError) Unwrap() error { return e.Err }
