package chaos

import (
	"slices"
	"testing"
	"time"
)

// at sets o's key and interval (seconds).
func at(key string, o Op, start, end float64) Op {
	o.Key = key
	o.Start = time.Duration(start * float64(time.Second))
	o.End = time.Duration(end * float64(time.Second))
	return o
}

func listOp(delim string, start, end float64, listed ...string) Op {
	o := at("b/", Op{Kind: List, Result: OK, Delimiter: delim, Listed: listed}, start, end)
	if listed == nil {
		o.Listed = []string{}
	}
	return o
}

func listKinds(ops []Op) []string {
	for i := range ops {
		ops[i].ID = i
	}
	var s []string
	for _, f := range checkListings(ops) {
		s = append(s, f.Kind+" "+f.Key)
	}
	return s
}

func TestCheckListings(t *testing.T) {
	acked := at("b/key-00", put("v1", OK), 1, 2)
	for _, tc := range []struct {
		name string
		ops  []Op
		want []string
	}{
		{"acknowledged and listed", []Op{acked, listOp("", 3, 4, "b/key-00")}, nil},
		{"acknowledged and missing", []Op{acked, listOp("", 3, 4)}, []string{ListMissing + " b/key-00"}},
		{"PUT concurrent with the listing: open", []Op{at("b/key-00", put("v1", OK), 1, 3.5), listOp("", 3, 4)}, nil},
		{"DELETE begun during the listing: open", []Op{acked, at("b/key-00", del(OK), 3.5, 5), listOp("", 3, 4)}, nil},
		{"failed DELETE before the PUT: open", []Op{at("b/key-00", del(Failed), 0, 0.5), acked, listOp("", 3, 4)}, nil},
		{"acknowledged DELETE before the PUT: present", []Op{at("b/key-00", del(OK), 0, 0.5), acked, listOp("", 3, 4)},
			[]string{ListMissing + " b/key-00"}},
		{"deleted and listed", []Op{acked, at("b/key-00", del(OK), 2.5, 2.8), listOp("", 3, 4, "b/key-00")},
			[]string{ListDeleted + " b/key-00"}},
		{"deleted and not listed", []Op{acked, at("b/key-00", del(OK), 2.5, 2.8), listOp("", 3, 4)}, nil},
		{"failed PUT before the DELETE: open", []Op{at("b/key-00", put("v0", Failed), 0, 1), acked,
			at("b/key-00", del(OK), 2.5, 2.8), listOp("", 3, 4, "b/key-00")}, nil},
		{"refused PUT after the DELETE: still absent", []Op{acked, at("b/key-00", del(OK), 2.5, 2.8),
			at("b/key-00", putIM("v1", "v2", NotFound), 2.9, 3.1), listOp("", 3, 4, "b/key-00")},
			[]string{ListDeleted + " b/key-00"}},
		{"never written and listed", []Op{at("b/key-01", get(""), 1, 2), listOp("", 3, 4, "b/key-01")},
			[]string{ListDeleted + " b/key-01"}},
		{"other bucket's listing", []Op{acked, at("c/", Op{Kind: List, Result: OK, Listed: []string{}}, 3, 4)}, nil},
		{"failed listing tells nothing", []Op{acked, at("b/", Op{Kind: List, Result: Failed}, 3, 4)}, nil},
		{"prefix of a present key", []Op{acked, at("b/key-10", put("v", OK), 1, 2), listOp("-0", 3, 4, "b/key-0", "b/key-10")}, nil},
		{"prefix missing", []Op{acked, listOp("-0", 3, 4)}, []string{ListMissing + " b/key-0"}},
		{"prefix listed while one key under it is open", []Op{acked, at("b/key-00", del(OK), 2.5, 2.8),
			at("b/key-02", put("v", Failed), 1, 2), listOp("-0", 3, 4, "b/key-0")}, nil},
		{"prefix of deleted keys listed", []Op{acked, at("b/key-00", del(OK), 2.5, 2.8),
			at("b/key-02", get(""), 1, 2), listOp("-0", 3, 4, "b/key-0")},
			[]string{ListDeleted + " b/key-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := listKinds(tc.ops); !slices.Equal(got, tc.want) {
				t.Errorf("findings %v, want %v", got, tc.want)
			}
		})
	}
}

// Listings stay out of the per-key register and count in the report.
func TestCheckCountsListings(t *testing.T) {
	ops := []Op{at("b/key-00", put("v1", OK), 1, 2), listOp("", 3, 4)}
	r := check(t, ops)
	if r.Listings != 1 || r.ListMissing != 1 || r.Violations != 0 || r.Keys != 1 {
		t.Fatalf("report %+v: want 1 listing, 1 missing key, the key itself linearizable", r)
	}
}
