package repair

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"testing"

	"golang.org/x/time/rate"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// versionAPI holds the shard servers' versions of one key in memory and
// stores a manifest as a shard server's store does: current when newer,
// kept as a previous version when older.
type versionAPI struct {
	shardAPI
	mu   sync.Mutex
	held map[string][]*metadata.Manifest // addr -> its versions, current first
	puts int
}

func (a *versionAPI) GetManifestVersions(_ context.Context, addr, _, _ string) (*metadata.Manifest, []*metadata.Manifest, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	vs := a.held[addr]
	if len(vs) == 0 {
		return nil, nil, shardrpc.ErrNotFound
	}
	return vs[0], slices.Clone(vs[1:]), nil
}

func (a *versionAPI) PutVersion(_ context.Context, addr string, m *metadata.Manifest) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.puts++
	vs := a.held[addr]
	for _, h := range vs {
		if h.Version == m.Version {
			return true, nil
		}
	}
	if len(vs) > 0 && m.Version.Less(vs[0].Version) {
		a.held[addr] = append(vs, m)
	} else {
		a.held[addr] = append([]*metadata.Manifest{m}, vs...)
	}
	return true, nil
}

// noncurrentPair is an rs-6-3 key on n0..n8 with a noncurrent version
// (TS 10) under a newer current one (TS 20).
func noncurrentPair() (old, cur *metadata.Manifest) {
	old, cur = mrfObject(), mrfObject()
	old.Versioned, old.VersionID = true, old.Version.String()
	cur.Version.TS = 20
	cur.Versioned, cur.VersionID = true, cur.Version.String()
	cur.Parts = []metadata.Part{{Number: 1, ID: "g", Size: 100, ShardCRC: make([]uint32, 9)}}
	return old, cur
}

// TestSwitchVersion: the switch of a noncurrent version rewrites exactly
// that version (TS+1, same ID, the rebuilt server in its placement) on its
// live servers and the new one, each keeping it beside the newer current
// version; it is fenced on k holders of the version, abandoned when a
// newer manifest of its ID exists, and finishes an earlier unfinished
// switch rather than fencing it out.
func TestSwitchVersion(t *testing.T) {
	old, cur := noncurrentPair()
	other := *old // a newer manifest of the same ID, not a repair switch
	other.Version = metadata.Version{TS: 15, Writer: "gw"}
	unfinished := *old
	unfinished.Version = metadata.Version{TS: 11, Writer: noncurrentWriter("n5")}
	unfinished.Placement = slices.Clone(old.Placement)
	unfinished.Placement[8] = "n10"
	for _, tc := range []struct {
		name    string
		servers map[int][]*metadata.Manifest // n0..n7; n8 is dead
		err     error                        // nil: switched
		want    *metadata.Manifest           // the switch written
		dest    string
	}{
		{name: "every live server holds it", servers: hold(0, 8, cur, old), dest: "n9"},
		{name: "fewer than k hold it", servers: merge(hold(0, 5, cur, old), hold(5, 8, cur)), err: errRetryLater},
		{name: "a newer manifest of its ID", servers: merge(hold(0, 7, cur, old), hold(7, 8, cur, &other, old)), err: ErrSuperseded},
		{name: "an unfinished switch is finished", servers: merge(hold(0, 3, cur, &unfinished), hold(3, 8, cur, old)), want: &unfinished, dest: "n10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(11)
			f.setState(8, cluster.StateDead)
			api := &versionAPI{shardAPI: shardAPI{f}, held: map[string][]*metadata.Manifest{}}
			for i, vs := range tc.servers {
				api.held[fmt.Sprintf("a%d", i)] = slices.Clone(vs)
			}
			cfg := DefaultConfig()
			cfg.NodeID = "n0"
			w, err := New(cfg, f, f, api, Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = w.switchVersion(context.Background(), w.view(), old, map[int]Node{8: {ID: "n9", Addr: "a9"}})
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("switch: %v, want %v", err, tc.err)
				}
				if api.puts != 0 {
					t.Fatalf("%d manifest writes, want none", api.puts)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				want = &metadata.Manifest{Version: metadata.Version{TS: 11, Writer: noncurrentWriter("n0")}}
			}
			for i := range 11 {
				addr := fmt.Sprintf("a%d", i)
				vs := api.held[addr]
				switch id := fmt.Sprintf("n%d", i); {
				case id == tc.dest:
					if len(vs) != 1 || vs[0].Version != want.Version {
						t.Fatalf("new server %s holds %d versions, want the switch as its only one", id, len(vs))
					}
				case i < 8:
					if len(vs) == 0 || vs[0] != cur {
						t.Fatalf("%s: current version changed", id)
					}
					var sw *metadata.Manifest
					for _, m := range vs[1:] {
						if m.Version == want.Version {
							sw = m
						}
					}
					if sw == nil {
						t.Fatalf("%s does not hold the switch %s", id, want.Version)
					}
					if sw.VersionID != old.VersionID || sw.Placement[8] != tc.dest || !slices.Equal(sw.Placement[:8], old.Placement[:8]) {
						t.Fatalf("%s holds switch %+v", id, sw)
					}
				default:
					if len(vs) != 0 {
						t.Fatalf("%s was written to", id)
					}
				}
			}
		})
	}
}

// hold gives servers from..to-1 the versions vs (current first).
func hold(from, to int, vs ...*metadata.Manifest) map[int][]*metadata.Manifest {
	out := map[int][]*metadata.Manifest{}
	for i := from; i < to; i++ {
		out[i] = vs
	}
	return out
}

