package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Listing findings.
const (
	// ListMissing: a listing left out a key (or the common prefix of one)
	// that must have been there: a PUT of it was acknowledged before the
	// listing began and no DELETE of it had begun before the listing
	// ended.
	ListMissing = "list-missing"
	// ListDeleted: a listing showed a key (or a common prefix all of
	// whose keys were absent) whose DELETE was acknowledged before the
	// listing began, with no PUT that could have taken effect after that
	// DELETE begun before the listing ended.
	ListDeleted = "list-deleted"
)

// A listing is not a read of one instant of one key, so it is not fed to
// the per-key register. It is held to two rules that follow from the
// per-key guarantees whatever instant inside the listing a key is read at,
// and that ignore every key whose state during the listing is open:
//
//   - present: some PUT of the key was acknowledged before the listing
//     began, and every DELETE of the key (acknowledged, failed or still
//     running) that began before the listing ended was acknowledged
//     before that PUT began. The key exists throughout the listing.
//   - absent: no PUT that may have taken effect (acknowledged or failed)
//     began before the listing ended, or a DELETE was acknowledged before
//     the listing began and every such PUT was acknowledged before that
//     DELETE began. The key is absent throughout the listing.
//
// A common prefix of a delimiter listing must be listed when one of the
// bucket's keys under it is present, and must not be when all of them are
// absent. A failed listing tells nothing.

// keyState is what the history proves of one key during one listing.
type keyState uint8

const (
	stateOpen keyState = iota
	statePresent
	stateAbsent
)

// listState classifies key (its operations, any order) for a listing
// that ran over [start, end].
func listState(ops []Op, start, end time.Duration) keyState {
	// present
	var put *Op
	for i := range ops {
		o := &ops[i]
		if o.Kind == Put && o.Result == OK && o.End < start && (put == nil || o.Start > put.Start) {
			put = o
		}
	}
	if put != nil {
		present := true
		for _, o := range ops {
			if o.Kind == Delete && o.Start < end && !(o.Result == OK && o.End < put.Start) {
				present = false
				break
			}
		}
		if present {
			return statePresent
		}
	}
	// absent
	var del *Op
	for i := range ops {
		o := &ops[i]
		if o.Kind == Delete && o.Result == OK && o.End < start && (del == nil || o.Start > del.Start) {
			del = o
		}
	}
	for _, o := range ops {
		if o.Kind != Put || o.Start >= end || (o.Result != OK && o.Result != Failed) {
			continue // cannot have taken effect during the listing
		}
		if del == nil || !(o.Result == OK && o.End < del.Start) {
			return stateOpen
		}
	}
	return stateAbsent
}

// checkListings judges every successful LIST of ops against the key
// operations of its bucket. A key no operation names cannot be present;
// one that is listed anyway is a finding.
func checkListings(ops []Op) []Finding {
	byKeyOps := map[string][]Op{}
	for _, o := range ops {
		if o.Kind != List && !o.Final {
			byKeyOps[o.Key] = append(byKeyOps[o.Key], o)
		}
	}
	keys := make([]string, 0, len(byKeyOps))
	for k := range byKeyOps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []Finding
	for _, l := range ops {
		if l.Kind != List || l.Result != OK {
			continue
		}
		listed := map[string]bool{}
		for _, n := range l.Listed {
			listed[n] = true
		}
		// names the listing must or must not show, with the key that
		// proves it
		type verdict struct {
			must, mustNot bool
			key           string
		}
		want := map[string]*verdict{}
		var names []string
		for _, key := range keys {
			bucket, k := split(key)
			if bucket+"/" != l.Key {
				continue
			}
			name := key
			if l.Delimiter != "" {
				if i := strings.Index(k, l.Delimiter); i >= 0 {
					name = bucket + "/" + k[:i+len(l.Delimiter)]
				}
			}
			v := want[name]
			if v == nil {
				v = &verdict{mustNot: true}
				want[name] = v
				names = append(names, name)
			}
			switch listState(byKeyOps[key], l.Start, l.End) {
			case statePresent:
				if !v.must {
					v.must, v.key = true, key
				}
				v.mustNot = false
			case stateOpen:
				v.mustNot = false
			}
		}
		sort.Strings(names)
		for _, name := range names {
			v := want[name]
			switch {
			case v.must && !listed[name]:
				out = append(out, listFinding(ListMissing, l, name, v.key, byKeyOps))
			case v.mustNot && listed[name]:
				out = append(out, listFinding(ListDeleted, l, name, name, byKeyOps))
			}
		}
		for _, n := range l.Listed {
			if _, ok := want[n]; !ok {
				out = append(out, Finding{Kind: ListDeleted, Key: n, Why: fmt.Sprintf("listing #%d showed %s, which no operation of the history wrote", l.ID, n), Ops: []Op{l}})
			}
		}
	}
	return out
}

// listFinding names a listing's violation on name and gives the listing
// and the operations of the key that prove it (for a prefix that must not
// be there, those of every key under it).
func listFinding(kind string, l Op, name, key string, byKeyOps map[string][]Op) Finding {
	f := Finding{Kind: kind, Key: name, Ops: []Op{l}}
	if kind == ListMissing {
		f.Why = fmt.Sprintf("listing #%d left out %s, although %s was present throughout it", l.ID, name, key)
	} else {
		f.Why = fmt.Sprintf("listing #%d showed %s, although it was absent throughout it", l.ID, name)
	}
	var keys []string
	for k := range byKeyOps {
		if k == key || (kind == ListDeleted && strings.HasPrefix(k, name)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, o := range byKeyOps[k] {
			if o.write() && o.Start < l.End {
				f.Ops = append(f.Ops, o)
			}
		}
	}
	return f
}
