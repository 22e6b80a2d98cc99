package repair

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// fakeCluster is the membership, the shard servers' manifests and shard
// files, and this server's store, in memory.
type fakeCluster struct {
	mu        sync.Mutex
	members   []cluster.Member
	manifests map[string]*metadata.Manifest // addr -> the one object's manifest
	shards    map[string]bool               // addr/file/idx present
	puts      []string                      // addrs given a manifest
	local     *metadata.Manifest
	syncAsked chan string        // addrs asked to sync their manifests
	batchCPU  map[string]float64 // addr -> its open repair batch's CPU
}

func (f *fakeCluster) Members() []cluster.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.members)
}

func (f *fakeCluster) EachManifest(context.Context, func(*metadata.Manifest) error) error {
	return nil
}
func (f *fakeCluster) GetManifest(_ context.Context, bucket, key string) (*metadata.Manifest, error) {
	return f.local, nil
}

// shardAPI is fakeCluster's Shards side (GetManifest clashes with Store's).
type shardAPI struct{ f *fakeCluster }

func (s shardAPI) PutShard(context.Context, string, string, int, io.Reader) (shardrpc.ShardInfo, error) {
	return shardrpc.ShardInfo{}, nil
}
func (s shardAPI) GetShard(context.Context, string, string, int, int64, int64) (io.ReadCloser, error) {
	return nil, shardrpc.ErrNotFound
}
func (s shardAPI) StatShard(_ context.Context, addr, fileID string, idx int) (shardrpc.ShardInfo, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if !s.f.shards[fmt.Sprintf("%s/%s/%d", addr, fileID, idx)] {
		return shardrpc.ShardInfo{}, shardrpc.ErrNotFound
	}
	return shardrpc.ShardInfo{CRC: uint32(idx)}, nil
}
func (s shardAPI) GetManifest(_ context.Context, addr, bucket, key string) (*metadata.Manifest, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if m := s.f.manifests[addr]; m != nil {
		return m, nil
	}
	return nil, shardrpc.ErrNotFound
}
func (s shardAPI) RepairStatus(_ context.Context, addr string) (shardrpc.RepairStatus, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	c, ok := s.f.batchCPU[addr]
	if !ok {
		return shardrpc.RepairStatus{}, nil
	}
	return shardrpc.RepairStatus{Batch: &shardrpc.RepairBatch{CPU: c}}, nil
}
func (s shardAPI) RequestSync(_ context.Context, addr string) error {
	s.f.syncAsked <- addr
	return nil
}
func (s shardAPI) PutManifest(_ context.Context, addr string, m *metadata.Manifest) (bool, metadata.Version, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if cur := s.f.manifests[addr]; cur != nil && !cur.Version.Less(m.Version) {
		return false, cur.Version, nil
	}
	s.f.manifests[addr] = m
	s.f.puts = append(s.f.puts, addr)
	return true, m.Version, nil
}

func newFakeCluster(n int) *fakeCluster {
	f := &fakeCluster{manifests: map[string]*metadata.Manifest{}, shards: map[string]bool{}, syncAsked: make(chan string, 16)}
	for i := range n {
		f.members = append(f.members, cluster.Member{ID: fmt.Sprintf("n%d", i), State: cluster.StateAlive,
			Since: time.Unix(100, 0), Meta: cluster.Meta{Role: cluster.RoleShard, HTTP: fmt.Sprintf("a%d", i), Boot: 1}})
	}
	return f
}

