package chaos

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The checker has two parts, both pure functions of the history:
//
//   - porcupine decides whether each key's history is linearizable
//     against a register whose value is the object's hash or absent. It
//     is the judge: a key it finds illegal is a violation.
//   - witness rules name the kind of a violation from a few operations
//     that prove it on their own (a read that returned a value an
//     acknowledged write had replaced before the read began, and so on).
//     They make the figures (lost, stale, resurrected, ...) and the report
//     readable, and they still convict when porcupine runs out of time.
//
// Indeterminate writes (an error, a timeout, a lost connection) may take
// effect at any moment after their invocation, or never: porcupine gets
// them with a completion after every other operation, where taking effect
// and not taking effect are the same. Failed reads tell nothing and are
// left out.

// Finding kinds.
const (
	Lost        = "lost"        // a read found no object although an acknowledged write, and no DELETE that could follow it, preceded the read
	Stale       = "stale"       // a read returned a value an acknowledged PUT had replaced before the read began
	Resurrected = "resurrected" // a read returned a value an acknowledged DELETE had removed before the read began
	Corrupt     = "corrupt"     // a read returned bytes no PUT wrote, or a refused PUT's value, or one before its PUT began
	Conflict    = "conflict"    // two conditional PUTs both succeeded where only one could
	Unreadable  = "unreadable"  // the final read, after the nemesis healed, still failed
	// NotLinearizable is porcupine's verdict where no witness rule fired:
	// the operations are the first completion after which the key's
	// history has no linearization, and those around it.
	NotLinearizable = "not-linearizable"
)

// Finding is one proven violation and the operations that prove it.
type Finding struct {
	Kind string `json:"kind"`
	Key  string `json:"key"`
	Why  string `json:"why"`
	Ops  []Op   `json:"ops"`
	// Nemesis is what the nemesis did from shortly before the first of
	// Ops to the end of the last (filled in by Run).
	Nemesis []Event `json:"nemesis,omitempty"`
}

// String is the finding and its operations, one per line.
func (f Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s", f.Kind, f.Key, f.Why)
	for _, o := range f.Ops {
		b.WriteString("\n    " + o.String())
	}
	for _, e := range f.Nemesis {
		b.WriteString("\n    nemesis " + e.String())
	}
	return b.String()
}

// Report is the checker's verdict on a history.
type Report struct {
	Ops    int `json:"ops"`
	Acked  int `json:"acked"`  // writes acknowledged with a 2xx
	Failed int `json:"failed"` // operations that failed (indeterminate writes, failed reads)
	Keys   int `json:"keys"`

	Lost        int `json:"lost"`
	Stale       int `json:"stale"`
	Resurrected int `json:"resurrected"`
	Corrupt     int `json:"corrupt"`
	Conflicts   int `json:"conflicts"`
	Unreadable  int `json:"unreadable"`
	// Listings counts the successful listings judged; ListMissing and
	// ListDeleted their findings (see checkListings).
	Listings    int `json:"listings"`
	ListMissing int `json:"list_missing"`
	ListDeleted int `json:"list_deleted"`
	// Violations counts the keys whose history is not linearizable (or
	// has a finding); Unknown those porcupine could not decide in time
	// and no witness rule convicted.
	Violations int `json:"violations"`
	Unknown    int `json:"unknown"`

	Findings []Finding `json:"findings,omitempty"`
	// Illegal lists the keys porcupine found not linearizable, and
	// Visualizations the HTML files it drew of them.
	Illegal        []string `json:"illegal,omitempty"`
	Visualizations []string `json:"visualizations,omitempty"`
}

// CheckOptions tune Check.
type CheckOptions struct {
	// Timeout bounds porcupine on one key (0: no bound). Linearizability
	// checking is NP-hard; a key it cannot decide counts as Unknown.
	Timeout time.Duration
	// VizDir, if set, receives one porcupine visualization (HTML) per
	// illegal key.
	VizDir string
}

