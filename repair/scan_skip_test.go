package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/metadata"
)

// walkCounter is a Store that holds manifests and counts the walks over
// them.
type walkCounter struct {
	*fakeCluster
	ms    []*metadata.Manifest
	walks int
}

func (s *walkCounter) EachManifest(_ context.Context, fn func(*metadata.Manifest) error) error {
	s.walks++
	for _, m := range s.ms {
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

// GetManifest reads the current manifest of (bucket, key) among the
// walked ones, as the store a walk reads would.
func (s *walkCounter) GetManifest(_ context.Context, bucket, key string) (*metadata.Manifest, error) {
	for _, m := range s.ms {
		if m.Bucket == bucket && m.Key == key {
			return m, nil
		}
	}
	return nil, metadata.ErrNotFound
}

// A scan walks the manifests only when something may have left a stripe
// group degraded since a walk that found nothing: a membership change, a
// write placed on a server that is not live, or FullScanInterval passing.
// While a server is down every scan walks.
func TestScanSkipsWalkWhileNothingChanges(t *testing.T) {
	f := newFakeCluster(4)
	place := []string{"n0", "n1", "n2", "n3"}
	m := &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: 1, Writer: "gw"}, Code: "rs-2-2",
		ChunkSize: 4096, Placement: place, Parts: []metadata.Part{{Number: 1, ID: "f", Size: 100, ShardCRC: []uint32{0, 1, 2, 3}}}}
	store := &walkCounter{fakeCluster: f, ms: []*metadata.Manifest{m}}
	cfg := DefaultConfig()
	cfg.NodeID = "n0"
	w, err := New(cfg, store, f, shardAPI{f}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1000, 0)
	w.now = func() time.Time { return clock }
	w.mrf.look(w.view(), "n0", clock) // as runMRF does at start
	ctx := context.Background()
	step := func(what string, wantWalks int) {
		t.Helper()
		clock = clock.Add(cfg.ScanInterval)
		if err := w.scanner.once(ctx); err != nil {
			t.Fatalf("%s: scan: %v", what, err)
		}
		if store.walks != wantWalks {
			t.Fatalf("%s: %d walks, want %d", what, store.walks, wantWalks)
		}
	}
	setState := func(id int, st cluster.State) {
		f.mu.Lock()
		f.members[id].State = st
		f.members[id].Since = clock
		f.mu.Unlock()
	}

	step("first scan", 1)
	step("nothing changed", 1)
	step("still nothing", 1)
	if got := w.Status().Stripes; got.Skipped != 2 || got.Total != 1 || got.Walked == "" {
		t.Fatalf("status after two skipped scans: %+v", got)
	}

	w.NoteWrite(&metadata.Manifest{Bucket: "b", Key: "k2", Placement: []string{"n0", "gone"}})
	step("a write placed on a server that is not live", 2)
	step("nothing since", 2)

	setState(3, cluster.StateDead)
	step("a server died", 3)
	step("it is still down: every scan walks", 4)
	setState(3, cluster.StateAlive)
	step("it came back", 5)
	step("healthy again", 5)

	clock = clock.Add(cfg.FullScanInterval)
	step("a full scan interval passed", 6)
	step("and nothing since", 6)

	cfg.FullScanInterval = 0
	w.scanner.fullEvery = 0
	step("full scan interval 0: every scan walks", 7)
	step("every scan", 8)

	// Each walk is counted under the rule that sent it.
	for why, want := range map[string]float64{walkFirst: 1, walkWrite: 1, walkMembership: 2, walkUnsettled: 1, walkFull: 3, walkJob: 0} {
		var got dto.Metric
		if err := w.m.walks.WithLabelValues(why).Write(&got); err != nil {
			t.Fatal(err)
		}
		if got := got.GetCounter().GetValue(); got != want {
			t.Errorf("walks for %q: %v, want %v", why, got, want)
		}
	}
}

