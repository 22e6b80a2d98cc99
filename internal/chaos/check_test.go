package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// h builds a one-key history from compact operations; times are in
// seconds.
type hb struct {
	ops []Op
}

func (b *hb) add(o Op, start, end float64) *hb {
	o.Key = "b/k"
	o.Start = time.Duration(start * float64(time.Second))
	o.End = time.Duration(end * float64(time.Second))
	o.ID = len(b.ops)
	b.ops = append(b.ops, o)
	return b
}

func put(v string, r Result) Op    { return Op{Kind: Put, Value: v, Result: r} }
func putINM(v string, r Result) Op { return Op{Kind: Put, Cond: IfNoneMatch, Value: v, Result: r} }
func putIM(match, v string, r Result) Op {
	return Op{Kind: Put, Cond: IfMatch, Match: match, Value: v, Result: r}
}
func get(v string) Op { return Op{Kind: Get, Value: v, Result: OK} }
func getNone() Op     { return Op{Kind: Get, Result: NotFound} }
func del(r Result) Op { return Op{Kind: Delete, Result: r} }
func final(o Op) Op   { o.Final = true; return o }
func check(t *testing.T, ops []Op) Report {
	t.Helper()
	return Check(ops, CheckOptions{Timeout: 10 * time.Second})
}
func kinds(r Report) (s []string) {
	for _, f := range r.Findings {
		s = append(s, f.Kind)
	}
	return s
}
func wantClean(t *testing.T, r Report) {
	t.Helper()
	if r.Violations != 0 || len(r.Findings) != 0 || r.Unknown != 0 {
		t.Fatalf("want a clean verdict, got %+v", r)
	}
}
func wantFinding(t *testing.T, r Report, kind string) {
	t.Helper()
	if r.Violations != 1 {
		t.Errorf("violations = %d, want 1 (%+v)", r.Violations, r)
	}
	if len(r.Illegal) != 1 {
		t.Errorf("porcupine found %v illegal, want the key", r.Illegal)
	}
	if k := kinds(r); len(k) != 1 || k[0] != kind {
		t.Errorf("findings %v, want one %s", k, kind)
	}
}

func TestLinearizableHistoryPasses(t *testing.T) {
	var b hb
	b.add(put("v1", OK), 0, 1).
		add(get("v1"), 1.5, 2).
		// Two concurrent writes; the reads see them in one order.
		add(put("v2", OK), 3, 6).
		add(put("v3", OK), 3, 6).
		add(get("v3"), 4, 4.5).
		add(get("v2"), 5, 5.5).
		// A failed write may take effect late...
		add(put("v4", Failed), 7, 8).
		add(get("v2"), 9, 10).
		add(get("v4"), 11, 12).
		// ...and a failed read says nothing.
		add(Op{Kind: Get, Result: Failed, Err: "503 SlowDown"}, 12, 13).
		add(putIM("v4", "v5", OK), 14, 15).
		add(putIM("v4", "v6", PreconditionFailed), 14.5, 16).
		add(putINM("v7", PreconditionFailed), 16, 17).
		add(del(OK), 18, 19).
		add(putIM("v5", "v8", NotFound), 19.5, 20).
		add(Op{Kind: Head, Result: NotFound}, 20, 21).
		add(putINM("v9", OK), 22, 23).
		add(del(Failed), 24, 25).
		add(final(get("v9")), 30, 31)
	r := check(t, b.ops)
	wantClean(t, r)
	if r.Ops != 19 || r.Acked != 6 || r.Failed != 3 {
		t.Errorf("ops/acked/failed = %d/%d/%d, want 19/6/3", r.Ops, r.Acked, r.Failed)
	}
}

func TestStaleReadFails(t *testing.T) {
	var b hb
	b.add(put("v1", OK), 0, 1).add(put("v2", OK), 2, 3).add(get("v1"), 4, 5)
	r := check(t, b.ops)
	wantFinding(t, r, Stale)
	if r.Stale != 1 {
		t.Errorf("stale = %d", r.Stale)
	}
}

