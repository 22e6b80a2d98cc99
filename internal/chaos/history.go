package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// Kind is what an operation does to its key.
type Kind uint8

// The operations of the workload.
const (
	Put Kind = iota
	Get
	Head
	Delete
	// List is a ListObjectsV2 of one bucket (Op.Key is "bucket/"): its
	// keys and common prefixes are in Op.Listed, judged by checkListings,
	// not by the per-key register.
	List
)

// String names the kind as HTTP does.
func (k Kind) String() string {
	switch k {
	case Put:
		return "PUT"
	case Get:
		return "GET"
	case Head:
		return "HEAD"
	case Delete:
		return "DELETE"
	case List:
		return "LIST"
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Cond is the precondition of a PUT.
type Cond uint8

const (
	// NoCond is an unconditional PUT.
	NoCond Cond = iota
	// IfMatch replaces only the version whose ETag is Op.Match.
	IfMatch
	// IfNoneMatch (If-None-Match: *) creates only.
	IfNoneMatch
)

// Result is how an operation ended, as the client saw it.
type Result uint8

const (
	// OK is a 2xx: the write took effect, the read saw Op.Value.
	OK Result = iota
	// NotFound is a 404: the read saw no object; an If-Match PUT found
	// none to replace.
	NotFound
	// PreconditionFailed is a 412: the PUT's precondition did not hold and
	// nothing was written.
	PreconditionFailed
	// Failed is anything else: an error status, a timeout, a broken
	// connection. A write that failed may or may not have taken effect (it
	// is indeterminate); a read that failed tells nothing.
	Failed
)

// String is the result as the history shows it.
func (r Result) String() string {
	switch r {
	case OK:
		return "ok"
	case NotFound:
		return "not-found"
	case PreconditionFailed:
		return "precondition-failed"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Result(%d)", r)
}

// Op is one operation of the history: its invocation and completion.
type Op struct {
	ID      int    `json:"id"`
	Client  int    `json:"client"`
	Gateway int    `json:"gateway"`
	Key     string `json:"key"` // bucket/key
	Kind    Kind   `json:"kind"`
	Cond    Cond   `json:"cond,omitempty"`
	// Match is the ETag an IfMatch PUT expects.
	Match string `json:"match,omitempty"`
	// Value is the value a PUT wrote, or the one a successful GET/HEAD
	// read: the MD5 of its bytes, which is also its ETag. "" for none.
	Value  string `json:"value,omitempty"`
	Result Result `json:"result"`
	Err    string `json:"err,omitempty"`
	// Start and End are the invocation and completion, as offsets from
	// the start of the run.
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
	// Final marks the durability reads made after the nemesis healed.
	Final bool `json:"final,omitempty"`
	// Delimiter is a LIST's delimiter ("" for a recursive listing), and
	// Listed what it returned: keys as "bucket/key", common prefixes as
	// "bucket/prefix" (the workload's delimiter makes prefixes that are
	// never keys).
	Delimiter string   `json:"delimiter,omitempty"`
	Listed    []string `json:"listed,omitempty"`
}

// String is one line: client, gateway, operation, result, interval.
func (o Op) String() string {
	s := fmt.Sprintf("#%d c%d gw%d %s %s", o.ID, o.Client, o.Gateway, o.Kind, o.Key)
	switch o.Cond {
	case IfMatch:
		s += " If-Match:" + short(o.Match)
	case IfNoneMatch:
		s += " If-None-Match:*"
	}
	if o.Kind == Put {
		s += " " + short(o.Value)
	}
	if o.Kind == List && o.Delimiter != "" {
		s += " delimiter " + o.Delimiter
	}
	s += " -> " + o.Result.String()
	if (o.Kind == Get || o.Kind == Head) && o.Result == OK {
		s += " " + short(o.Value)
	}
	if o.Kind == List && o.Result == OK {
		s += fmt.Sprintf(" %v", o.Listed)
	}
	if o.Err != "" {
		s += " (" + o.Err + ")"
	}
	s += fmt.Sprintf(" [%.3fs, %.3fs]", o.Start.Seconds(), o.End.Seconds())
	if o.Final {
		s += " final"
	}
	return s
}

// short abbreviates a value hash for messages.
func short(v string) string {
	if v == "" {
		return "absent"
	}
	if len(v) > 8 {
		return v[:8]
	}
	return v
}

// write reports whether o may change its key.
func (o Op) write() bool { return o.Kind == Put || o.Kind == Delete }

// determinate reports whether o's outcome is known: an acknowledged or
// refused write, or a read that answered.
func (o Op) determinate() bool { return o.Result != Failed }

// History records operations from concurrent clients.
type History struct {
	mu    sync.Mutex
	start time.Time
	ops   []Op
}

// NewHistory starts a history whose offsets count from start.
func NewHistory(start time.Time) *History { return &History{start: start} }

// Since is the offset of t in the history.
func (h *History) Since(t time.Time) time.Duration { return t.Sub(h.start) }

// Add records a completed operation and returns its ID.
func (h *History) Add(o Op) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	o.ID = len(h.ops)
	h.ops = append(h.ops, o)
	return o.ID
}

// Ops returns a copy of the operations recorded so far.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// byKey splits ops by key, each key's in invocation order; the keys are
// returned sorted.
func byKey(ops []Op) (map[string][]Op, []string) {
	m := map[string][]Op{}
	for _, o := range ops {
		m[o.Key] = append(m[o.Key], o)
	}
	keys := make([]string, 0, len(m))
	for k, l := range m {
		keys = append(keys, k)
		sort.SliceStable(l, func(i, j int) bool { return l[i].Start < l[j].Start })
	}
	sort.Strings(keys)
	return m, keys
}

// ReadHistory loads a history.jsonl that a run wrote, to check it again.
func ReadHistory(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	dec := json.NewDecoder(f)
	for {
		var o Op
		if err := dec.Decode(&o); err == io.EOF {
			return ops, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: operation %d: %w", path, len(ops), err)
		}
		ops = append(ops, o)
	}
}