func TestWalkSignatureSeesEveryChange(t *testing.T) {
	base := func() nodeView {
		v := nodeView{nodes: map[string]NodeInfo{}, boot: map[string]int64{}, replaced: map[string]bool{}}
		for i := range 3 {
			id := fmt.Sprintf("n%d", i)
			v.nodes[id] = NodeInfo{ID: id, Live: true}
			v.boot[id] = 1
		}
		return v
	}
	same := walkSignature(base())
	for name, change := range map[string]func(v nodeView){
		"dead":      func(v nodeView) { ni := v.nodes["n1"]; ni.Live = false; v.nodes["n1"] = ni },
		"suspect":   func(v nodeView) { ni := v.nodes["n1"]; ni.Suspect = true; v.nodes["n1"] = ni },
		"draining":  func(v nodeView) { ni := v.nodes["n1"]; ni.Draining = true; v.nodes["n1"] = ni },
		"replaced":  func(v nodeView) { v.replaced["n1"] = true },
		"replaces":  func(v nodeView) { ni := v.nodes["n2"]; ni.Replaces = "n9"; v.nodes["n2"] = ni },
		"restarted": func(v nodeView) { v.boot["n1"] = 2 },
		"joined":    func(v nodeView) { v.nodes["n3"] = NodeInfo{ID: "n3", Live: true} },
		"left":      func(v nodeView) { delete(v.nodes, "n2") },
	} {
		v := base()
		change(v)
		if walkSignature(v) == same {
			t.Errorf("%s: signature unchanged", name)
		}
	}
	if walkSignature(base()) != same {
		t.Fatal("signature of the same view differs")
	}
}

// While a repair runs, a walk that queued every degraded group it found
// is not repeated: the queue holds what it would find again. A job that
// fails, a membership change or the queue draining brings the next walk;
// a repaired group comes off the status counts at once.
func TestScanSkipsWalkWhileItsJobsAreQueued(t *testing.T) {
	f := newFakeCluster(4)
	place := []string{"n0", "n1", "n2", "n3"}
	m := &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: 1, Writer: "gw"}, Code: "rs-2-2",
		Placement: place, Inline: []byte("small")} // an inline object: its job needs no manifest read
	w, store, cfg, clock := scanWorker(t, f, m)
	ctx := context.Background()
	step := func(what string, wantWalks int) {
		t.Helper()
		*clock = clock.Add(cfg.ScanInterval)
		if err := w.scanner.once(ctx); err != nil {
			t.Fatalf("%s: scan: %v", what, err)
		}
		if store.walks != wantWalks {
			t.Fatalf("%s: %d walks, want %d", what, store.walks, wantWalks)
		}
	}
	f.mu.Lock()
	f.members[3].State = cluster.StateDead
	f.members[3].Since = *clock
	f.mu.Unlock()

	step("a server died", 1)
	step("within its grace: every scan walks", 2)
	*clock = clock.Add(cfg.Grace)
	step("grace over: the group is queued", 3)
	if got := w.Status(); got.Repair.Queued != 1 || got.Stripes.Degraded != 1 {
		t.Fatalf("after the walk that queued the group: queued %d, degraded %d", got.Repair.Queued, got.Stripes.Degraded)
	}
	step("its job is queued: no walk", 3)
	step("still queued", 3)

	j := w.sched.pop()
	w.ended(ctx, j, Result{}, fmt.Errorf("%w: test", errRetryLater), 0)
	step("the job was deferred", 4)
	step("queued again: no walk", 4)

	j = w.sched.pop()
	w.ended(ctx, j, Result{Method: Inline}, nil, 0)
	if got := w.Status().Stripes; got.Degraded != 0 || got.LostShards != 0 {
		t.Fatalf("after the repair: degraded %d, lost shards %d, want 0", got.Degraded, got.LostShards)
	}
	step("the queue drained: a walk checks", 5)
}