func TestLostAcknowledgedWriteFails(t *testing.T) {
	var b hb
	// A failed PUT before cannot explain the absence; only a DELETE can.
	b.add(put("v0", Failed), 0, 0.5).add(put("v1", OK), 1, 2).add(get("v1"), 3, 4).add(final(getNone()), 10, 11)
	r := check(t, b.ops)
	if r.Lost != 1 || r.Violations != 1 || len(r.Illegal) != 1 {
		t.Fatalf("want the lost write convicted: %+v", r)
	}
	if got := r.Findings[0]; got.Kind != Lost || !got.Ops[1].Final {
		t.Errorf("finding %v", got)
	}
}

func TestIndeterminateDeleteExplainsAbsence(t *testing.T) {
	var b hb
	b.add(put("v1", OK), 1, 2).add(del(Failed), 2.5, 3).add(final(getNone()), 10, 11)
	wantClean(t, check(t, b.ops))
}

func TestResurrectedDeleteFails(t *testing.T) {
	var b hb
	b.add(put("v1", OK), 0, 1).add(del(OK), 2, 3).add(getNone(), 3.5, 4).add(final(get("v1")), 10, 11)
	r := check(t, b.ops)
	wantFinding(t, r, Resurrected)
	if r.Resurrected != 1 {
		t.Errorf("resurrected = %d", r.Resurrected)
	}
}

func TestDoubleConditionalWinnerFails(t *testing.T) {
	t.Run("if-none-match", func(t *testing.T) {
		var b hb
		b.add(putINM("v1", OK), 0, 2).add(putINM("v2", OK), 1, 3)
		wantFinding(t, check(t, b.ops), Conflict)
	})
	t.Run("if-match", func(t *testing.T) {
		var b hb
		b.add(put("v1", OK), 0, 1).
			add(putIM("v1", "v2", OK), 2, 4).
			add(put("v3", OK), 2, 4). // an unconditional writer in the mix
			add(putIM("v1", "v4", OK), 3, 5)
		wantFinding(t, check(t, b.ops), Conflict)
	})
	t.Run("a delete between is fine", func(t *testing.T) {
		var b hb
		b.add(putINM("v1", OK), 0, 1).add(del(OK), 2, 3).add(putINM("v2", OK), 4, 5)
		wantClean(t, check(t, b.ops))
	})
}

// TestPorcupineAloneConvicts: an If-Match PUT refused (412) although
// the key held the very value it matched, and no other write ran: no
// witness rule names a refusal, only the linearizability check catches it.
func TestPorcupineAloneConvicts(t *testing.T) {
	var b hb
	b.add(put("v1", OK), 0, 1).add(get("v1"), 1.5, 2).add(putIM("v1", "v2", PreconditionFailed), 3, 4).add(get("v1"), 5, 6)
	dir := t.TempDir()
	r := Check(b.ops, CheckOptions{Timeout: 10 * time.Second, VizDir: dir})
	if r.Violations != 1 || len(r.Illegal) != 1 || len(r.Findings) != 1 || r.Findings[0].Kind != NotLinearizable {
		t.Fatalf("want porcupine to convict with no witness: %+v", r)
	}
	// The refused conditional PUT is where the history breaks.
	if got := r.Findings[0].Ops[0]; got.ID != 2 {
		t.Errorf("culprit %v, want the If-None-Match PUT", got)
	}
	if len(r.Visualizations) != 1 {
		t.Fatalf("no visualization: %+v", r)
	}
	html, err := os.ReadFile(r.Visualizations[0])
	if err != nil || !strings.Contains(string(html), "<html") {
		t.Fatalf("visualization %s: %v", r.Visualizations[0], err)
	}
	if filepath.Dir(r.Visualizations[0]) != dir {
		t.Errorf("visualization written to %s, not %s", r.Visualizations[0], dir)
	}
}

func TestCorruptAndUnreadable(t *testing.T) {
	var b hb
	b.add(put("v1", OK), 0, 1).add(get("zz"), 2, 3).add(final(Op{Kind: Get, Result: Failed, Err: "503"}), 5, 6)
	r := check(t, b.ops)
	if r.Corrupt != 1 || r.Unreadable != 1 || r.Violations != 1 {
		t.Fatalf("%+v", r)
	}
}

