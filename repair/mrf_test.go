package repair

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/metadata"
)

// mrfObject is an rs-6-3 object placed on n0..n8.
func mrfObject() *metadata.Manifest {
	place := make([]string, 9)
	for i := range place {
		place[i] = fmt.Sprintf("n%d", i)
	}
	return &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: 10, Writer: "gw"}, Code: "rs-6-3",
		ChunkSize: 4096, Placement: place, Parts: []metadata.Part{{Number: 1, ID: "f", Size: 100, ShardCRC: []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8}}}}
}

func (f *fakeCluster) setState(i int, st cluster.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members[i].State = st
}

// A write stored while n5 was dead (and one stored just before gossip
// saw it die) is handed to n5, with its shard rebuilt in place, on the
// first look after n5 is live again; not before, and only once a write
// quorum holds it.
func TestMRFHealsOnReturn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		diesAfter bool // the write was stored while n5 still counted live
		holders   []int
		healed    bool
	}{
		{name: "written while it was known dead", holders: []int{1, 2, 3, 4, 6, 7, 8}, healed: true},
		{name: "written just before gossip saw it die", diesAfter: true, holders: []int{1, 2, 3, 4, 6, 7, 8}, healed: true},
		{name: "held by k: visible, spread", holders: []int{1, 2, 3, 4, 6}, healed: true},
		{name: "held by fewer than k: not spread", holders: []int{1, 2, 3, 4}, healed: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFakeCluster(9)
			m := mrfObject()
			f.local = m
			f.manifests["a0"] = m
			for _, i := range tc.holders {
				f.manifests[fmt.Sprintf("a%d", i)] = m
			}
			w := newTestWorker(t, f, "n0")
			clock := time.Unix(1000, 0)
			w.now = func() time.Time { return clock }
			w.mrf.look(w.view(), "n0", w.now())
			if !tc.diesAfter {
				f.setState(5, cluster.StateDead)
				w.mrf.look(w.view(), "n0", w.now())
			}
			w.NoteWrite(m)
			if tc.diesAfter {
				f.setState(5, cluster.StateDead)
				w.mrf.look(w.view(), "n0", w.now())
			}
			if got := w.mrf.pending(); len(got) != 0 {
				t.Fatalf("pending %v while n5 is dead", got)
			}
			if w.mrf.pass(ctx); len(f.puts) != 0 {
				t.Fatalf("gave %v the manifest while n5 is dead", f.puts)
			}
			f.setState(5, cluster.StateAlive)
			if back := w.mrf.look(w.view(), "n0", w.now()); !back {
				t.Fatal("n5's return not seen as the return of a server with missed writes")
			}
			w.mrf.pass(ctx)
			if got := slices.Contains(f.puts, "a5"); got != tc.healed {
				t.Fatalf("n5 given the manifest: %v, want %v (puts %v)", got, tc.healed, f.puts)
			}
			inPlace := slices.ContainsFunc(w.sched.jobs(), func(j *job) bool { return j.inPlace && slices.Contains(j.lost, 5) })
			if inPlace != tc.healed {
				t.Fatalf("in-place rebuild of shard 5 queued: %v, want %v", inPlace, tc.healed)
			}
			if len(w.mrf.pending()) == 0 {
				// Healed or not, n5 lacks its shard: the note stays.
				t.Fatal("note dropped before n5 holds the write whole")
			}
			f.shards["a5/f/5"] = true
			w.mrf.pass(ctx)
			if len(w.mrf.pending()) == 0 {
				t.Fatal("note tried again before its backoff")
			}
			clock = clock.Add(time.Minute)
			w.mrf.pass(ctx)
			if pending := len(w.mrf.pending()) > 0; pending == tc.healed {
				t.Fatalf("after the rebuild landed: note pending %v, want %v", pending, !tc.healed)
			}
		})
	}
}