// Check judges a history: per-key linearizability and the witness rules.
func Check(ops []Op, opt CheckOptions) Report {
	r := Report{Ops: len(ops)}
	var horizon time.Duration
	for _, o := range ops {
		horizon = max(horizon, o.End)
		if o.write() && o.Result == OK {
			r.Acked++
		}
		if o.Result == Failed {
			r.Failed++
		}
	}
	horizon += time.Second
	var keyOps []Op
	for _, o := range ops {
		switch {
		case o.Kind != List:
			keyOps = append(keyOps, o)
		case o.Result == OK:
			r.Listings++
		}
	}
	for _, f := range checkListings(ops) {
		if f.Kind == ListMissing {
			r.ListMissing++
		} else {
			r.ListDeleted++
		}
		r.Findings = append(r.Findings, f)
	}
	m, keys := byKey(keyOps)
	r.Keys = len(keys)
	for _, key := range keys {
		kops := m[key]
		found := witnesses(key, kops)
		for _, f := range found {
			switch f.Kind {
			case Lost:
				r.Lost++
			case Stale:
				r.Stale++
			case Resurrected:
				r.Resurrected++
			case Corrupt:
				r.Corrupt++
			case Conflict:
				r.Conflicts++
			case Unreadable:
				r.Unreadable++
			}
		}
		r.Findings = append(r.Findings, found...)
		hist := porcupineOps(kops, horizon)
		res := porcupine.CheckOperationsTimeout(registerModel, hist, opt.Timeout)
		switch {
		case res == porcupine.Illegal:
			r.Illegal = append(r.Illegal, key)
			// The shortest illegal prefix names the culprit and makes a
			// smaller drawing, quicker to draw and to read.
			f, ok := firstIllegal(key, kops, horizon, opt.Timeout)
			if ok {
				hist = prefix(kops, f.Ops[0].End, horizon)
				if len(found) == 0 {
					r.Findings = append(r.Findings, f)
				}
			}
			if opt.VizDir != "" {
				if p, err := visualize(key, hist, opt); err == nil {
					r.Visualizations = append(r.Visualizations, p)
				} else {
					r.Findings = append(r.Findings, Finding{Kind: "note", Key: key, Why: "visualization: " + err.Error()})
				}
			}
		case res == porcupine.Unknown && len(found) == 0:
			r.Unknown++
		}
		if res == porcupine.Illegal || len(found) > 0 {
			r.Violations++
		}
	}
	return r
}

// porcupineOps turns one key's operations into porcupine's: failed reads
// are dropped, failed writes complete at the horizon.
func porcupineOps(ops []Op, horizon time.Duration) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		end := o.End
		if o.Result == Failed {
			if !o.write() {
				continue
			}
			end = horizon
		}
		out = append(out, porcupine.Operation{ClientId: o.Client, Input: o, Call: int64(o.Start), Return: int64(end)})
	}
	return out
}

// prefix is one key's history as it stood at t, for porcupine: the
// operations invoked by t, those completed by t as they ended, writes
// still running as indeterminate, reads still running left out. It is a
// relaxation of the whole history (and of every later prefix): if it has
// no linearization, neither has the history.
func prefix(ops []Op, t, horizon time.Duration) []porcupine.Operation {
	var cut []Op
	for _, o := range ops {
		switch {
		case o.Start > t:
		case o.End <= t:
			cut = append(cut, o)
		case o.write():
			o.Result = Failed
			cut = append(cut, o)
		}
	}
	return porcupineOps(cut, horizon)
}

// firstIllegal finds the first completion after which the key's history
// has no linearization (a binary search over prefixes) and returns it
// with the operations around it.
func firstIllegal(key string, ops []Op, horizon, timeout time.Duration) (Finding, bool) {
	var ends []time.Duration
	for _, o := range ops {
		if o.determinate() {
			ends = append(ends, o.End)
		}
	}
	slices.Sort(ends)
	i := sort.Search(len(ends), func(i int) bool {
		return porcupine.CheckOperationsTimeout(registerModel, prefix(ops, ends[i], horizon), timeout) == porcupine.Illegal
	})
	if i == len(ends) {
		return Finding{}, false
	}
	t := ends[i]
	var culprit Op
	for _, o := range ops {
		if o.determinate() && o.End == t {
			culprit = o
		}
	}
	// Context: what ran during the culprit and the few seconds before it,
	// writes first.
	var around []Op
	for _, o := range ops {
		if o.ID != culprit.ID && o.Start <= t && end(o) >= culprit.Start-5*time.Second {
			around = append(around, o)
		}
	}
	slices.SortStableFunc(around, func(a, b Op) int {
		if a.write() != b.write() {
			if a.write() {
				return -1
			}
			return 1
		}
		return 0
	})
	around = around[:min(len(around), 15)]
	slices.SortFunc(around, func(a, b Op) int { return cmp.Compare(a.Start, b.Start) })
	return Finding{Kind: NotLinearizable, Key: key,
		Why: fmt.Sprintf("no linearization of the history up to %.3fs explains this operation's result (first the operation, then those around it)", t.Seconds()),
		Ops: append([]Op{culprit}, around...)}, true
}