func newTestWorker(t testing.TB, f *fakeCluster, self string) *Worker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID = self
	w, err := New(cfg, f, f, shardAPI{f}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// healMissed hands a quorum-confirmed manifest to the placement peers
// that lack it, and queues the in-place rebuild of their missing shards;
// only the first holder of the placement does it, and an unconfirmed
// version is never spread.
func TestHealMissed(t *testing.T) {
	place := make([]string, 9)
	for i := range place {
		place[i] = fmt.Sprintf("n%d", i)
	}
	m := &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: 10, Writer: "gw"}, Code: "rs-6-3",
		ChunkSize: 4096, Placement: place, Parts: []metadata.Part{{Number: 1, ID: "f", Size: 100, ShardCRC: []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8}}}}
	old := *m
	old.Version.TS = 5
	tests := []struct {
		name    string
		holders []int // peers holding m (n1 is this server)
		older   []int // peers holding an older version
		shards  []int // peers lacking m that still have their shard
		puts    []string
		lost    []int
	}{
		{name: "first holder gives it to those that missed it", holders: []int{2, 3, 4, 5, 6, 7}, older: []int{8}, shards: []int{8},
			puts: []string{"a0", "a8"}, lost: []int{0}},
		{name: "an earlier holder does it", holders: []int{0, 2, 3, 4, 5, 6}, puts: nil},
		{name: "not visible: fewer than k hold it", holders: []int{2, 3, 4, 5}, puts: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(9)
			f.local = m
			for _, i := range tc.holders {
				f.manifests[fmt.Sprintf("a%d", i)] = m
			}
			for _, i := range tc.older {
				f.manifests[fmt.Sprintf("a%d", i)] = &old
			}
			for _, i := range tc.shards {
				f.shards[fmt.Sprintf("a%d/f/%d", i, i)] = true
			}
			w := newTestWorker(t, f, "n1")
			v := w.view()
			w.syncer.healMissed(context.Background(), v, m, w.syncer.askPeers(context.Background(), v, m), newQuorumCache(nil), false)
			slices.Sort(f.puts)
			if !slices.Equal(f.puts, tc.puts) {
				t.Errorf("gave the manifest to %v, want %v", f.puts, tc.puts)
			}
			var lost []int
			for _, j := range w.sched.jobs() {
				if !j.inPlace || j.version != m.Version {
					t.Errorf("queued %+v, want an in-place rebuild of %s", j, m.Version)
				}
				lost = append(lost, j.lost...)
			}
			if !slices.Equal(lost, tc.lost) {
				t.Errorf("queued the rebuild of %v, want %v", lost, tc.lost)
			}
		})
	}
}

// A server counts as back, and a manifest sync starts, when it is live
// again after a scan saw it down, when it went down and up between two
// scans, or when it restarted too quickly to be seen down; not on the
// first scan, nor when nothing changed.
func TestNoteReturns(t *testing.T) {
	f := newFakeCluster(4)
	w := newTestWorker(t, f, "n0")
	kicked := func() bool {
		w.scanner.noteReturns(w.view())
		select {
		case <-w.syncer.kickc:
			return true
		default:
			return false
		}
	}
	set := func(mod func(m *cluster.Member)) {
		f.mu.Lock()
		mod(&f.members[2])
		f.mu.Unlock()
	}
	steps := []struct {
		name string
		mod  func(m *cluster.Member)
		want bool
	}{
		{"first scan", func(*cluster.Member) {}, false},
		{"nothing changed", func(*cluster.Member) {}, false},
		{"suspect", func(m *cluster.Member) { m.State = cluster.StateSuspect }, false},
		{"dead", func(m *cluster.Member) { m.State, m.Since = cluster.StateDead, time.Unix(200, 0) }, false},
		{"alive again", func(m *cluster.Member) { m.State, m.Since = cluster.StateAlive, time.Unix(210, 0) }, true},
		{"down and up between scans", func(m *cluster.Member) { m.Since = time.Unix(300, 0) }, true},
		{"restarted unseen", func(m *cluster.Member) { m.Boot = 2 }, true},
		{"still", func(*cluster.Member) {}, false},
	}
	for _, st := range steps {
		set(st.mod)
		if got := kicked(); got != st.want {
			t.Errorf("%s: sync started %v, want %v", st.name, got, st.want)
		}
		if st.want { // the returned server is asked to sync too
			select {
			case addr := <-f.syncAsked:
				if addr != "a2" {
					t.Errorf("%s: asked %s to sync, want a2", st.name, addr)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("%s: the returned server was not asked to sync", st.name)
			}
		}
	}
	select {
	case addr := <-f.syncAsked:
		t.Errorf("%s asked to sync when nothing came back", addr)
	default:
	}
}

// A repair fenced by a newer version makes the coordinator take that
// version from its peers, but only one a write quorum holds.
func TestSyncKeyTakesConfirmedNewer(t *testing.T) {
	place := make([]string, 9)
	for i := range place {
		place[i] = fmt.Sprintf("n%d", i)
	}
	old := &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: 10, Writer: "gw"}, Code: "rs-6-3", Placement: place}
	newer := *old
	newer.Version = metadata.Version{TS: 11, Writer: repairWriter("n0")}
	newer.Placement = slices.Clone(place)
	newer.Placement[1] = "n9" // this server's shard was rebuilt elsewhere
	for _, tc := range []struct {
		name    string
		holders int
		want    bool
	}{
		{"quorum holds the newer version", 7, true},
		{"k hold it: visible", 6, true},
		{"too few hold it", 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(10)
			f.local = old
			for i := 2; i < 2+tc.holders; i++ {
				f.manifests[fmt.Sprintf("a%d", i)] = &newer
			}
			w := newTestWorker(t, f, "n1")
			got, err := w.syncer.syncKey(context.Background(), "b", "k")
			if err != nil || got != tc.want {
				t.Fatalf("syncKey = %v, %v; want %v", got, err, tc.want)
			}
			if stored := f.manifests["a1"]; (stored != nil && stored.Version == newer.Version) != tc.want {
				t.Fatalf("local copy %+v after sync, want newer stored: %v", stored, tc.want)
			}
		})
	}
}