// A group rebuilt onto a server that died before the job ended (its
// switch needed only a quorum) is still degraded: it stays in the status
// counts and the next scan walks for it, although the queue is empty.
func TestRepairOntoServerDeadSinceStaysDegraded(t *testing.T) {
	f := newFakeCluster(5)
	place := []string{"n0", "n1", "n2", "n3"}
	m := &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: 1, Writer: "gw"}, Code: "rs-2-2",
		Placement: place, Inline: []byte("small")}
	w, _, cfg, clock := scanWorker(t, f, m)
	ctx := context.Background()
	kill := func(i int) {
		f.mu.Lock()
		f.members[i].State = cluster.StateDead
		f.members[i].Since = *clock
		f.mu.Unlock()
	}
	kill(3)
	*clock = clock.Add(cfg.Grace + cfg.ScanInterval)
	if err := w.scanner.once(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.Status(); got.Repair.Queued != 1 || got.Stripes.Degraded != 1 {
		t.Fatalf("after the walk that queued the group: queued %d, degraded %d", got.Repair.Queued, got.Stripes.Degraded)
	}
	j := w.sched.pop()
	kill(4) // the destination, after its shard was written
	w.ended(ctx, j, Result{Method: Inline, Rebuilt: map[int]Node{3: {ID: "n4", Addr: "a4"}}}, nil, 0)
	if got := w.Status().Stripes; got.Degraded != 1 || got.LostShards != 1 {
		t.Fatalf("rebuilt onto a server dead since: degraded %d, lost shards %d, want 1 and 1", got.Degraded, got.LostShards)
	}
	if w.scanner.dirty.Load() == nil {
		t.Fatal("the scan is not marked to walk for the group")
	}
}