// registerModel is one key: its state is the value's hash, "" when the
// key has no object.
var registerModel = porcupine.Model{
	Init: func() any { return "" },
	Step: func(state, input, _ any) (bool, any) {
		return step(state.(string), input.(Op))
	},
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		h.Write([]byte(state.(string)))
		return h.Sum64()
	},
	DescribeOperation: func(input, _ any) string { return input.(Op).String() },
	DescribeState:     func(state any) string { return short(state.(string)) },
}

// step is the register's sequential specification: whether o can happen
// in state cur, and the state after it.
func step(cur string, o Op) (bool, string) {
	switch o.Kind {
	case Get, Head:
		switch o.Result {
		case OK:
			return cur == o.Value && cur != "", cur
		case NotFound:
			return cur == "", cur
		}
		return true, cur // a failed read is no constraint (not passed in)
	case Delete:
		switch o.Result {
		case OK, Failed:
			return true, ""
		}
		return false, cur
	case Put:
		var holds bool
		var refusal Result // the answer when the precondition fails
		switch o.Cond {
		case NoCond:
			holds = true
		case IfNoneMatch:
			holds, refusal = cur == "", PreconditionFailed
		case IfMatch:
			holds = cur != "" && cur == o.Match
			refusal = PreconditionFailed
			if cur == "" {
				refusal = NotFound
			}
		}
		switch o.Result {
		case OK:
			return holds, o.Value
		case Failed:
			if holds {
				return true, o.Value
			}
			return true, cur
		case PreconditionFailed, NotFound:
			return !holds && o.Result == refusal, cur
		}
	}
	return false, cur
}