// The periodic sync's windows: the first reaches back three intervals,
// each ends one interval before its pass, and consecutive windows meet
// exactly, even when a pass runs late, so every write is checked once.
func TestSyncWindow(t *testing.T) {
	const every = time.Minute
	t0 := time.Unix(1_000_000, 0)
	var sw syncWindow
	at := func(tm time.Time) *metadata.Manifest {
		return &metadata.Manifest{Version: metadata.Version{TS: tm.UnixNano()}}
	}
	passes := []struct {
		now      time.Time
		kept     []time.Time
		notKept  []time.Time
		describe string
	}{
		{t0, []time.Time{t0.Add(-3 * every), t0.Add(-2 * every), t0.Add(-every - 1)},
			[]time.Time{t0.Add(-3*every - 1), t0.Add(-every), t0, t0.Add(time.Second)}, "first pass"},
		{t0.Add(every), []time.Time{t0.Add(-every), t0.Add(-1)},
			[]time.Time{t0.Add(-every - 1), t0}, "next pass, on time"},
		{t0.Add(3 * every), []time.Time{t0, t0.Add(2*every - 1)},
			[]time.Time{t0.Add(-1), t0.Add(2 * every)}, "a pass one interval late"},
		{t0.Add(3 * every), nil, []time.Time{t0.Add(2*every - 1), t0.Add(2 * every)}, "a second pass at the same moment"},
	}
	for _, p := range passes {
		keep := sw.next(p.now, every)
		for _, tm := range p.kept {
			if !keep(at(tm)) {
				t.Errorf("%s: a write at t0%+v is not checked", p.describe, tm.Sub(t0))
			}
		}
		for _, tm := range p.notKept {
			if keep(at(tm)) {
				t.Errorf("%s: a write at t0%+v is checked", p.describe, tm.Sub(t0))
			}
		}
	}
}