// scanWorker is worker n0 of f over a store holding ms, on a fake clock
// the test moves through *clock.
func scanWorker(t *testing.T, f *fakeCluster, ms ...*metadata.Manifest) (w *Worker, store *walkCounter, cfg Config, clock *time.Time) {
	t.Helper()
	store = &walkCounter{fakeCluster: f, ms: ms}
	cfg = DefaultConfig()
	cfg.NodeID = "n0"
	w, err := New(cfg, store, f, shardAPI{f}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	clock = &now
	w.now = func() time.Time { return *clock }
	w.mrf.look(w.view(), "n0", *clock) // as runMRF does at start
	return w, store, cfg, clock
}

// inlineGroups are n inline objects on n0..n3 (n0 coordinates them).
func inlineGroups(n int) []*metadata.Manifest {
	var ms []*metadata.Manifest
	for i := range n {
		ms = append(ms, &metadata.Manifest{Bucket: "b", Key: fmt.Sprintf("k%d", i), Version: metadata.Version{TS: 1, Writer: "gw"},
			Code: "rs-2-2", Placement: []string{"n0", "n1", "n2", "n3"}, Inline: []byte("small")})
	}
	return ms
}

// moveOff gives m a copy of itself with its shard on from moved to to, as
// a repair's switch leaves it.
func moveOff(m *metadata.Manifest, from, to string) *metadata.Manifest {
	c := *m
	c.Placement = slices.Clone(m.Placement)
	c.Placement[slices.Index(c.Placement, from)] = to
	return &c
}

// walkPastGrace kills member i of f and has w walk once its grace is over,
// queueing the groups that had a shard there.
func walkPastGrace(t *testing.T, f *fakeCluster, w *Worker, cfg Config, clock *time.Time, i int) {
	t.Helper()
	f.mu.Lock()
	f.members[i].State = cluster.StateDead
	f.members[i].Since = *clock
	f.mu.Unlock()
	*clock = clock.Add(cfg.Grace + cfg.ScanInterval)
	if err := w.scanner.once(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A job that finds its group repaired since the walk that counted it (or
// deleted) takes it off the counts, as a repair would; one whose group
// still has a shard on a server down within its grace leaves it counted.
func TestJobFindingItsGroupRepairedLeavesTheCounts(t *testing.T) {
	f := newFakeCluster(5)
	ms := inlineGroups(3)
	w, store, cfg, clock := scanWorker(t, f, ms...)
	ctx := context.Background()
	walkPastGrace(t, f, w, cfg, clock, 3)
	if got := w.Status(); got.Repair.Queued != 3 || got.Stripes.Degraded != 3 {
		t.Fatalf("after the walk: queued %d, degraded %d, want 3 and 3", got.Repair.Queued, got.Stripes.Degraded)
	}
	store.ms[0] = moveOff(ms[0], "n3", "n4") // repaired by an earlier job
	store.ms = store.ms[:2]                  // k2 deleted
	jobs := map[string]*job{}
	for range 3 {
		j := w.sched.pop()
		jobs[j.key] = j
	}
	for i, key := range []string{"k0", "k2"} {
		j := jobs[key]
		_, _, err := w.prepare(ctx, w.view(), j)
		if !errors.Is(err, errNotDegraded) {
			t.Fatalf("%s: prepare: %v, want errNotDegraded", j.ref(), err)
		}
		w.ended(ctx, j, Result{}, err, 0)
		if got, want := w.Status().Stripes.Degraded, int64(2-i); got != want {
			t.Fatalf("after %s: degraded %d, want %d", j.ref(), got, want)
		}
	}
	// k1, on a server dead again within its grace: still degraded.
	f.mu.Lock()
	f.members[3].State = cluster.StateAlive
	f.members[2].State = cluster.StateDead
	f.members[2].Since = *clock
	f.mu.Unlock()
	store.ms[1] = moveOff(ms[1], "n3", "n4")
	j := jobs["k1"]
	_, _, err := w.prepare(ctx, w.view(), j)
	if !errors.Is(err, errRetryLater) || errors.Is(err, errNotDegraded) {
		t.Fatalf("a shard on a server down within its grace: prepare: %v, want errRetryLater only", err)
	}
	w.ended(ctx, j, Result{}, err, 0)
	if got := w.Status().Stripes.Degraded; got != 1 {
		t.Fatalf("degraded %d after a job deferred for a server within its grace, want 1", got)
	}
}

// A walk that runs while jobs end counts the groups it saw degraded; one
// whose job ends after the counts are installed, while the walk queues
// what it found, comes off them and is not queued again: its second job
// would find it repaired and take it off a second time, hiding another
// group still degraded.
func TestWalkDoesNotRequeueAGroupRepairedWhileItQueues(t *testing.T) {
	f := newFakeCluster(5)
	ms := inlineGroups(2)
	w, store, cfg, clock := scanWorker(t, f, ms...)
	ctx := context.Background()
	walkPastGrace(t, f, w, cfg, clock, 3)
	first := w.sched.pop() // running
	other := w.sched.pop() // running; never ends here
	w.scanner.markDirty(walkJob)
	*clock = clock.Add(cfg.ScanInterval)
	w.scanner.jobs = &endBeforeQueueing{scanJobs: w.scanner.jobs, ref: first.ref(), end: func() {
		i := slices.IndexFunc(store.ms, func(m *metadata.Manifest) bool { return m.Key == first.key })
		store.ms[i] = moveOff(ms[i], "n3", "n4")
		w.ended(ctx, first, Result{Method: Inline}, nil, 0)
	}}
	if err := w.scanner.once(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.Status(); got.Stripes.Degraded != 1 || got.Repair.Queued != 0 {
		t.Fatalf("after the walk: degraded %d, queued %d, want 1 (%s, running) and 0", got.Stripes.Degraded, got.Repair.Queued, other.ref())
	}
}

// endBeforeQueueing ends a running job just before the walk queues that
// job's group again.
type endBeforeQueueing struct {
	scanJobs
	ref string
	end func()
}

func (e *endBeforeQueueing) enqueue(j *job) bool {
	if j.ref() == e.ref && e.end != nil {
		e.end()
		e.end = nil
	}
	return e.scanJobs.enqueue(j)
}