// visualize writes porcupine's drawing of one key's history to VizDir.
func visualize(key string, hist []porcupine.Operation, opt CheckOptions) (string, error) {
	res, info := porcupine.CheckOperationsVerbose(registerModel, hist, opt.Timeout)
	if res != porcupine.Illegal {
		return "", fmt.Errorf("the verbose check answered %s", res)
	}
	if err := os.MkdirAll(opt.VizDir, 0o755); err != nil {
		return "", err
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(key) + ".html"
	path := filepath.Join(opt.VizDir, name)
	if err := porcupine.VisualizePath(registerModel, info, path); err != nil {
		return "", fmt.Errorf("visualize %s: %w", key, err)
	}
	return path, nil
}

// forever stands for the completion of an indeterminate write.
const forever = time.Duration(math.MaxInt64)

func isRead(o Op) bool { return o.Kind == Get || o.Kind == Head }

// observed returns what o saw of its key, if it saw anything: a read's
// answer, the value a successful If-Match PUT matched, or the absence a
// successful If-None-Match: * PUT found.
func observed(o Op) (value string, res Result, ok bool) {
	switch {
	case isRead(o) && (o.Result == OK || o.Result == NotFound):
		return o.Value, o.Result, true
	case o.Kind == Put && o.Result == OK && o.Cond == IfMatch:
		return o.Match, OK, true
	case o.Kind == Put && o.Result == OK && o.Cond == IfNoneMatch:
		return "", NotFound, true
	}
	return "", 0, false
}

// end is when o completed, or forever for an indeterminate write (it may
// take effect any time after its invocation).
func end(o Op) time.Duration {
	if o.Result == Failed && o.write() {
		return forever
	}
	return o.End
}

// witnesses applies the witness rules to one key's operations. Each rule
// only fires on operations that are a violation on their own, whatever
// else happened: a finding never needs porcupine to be believed.
func witnesses(key string, ops []Op) []Finding {
	writer := map[string]Op{}
	for _, o := range ops {
		if o.Kind == Put {
			writer[o.Value] = o
		}
	}
	var out []Finding
	add := func(kind, why string, ops ...Op) {
		out = append(out, Finding{Kind: kind, Key: key, Why: why, Ops: ops})
	}
	for _, r := range ops {
		if isRead(r) && r.Result == Failed && r.Final {
			add(Unreadable, "the read after the nemesis healed still failed", r)
		}
		rv, rres, ok := observed(r)
		if !ok {
			continue
		}
		subject := "the read"
		if r.Kind == Put {
			subject = "the conditional PUT"
		}
		switch rres {
		case OK:
			w, ok := writer[rv]
			switch {
			case !ok:
				add(Corrupt, subject+" saw a value no PUT wrote", r)
				continue
			case w.Result == PreconditionFailed || w.Result == NotFound:
				add(Corrupt, subject+" saw the value of a PUT that was refused", w, r)
				continue
			case w.Start > r.End:
				add(Corrupt, subject+" saw a value before its PUT began", r, w)
				continue
			}
			// By when the value had surely taken effect: its PUT's
			// acknowledgement, or the end of the first operation that saw
			// it (a PUT that failed may take effect, and once seen it has).
			evidence := []Op{w}
			in := forever
			if w.Result == OK {
				in = w.End
			}
			for _, o := range ops {
				if ov, ores, ok := observed(o); ok && ores == OK && ov == rv && o.End < r.Start && o.End < in {
					in, evidence = o.End, []Op{w, o}
				}
			}
			if in == forever {
				continue // an indeterminate write may take effect any time
			}
			// The latest acknowledged write that began after that and
			// ended before r began replaced the value for good.
			var by *Op
			for i, o := range ops {
				if o.write() && o.Result == OK && o.Value != rv && o.Start > in && o.End < r.Start {
					if by == nil || o.End > by.End {
						by = &ops[i]
					}
				}
			}
			if by != nil {
				if by.Kind == Delete {
					add(Resurrected, subject+" saw a value an acknowledged DELETE had removed before it began", append(evidence, *by, r)...)
				} else {
					add(Stale, subject+" saw a value an acknowledged PUT had replaced before it began", append(evidence, *by, r)...)
				}
				continue
			}
			// Or an operation that began after that and ended before r
			// began saw something else: the value was replaced by then (by
			// a write that took effect, even one that failed), and a value
			// is written once, so it cannot come back.
			for i, o := range ops {
				ov, ores, ok := observed(o)
				if ok && (ores != OK || ov != rv) && o.Start > in && o.End < r.Start && (by == nil || o.End > by.End) {
					by = &ops[i]
				}
			}
			switch {
			case by == nil:
			case by.Result == NotFound || by.Cond == IfNoneMatch:
				add(Resurrected, subject+" saw a value an earlier operation had already found deleted", append(evidence, *by, r)...)
			default:
				add(Stale, subject+" saw a value an earlier operation had already seen replaced", append(evidence, *by, r)...)
			}
		case NotFound:
			// The latest acknowledged PUT before r, if no DELETE can fall
			// between the two.
			var last *Op
			for i, o := range ops {
				if o.Kind == Put && o.Result == OK && o.End < r.Start && (last == nil || o.End > last.End) {
					last = &ops[i]
				}
			}
			if last == nil {
				continue
			}
			explained := false
			for _, d := range ops {
				if d.Kind == Delete && d.Start < r.End && end(d) > last.Start {
					explained = true
					break
				}
			}
			if !explained {
				add(Lost, subject+" found no object after an acknowledged PUT, and no DELETE could have removed it", *last, r)
			}
		}
	}
	// Conditional writers: two If-None-Match: * PUTs can both succeed only
	// with a DELETE between them; two If-Match PUTs on the same ETag never
	// (every value is written once, so it cannot come back).
	for i, a := range ops {
		if a.Kind != Put || a.Cond == NoCond || a.Result != OK {
			continue
		}
		for _, b := range ops[i+1:] {
			if b.Kind != Put || b.Cond != a.Cond || b.Result != OK {
				continue
			}
			switch a.Cond {
			case IfMatch:
				if a.Match == b.Match {
					add(Conflict, "two If-Match PUTs on the same ETag both succeeded", a, b)
				}
			case IfNoneMatch:
				lo, hi := min(a.Start, b.Start), max(a.End, b.End)
				between := false
				for _, d := range ops {
					if d.Kind == Delete && d.Start < hi && end(d) > lo {
						between = true
						break
					}
				}
				if !between {
					add(Conflict, "two If-None-Match: * PUTs both succeeded with no DELETE that could fall between them", a, b)
				}
			}
		}
	}
	return out
}