func merge(ms ...map[int][]*metadata.Manifest) map[int][]*metadata.Manifest {
	out := map[int][]*metadata.Manifest{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestScanRepairsNoncurrentVersions: the scan queues the repair of a
// noncurrent version that lost a shard, as its own job beside the current
// version's, and counts its group in the status.
func TestScanRepairsNoncurrentVersions(t *testing.T) {
	ctx := context.Background()
	store, err := metadata.Open(t.TempDir(), metadata.Options{NodeID: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	old, cur := noncurrentPair()
	for _, m := range []*metadata.Manifest{old, cur} {
		if _, err := store.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	f := newFakeCluster(10)
	f.setState(8, cluster.StateDead) // long ago: past the grace
	cfg := DefaultConfig()
	cfg.NodeID = "n0"
	w, err := New(cfg, store, f, shardAPI{f}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.scanner.once(ctx); err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, j := range w.sched.jobs() {
		refs = append(refs, j.ref())
		if j.noncurrent != (j.version == old.Version) || !slices.Equal(j.lost, []int{8}) {
			t.Errorf("queued %+v", j)
		}
	}
	slices.Sort(refs)
	if want := []string{"b/k", "b/k@" + old.Version.String()}; !slices.Equal(refs, want) {
		t.Fatalf("queued %v, want %v", refs, want)
	}
	st := w.scanner.status()
	if st.Total != 2 || st.Noncurrent != 1 || st.Degraded != 2 {
		t.Fatalf("stripe counts %+v, want 2 groups, 1 noncurrent, both degraded", st)
	}
	// The job reads its version from the store's previous versions.
	for _, j := range w.sched.jobs() {
		m, err := w.manifestOf(ctx, j)
		if err != nil || m.Version != j.version || m.Parts[0].ID != map[bool]string{true: "f", false: "g"}[j.noncurrent] {
			t.Fatalf("manifest of %s: %+v %v", j.ref(), m, err)
		}
	}
}

// TestScrubCoversNoncurrentVersions: a scrub pass reads the shards of
// noncurrent versions too, after the current manifests, and queues the
// in-place rebuild of a bad one as a noncurrent job; a pass stopped in
// the versions resumes there.
func TestScrubCoversNoncurrentVersions(t *testing.T) {
	ctx := context.Background()
	store, err := metadata.Open(t.TempDir(), metadata.Options{NodeID: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	good := func(id string) uint32 { return crc32.Checksum([]byte("shard "+id), castagnoli) }
	put := func(key string, ts int64, part string, crc uint32) *metadata.Manifest {
		m := &metadata.Manifest{Bucket: "b", Key: key, Version: metadata.Version{TS: ts, Writer: "w"}, Versioned: true,
			Code: "rs-2-1", ChunkSize: 16, Placement: []string{"n0", "n1", "n2"}, Size: 10,
			Parts: []metadata.Part{{Number: 1, ID: part, Size: 10, ShardCRC: []uint32{crc, crc, crc}}}}
		if _, err := store.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	bad := put("k", 1, "old", good("old")+1) // its shard does not match: rot
	put("k", 2, "new", good("new"))
	put("l", 1, "l-old", good("l-old"))
	put("l", 2, "l-new", good("l-new"))
	f := newFakeCluster(3)
	shards := &scrubShards{shardAPI: shardAPI{f}, reads: map[string]int{}}
	cfg := DefaultConfig()
	cfg.NodeID = "n0"
	w, err := New(cfg, store, f, shards, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lim := rate.NewLimiter(rate.Inf, 1<<20)

	// Stopped during its third read: the first noncurrent version's.
	stop, cancel := context.WithCancel(ctx)
	shards.onRead = func(total int) {
		if total == 3 {
			cancel()
		}
	}
	if _, err := w.scrub.pass(stop, lim); err == nil {
		t.Fatal("the stopped pass reported no error")
	}
	shards.onRead = nil
	c, err := store.LoadCursor(ctx, scrubCursor)
	if err != nil || c == nil || c.Version != nil || c.Key != "l" {
		t.Fatalf("saved position %v, %v; want after l's current manifest", c, err)
	}
	if _, err := w.scrub.pass(ctx, lim); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{"new": 1, "l-new": 1, "old": 2, "l-old": 1} {
		if got := shards.reads[id]; got != want {
			t.Errorf("%s read %d times, want %d", id, got, want)
		}
	}
	jobs := w.sched.jobs()
	if len(jobs) != 1 || !jobs[0].noncurrent || !jobs[0].inPlace || jobs[0].version != bad.Version || !slices.Equal(jobs[0].lost, []int{0}) {
		t.Fatalf("queued %+v, want the in-place rebuild of k's noncurrent version", jobs)
	}

	// A position within the versions resumes there: the current
	// manifests are not read again.
	v := bad.Version
	if err := store.SaveCursor(ctx, scrubCursor, &metadata.Cursor{Bucket: "b", Key: "k", Version: &v}); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for id, n := range shards.reads {
		before[id] = n
	}
	if _, err := w.scrub.pass(ctx, lim); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{"new": 0, "l-new": 0, "old": 0, "l-old": 1} {
		if got := shards.reads[id] - before[id]; got != want {
			t.Errorf("resumed in the versions: %s read %d times, want %d", id, got, want)
		}
	}
}

// TestNoncurrentSwitchLosesTies: an update of a noncurrent version (a
// lock change) written at the same TS+1 as a racing repair switch of it
// wins on every server, whatever the gateway or repairer.
func TestNoncurrentSwitchLosesTies(t *testing.T) {
	for _, writer := range []string{"gw-0123456789abcdef", "gw-ffffffffffffffff", "0123456789abcdef", repairWriter("n0")} {
		sw := metadata.Version{TS: 11, Writer: noncurrentWriter("ffffffffffffffff")}
		up := metadata.Version{TS: 11, Writer: writer}
		if !sw.Less(up) {
			t.Errorf("switch %s is not older than update %s", sw, up)
		}
	}
}