// In the periodic passes a server checks a write only when no live server
// before it in the placement holds that version or a newer one: one
// server per write asks all its peers.
func TestFirstHolder(t *testing.T) {
	place := []string{"n0", "n1", "n2", "n3"}
	m := &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: 10, Writer: "gw"}, Placement: place}
	older, newer := *m, *m
	older.Version.TS, newer.Version.TS = 5, 20
	for _, tc := range []struct {
		name  string
		peers map[string]*metadata.Manifest // addr -> current manifest
		dead  []int
		want  bool
	}{
		{"an earlier server holds it", map[string]*metadata.Manifest{"a0": m, "a1": m}, nil, false},
		{"an earlier server holds a newer one", map[string]*metadata.Manifest{"a0": &newer}, nil, false},
		{"the earlier servers missed it", map[string]*metadata.Manifest{"a0": &older}, nil, true},
		{"the earlier server holding it is dead", map[string]*metadata.Manifest{"a0": m}, []int{0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(4)
			for addr, cur := range tc.peers {
				f.manifests[addr] = cur
			}
			for _, i := range tc.dead {
				f.members[i].State = cluster.StateDead
			}
			w := newTestWorker(t, f, "n2")
			if got := w.syncer.firstHolder(context.Background(), w.view(), m); got != tc.want {
				t.Errorf("firstHolder = %v, want %v", got, tc.want)
			}
		})
	}
}

// A server back after the repair grace holds m, which three servers of
// its placement (it, n7, n8) lost meanwhile and a repair switched onto
// n9..n11. Only six of m's placement hold the repaired version, short of
// the quorum of 7; counted on the repaired placement, all nine do. The
// sync must take it (case 2 of issue 16: otherwise the server keeps the
// stale version, and its shard files, forever).
func TestSyncFollowsMovedPlacement(t *testing.T) {
	f := newFakeCluster(12)
	for _, i := range []int{7, 8} {
		f.members[i].State = cluster.StateDead
	}
	place := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"}
	m := &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: 10, Writer: "gw"}, Code: "rs-6-3",
		ChunkSize: 4096, Placement: place, Parts: []metadata.Part{{Number: 1, ID: "f", Size: 100, ShardCRC: make([]uint32, 9)}}}
	r := *m
	r.Version = metadata.Version{TS: 11, Writer: "repair-n0"}
	r.Placement = []string{"n0", "n9", "n2", "n3", "n4", "n5", "n6", "n10", "n11"}
	f.local = m
	for _, id := range r.Placement {
		f.manifests["a"+id[1:]] = &r
	}
	w := newTestWorker(t, f, "n1")
	took, err := w.syncer.syncKey(context.Background(), "b", "k")
	if err != nil || !took {
		t.Fatalf("syncKey = %v, %v; want the repaired version taken", took, err)
	}
	if got := f.manifests["a1"]; got == nil || got.Version != r.Version {
		t.Fatalf("this server holds %v, want the repaired version %s", got, r.Version)
	}
	// Not past the first placement when nothing newer is reported.
	f2 := newFakeCluster(12)
	f2.local = m
	w2 := newTestWorker(t, f2, "n1")
	for _, a := range w2.syncer.askPeers(context.Background(), w2.view(), m) {
		if !slices.Contains(place, a.id) {
			t.Errorf("asked %s, outside the placement, with no newer version reported", a.id)
		}
	}
}

// The status's Sync counts tell a watcher when the full syncs a start or
// a return set off are over: Pending from the asking until a sync that
// began after it has ended, Full counting the syncs done.
func TestSyncStatus(t *testing.T) {
	f := newFakeCluster(3)
	w := newTestWorker(t, f, "n0")
	w.syncer.settle = time.Millisecond
	if s := w.Status().Sync; s.Pending || s.Full != 0 {
		t.Fatalf("before any sync: %+v", s)
	}
	w.syncer.kick()
	w.syncer.kick() // coalesced into the same sync
	if s := w.Status().Sync; !s.Pending {
		t.Fatalf("asked for a sync: %+v, want pending", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.syncer.run(ctx) }()
	defer func() { cancel(); <-done }()
	waitSync := func(full int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			s := w.Status().Sync
			if !s.Pending && s.Full == full {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("sync status %+v, want %d done and none pending", s, full)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitSync(1)
	w.syncer.kick()
	if s := w.Status().Sync; !s.Pending {
		t.Fatalf("asked again: %+v, want pending", s)
	}
	waitSync(2)
}