func TestKeysAreIndependent(t *testing.T) {
	a := put("v1", OK)
	a.Key = "b/a"
	c := getNone()
	c.Key, c.Start, c.End = "b/c", 2*time.Second, 3*time.Second
	a.End = time.Second
	r := check(t, []Op{a, c})
	wantClean(t, r)
	if r.Keys != 2 {
		t.Errorf("keys = %d", r.Keys)
	}
}

// A write that failed may take effect, but once a reader has seen it, it
// has: a later read may not return what it replaced. Seen on a 503'd PUT
// and a 503'd DELETE that readers saw and the store then rolled back.
func TestRolledBackFailedWriteFails(t *testing.T) {
	t.Run("put", func(t *testing.T) {
		var b hb
		b.add(put("v1", OK), 0, 1).add(put("v2", Failed), 2, 4).add(get("v2"), 3, 3.5).add(get("v1"), 5, 6)
		wantFinding(t, check(t, b.ops), Stale)
	})
	t.Run("delete", func(t *testing.T) {
		var b hb
		b.add(put("v1", OK), 0, 1).add(del(Failed), 2, 4).add(getNone(), 3, 3.5).add(get("v1"), 5, 6)
		wantFinding(t, check(t, b.ops), Resurrected)
	})
	t.Run("a failed put seen, deleted, seen again", func(t *testing.T) {
		var b hb
		b.add(put("v1", Failed), 0, 1).add(get("v1"), 2, 3).add(del(Failed), 2, 4).add(getNone(), 5, 6).add(get("v1"), 7, 8)
		r := check(t, b.ops)
		wantFinding(t, r, Resurrected)
		if len(r.Findings) == 1 && len(r.Findings[0].Ops) != 4 {
			t.Errorf("want the write, the read that saw it, the 404 and the read: %v", r.Findings[0])
		}
	})
	t.Run("not yet seen", func(t *testing.T) {
		var b hb
		b.add(put("v1", OK), 0, 1).add(put("v2", Failed), 2, 4).add(get("v1"), 3, 3.5).add(get("v2"), 5, 6)
		wantClean(t, check(t, b.ops))
	})
}

// A successful conditional PUT saw its key: If-Match the value it
// matched, If-None-Match: * no object. The rules that convict reads
// convict it too.
func TestConditionalPutsAreObservations(t *testing.T) {
	t.Run("lost update", func(t *testing.T) {
		var b hb
		b.add(put("v1", OK), 0, 1).add(put("v2", OK), 2, 3).add(putIM("v1", "v3", OK), 4, 5)
		wantFinding(t, check(t, b.ops), Stale)
	})
	t.Run("matched a value a read had seen deleted", func(t *testing.T) {
		var b hb
		b.add(put("v1", OK), 0, 1).add(del(Failed), 2, 4).add(getNone(), 3, 3.5).add(putIM("v1", "v2", OK), 5, 6)
		wantFinding(t, check(t, b.ops), Resurrected)
	})
	t.Run("created over an acknowledged value", func(t *testing.T) {
		var b hb
		b.add(put("v1", OK), 0, 1).add(putINM("v2", OK), 3, 4)
		wantFinding(t, check(t, b.ops), Lost)
	})
	t.Run("a create acknowledged, then the old value", func(t *testing.T) {
		var b hb
		b.add(put("v1", OK), 0, 1).add(del(Failed), 2, 2.5).add(putINM("v2", OK), 3, 4).add(get("v1"), 5, 6)
		wantFinding(t, check(t, b.ops), Stale) // v2 was acknowledged: it replaced v1
	})
	t.Run("a create seen, then the old value", func(t *testing.T) {
		var b hb
		b.add(put("v1", OK), 0, 1).add(del(Failed), 2, 2.5).add(putINM("v2", Failed), 3, 4).add(Op{Kind: Head, Result: NotFound}, 3.5, 3.6).add(get("v1"), 5, 6)
		wantFinding(t, check(t, b.ops), Resurrected)
	})
}
