package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// fakeManifests is an in-memory cluster of shard servers for the
// manifest calls of ShardAPI: each server keeps every version it was
// given per key (newest current), and servers can be taken down.
type fakeManifests struct {
	ShardAPI // the calls these tests do not make panic

	mu   sync.Mutex
	held map[string]map[string][]*metadata.Manifest // addr -> bucket/key -> versions, newest first
	down map[string]bool
	// refuse makes live servers fail manifest writes.
	refuse map[string]bool
	calls  int
	puts   int // manifest writes (calls counts lookups too)
	// notices counts confirm notices (not in calls); noticed holds the
	// versions they named, per server.
	notices int
	noticed map[string][]shardrpc.VersionRef
	// commitNotices counts PathCommitted notices, which gateways no
	// longer send.
	commitNotices int
	// batches counts batched lookups (also in calls).
	batches int
	// lookupGate, when set, holds every single lookup until it is closed.
	lookupGate chan struct{}
	// refuseBatch makes these servers fail batched manifest writes only
	// (a batch call that timed out).
	refuseBatch map[string]bool
	// beforePut, when set, runs once (under mu) before the next manifest
	// write lands: a concurrent writer getting there first.
	beforePut func()
	// batchDelay is how long every batched call takes (a loaded server);
	// a call whose context ends first fails.
	batchDelay time.Duration
	// marks holds the committed mark of each server's current versions,
	// as a server that predates PathConfirmed sets on a PathCommitted
	// notice and still reports (shardrpc.ManifestVersionsResponse.Committed):
	// addr -> bucket/key -> the version marked. Tests set it (mark,
	// markFake) to show lookups ignore it; no notice sets it.
	marks map[string]map[string]metadata.Version
}

// slowBatch waits batchDelay, or fails when ctx ends first.
func (f *fakeManifests) slowBatch(ctx context.Context) error {
	if f.batchDelay > 0 {
		select {
		case <-time.After(f.batchDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return ctx.Err()
}

// current returns the newest version addr holds of m's key.
func (f *fakeManifests) current(addr string, m *metadata.Manifest) metadata.Version {
	return f.versions(addr, m.Bucket, m.Key)[0].Version
}

func (f *fakeManifests) racePut() {
	if hook := f.beforePut; hook != nil {
		f.beforePut = nil
		hook()
	}
}

func newFakeManifests() *fakeManifests {
	return &fakeManifests{held: map[string]map[string][]*metadata.Manifest{}, down: map[string]bool{},
		marks: map[string]map[string]metadata.Version{}}
}

// mark marks version v of bucket/key committed on addr if it is current
// there, as a committed notice does.
func (f *fakeManifests) mark(addr, bucket, key string, v metadata.Version) {
	if vs := f.versions(addr, bucket, key); len(vs) == 0 || vs[0].Version != v {
		return
	}
	if f.marks[addr] == nil {
		f.marks[addr] = map[string]metadata.Version{}
	}
	f.marks[addr][bucket+"/"+key] = v
}

// marked reports whether addr's current version of bucket/key is marked.
func (f *fakeManifests) marked(addr, bucket, key string) bool {
	vs := f.versions(addr, bucket, key)
	v, ok := f.marks[addr][bucket+"/"+key]
	return ok && len(vs) > 0 && vs[0].Version == v
}

// Confirmed records a confirm notice; it marks nothing (shardrpc.PathConfirmed).
func (f *fakeManifests) Confirmed(_ context.Context, addr string, refs []shardrpc.VersionRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notices++
	if f.down[addr] {
		return fmt.Errorf("%s down", addr)
	}
	if f.noticed == nil {
		f.noticed = map[string][]shardrpc.VersionRef{}
	}
	f.noticed[addr] = append(f.noticed[addr], refs...)
	return nil
}

// Committed counts a commit notice (shardrpc.PathCommitted), which a
// gateway must no longer send (TestWritesNoticeConfirmed).
func (f *fakeManifests) Committed(_ context.Context, addr string, refs []shardrpc.VersionRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commitNotices++
	return nil
}

func (f *fakeManifests) store(addr string, m *metadata.Manifest) {
	if m.Versioned && m.VersionID == "" {
		c := *m // as metadata.Store.PutManifest names it
		c.VersionID = c.Version.String()
		m = &c
	}
	if f.held[addr] == nil {
		f.held[addr] = map[string][]*metadata.Manifest{}
	}
	k := m.Bucket + "/" + m.Key
	vs := append(f.held[addr][k], m)
	slices.SortFunc(vs, func(a, b *metadata.Manifest) int {
		if b.Version.Less(a.Version) {
			return -1
		}
		return 1
	})
	f.held[addr][k] = vs
}

func (f *fakeManifests) versions(addr, bucket, key string) []*metadata.Manifest {
	return f.held[addr][bucket+"/"+key]
}

func (f *fakeManifests) GetManifestVersions(_ context.Context, addr, bucket, key string) (*metadata.Manifest, []*metadata.Manifest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down[addr] {
		return nil, nil, fmt.Errorf("%s down", addr)
	}
	vs := f.versions(addr, bucket, key)
	if len(vs) == 0 {
		return nil, nil, shardrpc.ErrNotFound
	}
	return vs[0], vs[1:], nil
}

func (f *fakeManifests) LookupVersions(ctx context.Context, addr, bucket, key string, inline bool) (shardrpc.ManifestVersionsResponse, error) {
	if f.lookupGate != nil {
		<-f.lookupGate
	}
	cur, prev, err := f.GetManifestVersions(ctx, addr, bucket, key)
	if err != nil {
		return shardrpc.ManifestVersionsResponse{}, err
	}
	f.mu.Lock()
	committed := f.marked(addr, bucket, key)
	f.mu.Unlock()
	if inline {
		return shardrpc.ManifestVersionsResponse{Current: cur, Previous: prev, Committed: committed}, nil
	}
	strip := func(m *metadata.Manifest) *metadata.Manifest { c := *m; c.Inline = nil; return &c }
	out := make([]*metadata.Manifest, len(prev))
	for i, p := range prev {
		out[i] = strip(p)
	}
	return shardrpc.ManifestVersionsResponse{Current: strip(cur), Previous: out, Committed: committed}, nil
}

func (f *fakeManifests) GetManifestVersionsBatch(ctx context.Context, addr, bucket string, keys []string) ([]shardrpc.KeyVersions, error) {
	if err := f.slowBatch(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.batches++
	if f.down[addr] {
		return nil, fmt.Errorf("%s down", addr)
	}
	out := make([]shardrpc.KeyVersions, len(keys))
	for i, k := range keys {
		if vs := f.versions(addr, bucket, k); len(vs) > 0 {
			out[i] = shardrpc.KeyVersions{Current: vs[0], Previous: vs[1:], Committed: f.marked(addr, bucket, k)}
		}
	}
	return out, nil
}

func (f *fakeManifests) PutManifestFenced(ctx context.Context, addr string, m *metadata.Manifest, _ string) (shardrpc.PutManifestResponse, error) {
	if err := ctx.Err(); err != nil {
		return shardrpc.PutManifestResponse{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.puts++
	if f.down[addr] || f.refuse[addr] {
		return shardrpc.PutManifestResponse{}, fmt.Errorf("%s down", addr)
	}
	f.racePut()
	had := len(f.versions(addr, m.Bucket, m.Key)) > 0
	f.store(addr, m)
	cur := f.current(addr, m)
	return shardrpc.PutManifestResponse{Stored: cur == m.Version, Current: cur, Replaced: had && cur == m.Version}, nil
}

func (f *fakeManifests) PutManifestsFenced(ctx context.Context, addr string, ms []*metadata.Manifest, _ string) ([]shardrpc.PutResult, error) {
	if err := f.slowBatch(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down[addr] || f.refuseBatch[addr] {
		return nil, fmt.Errorf("%s down", addr)
	}
	f.racePut()
	out := make([]shardrpc.PutResult, len(ms))
	for i, m := range ms {
		f.store(addr, m)
		cur := f.current(addr, m)
		out[i] = shardrpc.PutResult{Stored: true, Current: &cur}
	}
	return out, nil
}

func (f *fakeManifests) AbortManifest(_ context.Context, addr, bucket, key string, v metadata.Version) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := bucket + "/" + key
	f.held[addr][k] = slices.DeleteFunc(f.held[addr][k], func(m *metadata.Manifest) bool { return m.Version == v })
	return nil
}

func (f *fakeManifests) DeleteVersion(_ context.Context, addr, bucket, key, id, _ string, bypass bool) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down[addr] || f.refuse[addr] {
		return 0, fmt.Errorf("%s down", addr)
	}
	k := bucket + "/" + key
	if f.held[addr] == nil {
		return 0, nil
	}
	// As a shard server: the newest manifest of the version decides
	// whether its lock refuses the removal.
	var newest *metadata.Manifest
	for _, m := range f.held[addr][k] {
		if m.VersionID == id && (newest == nil || newest.Version.Less(m.Version)) {
			newest = m
		}
	}
	if newest != nil && newest.Lock.Protects(time.Now(), bypass) {
		return 0, fmt.Errorf("%s: %w", addr, shardrpc.ErrLocked)
	}
	before := len(f.held[addr][k])
	f.held[addr][k] = slices.DeleteFunc(f.held[addr][k], func(m *metadata.Manifest) bool { return m.VersionID == id })
	return before - len(f.held[addr][k]), nil
}

// List answers a listing from what addr holds (no delimiter): each key
// with its newest manifest and the others as Previous, as the store lists.
func (f *fakeManifests) List(_ context.Context, addr string, q metadata.ListQuery) ([]metadata.ListEntry, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down[addr] {
		return nil, false, fmt.Errorf("%s down", addr)
	}
	entry := func(m *metadata.Manifest) metadata.ListEntry {
		return metadata.ListEntry{Key: m.Key, Version: m.Version, Deleted: m.Deleted, Size: m.Size, ETag: m.ETag,
			Modified: m.Modified, Code: m.Code, VersionID: m.VersionID}
	}
	var keys []string
	for k, vs := range f.held[addr] {
		if len(vs) > 0 && vs[0].Bucket == q.Bucket && strings.HasPrefix(vs[0].Key, q.Prefix) && vs[0].Key > q.After {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []metadata.ListEntry
	for _, k := range keys {
		if q.Limit > 0 && len(out) == q.Limit {
			return out, true, nil
		}
		vs := f.held[addr][k]
		e := entry(vs[0])
		for _, p := range vs[1:] {
			e.Previous = append(e.Previous, entry(p))
		}
		out = append(out, e)
	}
	return out, false, nil
}

// fakeCluster is a gateway over n fake shard servers s0..s(n-1) at
// addresses a0..; the servers in dead are down and gossip says so.
func fakeCluster(t *testing.T, n int) (*Gateway, *fakeManifests, func(dead ...int)) {
	t.Helper()
	f := newFakeManifests()
	members := make(fakeMembers, n)
	for i := range members {
		members[i] = cluster.Member{ID: fmt.Sprintf("s%d", i), State: cluster.StateAlive, Meta: cluster.Meta{Role: cluster.RoleShard, HTTP: fmt.Sprintf("a%d", i)}}
	}
	cfg := DefaultConfig()
	g := &Gateway{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	g.layer = &layer{shards: f, nodes: members, log: g.log, clock: clock{writer: "gw"}, maxN: 9, minK: 6, maxK: 6}
	kill := func(dead ...int) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i := range members {
			members[i].State = cluster.StateAlive
			f.down[members[i].HTTP] = false
		}
		for _, i := range dead {
			members[i].State = cluster.StateDead
			f.down[members[i].HTTP] = true
		}
	}
	return g, f, kill
}

// putFake writes an object's manifest of rs-6-3 directly to the first
// nine servers of its order (all of them, or those not in skip).
func putFake(g *Gateway, f *fakeManifests, bucket, key string, skip ...int) *metadata.Manifest {
	order, _ := g.layer.manifestOrder(bucket, key)
	m := &metadata.Manifest{Bucket: bucket, Key: key, Version: g.layer.clock.next(), Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("x")}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, id := range order[:9] {
		if slices.Contains(skip, i) {
			continue
		}
		f.store("a"+id[1:], m)
	}
	return m
}

// markFake marks m committed on every server where it is current, as the
// commit notices of an older gateway did on older servers.
func markFake(f *fakeManifests, m *metadata.Manifest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for addr := range f.held {
		f.mark(addr, m.Bucket, m.Key, m.Version)
	}
}

// TestDeleteKeysBatched: DeleteObjects' batched path deletes every key
// with one lookup and one tombstone call per server (a second lookup for
// keys whose versions are not marked committed), survives m servers down,
// and fails (never a false success) the keys it cannot prove.
func TestDeleteKeysBatched(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		marked   bool
		maxCalls int // on 12 servers
	}{{"healthy", true, 24}, {"healthy, not marked", false, 36}} {
		t.Run(tc.name, func(t *testing.T) {
			g, f, _ := fakeCluster(t, 12)
			var keys []string
			for i := range 300 {
				k := fmt.Sprintf("k%03d", i)
				m := putFake(g, f, "b", k)
				if tc.marked {
					markFake(f, m)
				}
				keys = append(keys, k)
			}
			keys = append(keys, "never-written")
			f.calls = 0
			for i, err := range g.deleteKeys(ctx, "b", keys) {
				if err != nil {
					t.Fatalf("%s: %v", keys[i], err)
				}
			}
			if f.calls > tc.maxCalls {
				t.Errorf("%d calls for %d keys on 12 servers, want at most %d", f.calls, len(keys), tc.maxCalls)
			}
			for _, k := range keys {
				if _, err := g.layer.readManifest(ctx, "b", k); err != errNotFound {
					t.Errorf("%s after delete: %v, want not found", k, err)
				}
			}
		})
	}
	t.Run("two servers down", func(t *testing.T) {
		g, f, kill := fakeCluster(t, 12)
		putFake(g, f, "b", "k")
		order, _ := g.layer.manifestOrder("b", "k")
		kill(idx(order[0]), idx(order[1]))
		if err := g.deleteKeys(ctx, "b", []string{"k"})[0]; err != nil {
			t.Fatalf("delete with 2 of 9 down: %v", err)
		}
		kill()
		if _, err := g.layer.readManifest(ctx, "b", "k"); err != errNotFound {
			t.Fatalf("after delete and return: %v, want not found", err)
		}
	})
	t.Run("three servers down: readable, but the tombstone cannot reach a quorum", func(t *testing.T) {
		g, f, kill := fakeCluster(t, 12)
		putFake(g, f, "b", "k")
		order, _ := g.layer.manifestOrder("b", "k")
		kill(idx(order[0]), idx(order[1]), idx(order[2]))
		if m, err := g.layer.readManifest(ctx, "b", "k"); err != nil || m.Deleted {
			t.Fatalf("read with 3 of 9 down: %v, %v", m, err)
		}
		if err := g.deleteKeys(ctx, "b", []string{"k"})[0]; err == nil {
			t.Fatal("tombstone on 6 of 9 reported as a delete")
		}
		// The failed delete's tombstone reached k servers, so a read may
		// already have seen it: it is not taken back, and the delete took
		// effect (a 5xx leaves the outcome open). What must hold is that
		// every later read agrees, before and after the servers return.
		if _, err := g.layer.readManifest(ctx, "b", "k"); err != errNotFound {
			t.Fatalf("after the failed delete: %v, want not found", err)
		}
		kill()
		if _, err := g.layer.readManifest(ctx, "b", "k"); err != errNotFound {
			t.Fatalf("after the servers return: %v, want not found", err)
		}
	})
	t.Run("a newer version lands before the tombstone", func(t *testing.T) {
		// As an If-Match PUT that checked the key before the tombstone
		// landed would: the delete must not end older than it.
		g, f, _ := fakeCluster(t, 12)
		putFake(g, f, "b", "k")
		f.beforePut = func() { landNewer(g, f, "b", "k") }
		if err := g.deleteKeys(ctx, "b", []string{"k"})[0]; err != nil {
			t.Fatalf("delete: %v", err)
		}
		if m, err := g.layer.readManifest(ctx, "b", "k"); err != errNotFound {
			t.Fatalf("after a delete acknowledged: %v, %v; want not found (the tombstone older than a version that landed before it)", m, err)
		}
	})
	t.Run("batched tombstone writes fail on three servers", func(t *testing.T) {
		// The key is deleted on its own instead (CI under load: 803 of
		// 1000 keys failed when a few servers' batch calls timed out).
		g, f, _ := fakeCluster(t, 12)
		putFake(g, f, "b", "k")
		order, _ := g.layer.manifestOrder("b", "k")
		f.refuseBatch = map[string]bool{}
		for _, id := range order[:3] {
			f.refuseBatch["a"+id[1:]] = true
		}
		if err := g.deleteKeys(ctx, "b", []string{"k"})[0]; err != nil {
			t.Fatalf("delete: %v", err)
		}
		if _, err := g.layer.readManifest(ctx, "b", "k"); err != errNotFound {
			t.Fatalf("after delete: %v, want not found", err)
		}
	})
	t.Run("case 1: unreadable object is a 503, not a false delete", func(t *testing.T) {
		g, f, kill := fakeCluster(t, 12)
		putFake(g, f, "b", "k", 0, 1) // acknowledged with 7 of 9
		order, _ := g.layer.manifestOrder("b", "k")
		kill(idx(order[2]), idx(order[3])) // two other holders die
		if _, err := g.layer.readManifest(ctx, "b", "k"); err == nil || err == errNotFound {
			t.Fatalf("read: %v, want unavailable", err)
		}
		err := g.deleteKeys(ctx, "b", []string{"k"})[0]
		if err == nil {
			t.Fatal("delete of an unreadable object succeeded without proof")
		}
		kill()
		if m, err := g.layer.readManifest(ctx, "b", "k"); err != nil || m.Deleted {
			t.Fatalf("after the servers return: %v, %v; want the object", m, err)
		}
	})
}

// landNewer stores, on the first nine servers of the key's order, a
// version newer than any g's clock gives yet: a write of another gateway
// whose clock is ahead (or a conditional write that checked the key
// before this gateway's write landed).
func landNewer(g *Gateway, f *fakeManifests, bucket, key string) *metadata.Manifest {
	return landNewerOn(g, f, bucket, key, 0, 9)
}

// landNewerOn is landNewer on the servers from..to-1 of the key's order
// only: a newer write still in flight.
func landNewerOn(g *Gateway, f *fakeManifests, bucket, key string, from, to int) *metadata.Manifest {
	order, _ := g.layer.manifestOrder(bucket, key)
	m := &metadata.Manifest{Bucket: bucket, Key: key, Version: metadata.Version{TS: time.Now().Add(time.Hour).UnixNano(), Writer: "other"},
		Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("newer"), ETag: "newer"}
	for _, id := range order[from:to] {
		f.store("a"+id[1:], m)
	}
	return m
}

// distinctVersions counts the versions of bucket/key, over every server,
// that match.
func (f *fakeManifests) distinctVersions(bucket, key string, match func(*metadata.Manifest) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[metadata.Version]bool{}
	for addr := range f.held {
		for _, m := range f.versions(addr, bucket, key) {
			if match(m) {
				seen[m.Version] = true
			}
		}
	}
	return len(seen)
}

// TestStayedWriteIsNotTriedAgain (chaos seed 222): a write refused by
// three of nine servers, which hold a newer version still in flight, is
// stored by six: k, so a read may already have returned it. Trying it
// again with a version newer than the one that refused it would make the
// request take effect a second time, over that newer write (the seed's
// history: a PUT read back, a concurrent PUT read back, then the first
// PUT's value again). It fails instead (5xx: its outcome is open), with
// one version written, by PUT and by DeleteObjects alike.
func TestStayedWriteIsNotTriedAgain(t *testing.T) {
	ctx := context.Background()
	t.Run("PUT", func(t *testing.T) {
		g, f, _ := fakeCluster(t, 12)
		putFake(g, f, "b", "k")
		f.beforePut = func() { landNewerOn(g, f, "b", "k", 6, 9) }
		order, _ := g.layer.manifestOrder("b", "k")
		m := &metadata.Manifest{Bucket: "b", Key: "k", Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("mine"), ETag: "mine"}
		if err := g.commit(ctx, m, m.Placement, 7, nil); !errors.Is(err, errStayed) {
			t.Fatalf("commit on 6 of 9: %v, want it to stay and fail", err)
		}
		if n := f.distinctVersions("b", "k", func(m *metadata.Manifest) bool { return m.ETag == "mine" }); n != 1 {
			t.Fatalf("the request wrote %d versions, want 1", n)
		}
	})
	t.Run("DeleteObjects", func(t *testing.T) {
		g, f, _ := fakeCluster(t, 12)
		putFake(g, f, "b", "k")
		f.beforePut = func() { landNewerOn(g, f, "b", "k", 6, 9) }
		if err := g.deleteKeys(ctx, "b", []string{"k"})[0]; err == nil {
			t.Fatal("a tombstone on 6 of 9 reported as a delete")
		}
		if n := f.distinctVersions("b", "k", func(m *metadata.Manifest) bool { return m.Deleted }); n != 1 {
			t.Fatalf("the request wrote %d tombstones, want 1", n)
		}
	})
}

func idx(id string) int {
	var i int
	fmt.Sscanf(id, "s%d", &i)
	return i
}

// TestInlineFromOneServer: a lookup takes a small object's data from one
// server only, from another holder when the first of the order is down,
// and a HEAD's lookup takes none.
func TestInlineFromOneServer(t *testing.T) {
	ctx := context.Background()
	g, f, kill := fakeCluster(t, 12)
	putFake(g, f, "b", "k")
	m, err := g.layer.readManifest(ctx, "b", "k")
	if err != nil || string(m.Inline) != "x" {
		t.Fatalf("read: %v, %v", m, err)
	}
	if h, err := g.layer.readHead(ctx, "b", "k"); err != nil || h.Inline != nil {
		t.Fatalf("head: %v, %v; want no inline data", h, err)
	}
	order, _ := g.layer.manifestOrder("b", "k")
	kill(idx(order[0]))
	if m, err := g.layer.readManifest(ctx, "b", "k"); err != nil || string(m.Inline) != "x" {
		t.Fatalf("read with the first server down: %v, %v", m, err)
	}
}

// TestFailedWriteStaysOnceVisible: a manifest write that fails short of
// k+1 is taken back below k (nothing visible) and stays from k on, which
// the caller learns (errStayed) so that it keeps the write's data.
func TestFailedWriteStaysOnceVisible(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		refused int
		stayed  bool
	}{{3, true}, {4, false}} {
		t.Run(fmt.Sprintf("%d refused", tc.refused), func(t *testing.T) {
			g, f, _ := fakeCluster(t, 12)
			order, _ := g.layer.manifestOrder("b", "k")
			f.refuse = map[string]bool{}
			for _, id := range order[:tc.refused] {
				f.refuse["a"+id[1:]] = true
			}
			m := &metadata.Manifest{Bucket: "b", Key: "k", Version: g.layer.clock.next(), Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("x")}
			err := g.layer.writeManifest(ctx, m, m.Placement, 7, shardrpc.NoLease)
			if err == nil || errors.Is(err, errStayed) != tc.stayed {
				t.Fatalf("write on %d of 9: %v, want stayed=%v", 9-tc.refused, err, tc.stayed)
			}
			_, rerr := g.layer.readManifest(ctx, "b", "k")
			if tc.stayed && rerr != nil {
				t.Fatalf("a write that stayed does not read back: %v", rerr)
			}
			if !tc.stayed && rerr != errNotFound {
				t.Fatalf("a write taken back reads as %v, want not found", rerr)
			}
		})
	}
}

// TestProbeAsksFew: a write's probe asks n-k+1 servers when they answer,
// more when some fail, and sees a version held by k servers either way:
// the clock moves past it.
func TestProbeAsksFew(t *testing.T) {
	ctx := context.Background()
	g, f, kill := fakeCluster(t, 12)
	order, _ := g.layer.manifestOrder("b", "k")
	// A failed write that stayed: held by the last six of the first nine.
	m := putFake(g, f, "b", "k", 0, 1, 2)
	f.calls = 0
	g.layer.probe(ctx, "b", "k")
	if f.calls != 4 {
		t.Errorf("probe made %d calls, want 4", f.calls)
	}
	if v := g.layer.clock.next(); !m.Version.Less(v) {
		t.Errorf("next version %v not past the probed %v", v, m.Version)
	}
	newer := landNewerOn(g, f, "b", "k", 3, 9)
	kill(idx(order[3]), idx(order[4]))
	g.layer.probe(ctx, "b", "k")
	if v := g.layer.clock.next(); !newer.Version.Less(v) {
		t.Errorf("with two servers down: next version %v not past the probed %v", v, newer.Version)
	}
}

// TestWriteRacedByNewerIsNewest (chaos seed 707): an unconditional write
// must not land older than a version written while it was in flight (here
// by a gateway whose clock is an hour ahead, as an If-Match PUT that
// checked the key before this write landed would be): it is tried again
// with a newer version and ends the key's current one.
func TestWriteRacedByNewerIsNewest(t *testing.T) {
	ctx := context.Background()
	g, f, _ := fakeCluster(t, 12)
	putFake(g, f, "b", "k")
	f.beforePut = func() { landNewer(g, f, "b", "k") }
	order, _ := g.layer.manifestOrder("b", "k")
	m := &metadata.Manifest{Bucket: "b", Key: "k", Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("mine"), ETag: "mine"}
	if err := g.commit(ctx, m, m.Placement, 7, nil); err != nil {
		t.Fatalf("commit: %v", err)
	}
	got, err := g.layer.readManifest(ctx, "b", "k")
	if err != nil || got.ETag != "mine" {
		t.Fatalf("after the acknowledged write: %v, %v; want it current", got, err)
	}
}

// TestWriteAsksNothingFirst: with the key's servers up, an unconditional
// write sends its manifest at once (one call per server, no lookup); with
// two of its first nine servers down it reads the key's versions first
// (a stale try could then reach k servers: see staleRefused).
func TestWriteAsksNothingFirst(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		down  int
		probe bool
	}{{0, false}, {1, false}, {2, true}} {
		t.Run(fmt.Sprintf("%d down", tc.down), func(t *testing.T) {
			g, f, kill := fakeCluster(t, 12)
			putFake(g, f, "b", "k")
			order, _ := g.layer.manifestOrder("b", "k")
			var dead []int
			for i := range tc.down {
				dead = append(dead, idx(order[i]))
			}
			kill(dead...)
			_, addrs := g.layer.liveShards()
			var placement []string
			for _, id := range order {
				if _, live := addrs[id]; live && len(placement) < 9 {
					placement = append(placement, id)
				}
			}
			m := &metadata.Manifest{Bucket: "b", Key: "k", Code: "rs-6-3", Placement: placement, Size: 1, Inline: []byte("mine"), ETag: "mine"}
			f.calls, f.puts = 0, 0
			if err := g.commit(ctx, m, m.Placement, 7, nil); err != nil {
				t.Fatalf("commit: %v", err)
			}
			if lookups := f.calls - f.puts; (lookups > 0) != tc.probe || f.puts != 9 {
				t.Errorf("%d lookups and %d manifest writes; want a probe: %v, and 9 writes", lookups, f.puts, tc.probe)
			}
		})
	}
}

// TestWriteBehindClockIsNewest (issue 16, case 3): a gateway whose clock
// is ten minutes behind the version it overwrites writes without reading
// first; the servers refuse the stale try, it is taken back, and the
// write is tried once more with a version past the refusing one, which
// ends current.
func TestWriteBehindClockIsNewest(t *testing.T) {
	ctx := context.Background()
	g, f, _ := fakeCluster(t, 12)
	g.layer.clock.offset = -10 * time.Minute
	order, _ := g.layer.manifestOrder("b", "k")
	old := &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: time.Now().UnixNano(), Writer: "other"}, Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("old"), ETag: "old"}
	for _, id := range order[:9] {
		f.store("a"+id[1:], old)
	}
	m := &metadata.Manifest{Bucket: "b", Key: "k", Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("mine"), ETag: "mine"}
	f.puts = 0
	if err := g.commit(ctx, m, m.Placement, 7, nil); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if !old.Version.Less(m.Version) {
		t.Fatalf("acknowledged version %v is not past the overwritten %v", m.Version, old.Version)
	}
	if f.puts != 18 {
		t.Errorf("%d manifest writes, want 18 (one refused round, one stored)", f.puts)
	}
	if got, err := g.layer.readManifest(ctx, "b", "k"); err != nil || got.ETag != "mine" {
		t.Fatalf("read after the write: %v, %v; want it current", got, err)
	}
	if n := f.distinctVersions("b", "k", func(m *metadata.Manifest) bool { return m.ETag == "mine" }); n != 1 {
		t.Errorf("%d versions of the write are left on the servers, want 1 (the refused try taken back)", n)
	}
}

// TestStaleWriteProbesWhenServersAreDown: with four of the key's first
// nine servers down, four of them holding its visible version, a write
// from a gateway whose clock is behind would be stored by seven servers
// (the three live non-holders and the four past the first nine that its
// placement reaches): acknowledged, and older than a version a read may
// have returned. It reads the key's versions first and writes past them.
func TestStaleWriteProbesWhenServersAreDown(t *testing.T) {
	ctx := context.Background()
	g, f, kill := fakeCluster(t, 13)
	g.layer.clock.offset = -10 * time.Minute
	order, _ := g.layer.manifestOrder("b", "k")
	visible := &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: time.Now().UnixNano(), Writer: "other"}, Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("v"), ETag: "v"}
	for _, id := range order[:6] {
		f.store("a"+id[1:], visible)
	}
	kill(idx(order[0]), idx(order[1]), idx(order[2]), idx(order[3]))
	placement := slices.Clone(order[4:13])
	m := &metadata.Manifest{Bucket: "b", Key: "k", Code: "rs-6-3", Placement: placement, Size: 1, Inline: []byte("mine"), ETag: "mine"}
	if err := g.commit(ctx, m, m.Placement, 7, nil); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if !visible.Version.Less(m.Version) {
		t.Fatalf("acknowledged version %v is older than the visible %v", m.Version, visible.Version)
	}
}

// TestLookupAsksK: a healthy key's lookup asks k servers (6 with
// rs-6-3), marked committed or not (a mark no longer stands in for votes:
// chaos seed 8383), and as many to prove a key absent, not n, also when a
// server of the first ones is known dead; it asks the rest when the first
// answers do not decide, and never returns an older version while a
// newer one held by k servers sits mostly among the unasked.
func TestLookupAsksK(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		marked bool
		calls  int
	}{{"healthy", false, 6}, {"healthy, marked", true, 6}} {
		t.Run(tc.name, func(t *testing.T) {
			g, f, kill := fakeCluster(t, 12)
			m := putFake(g, f, "b", "k")
			if tc.marked {
				markFake(f, m)
			}
			for _, dead := range [][]int{nil, {0}} {
				order, _ := g.layer.manifestOrder("b", "k")
				var ids []int
				for _, d := range dead {
					ids = append(ids, idx(order[d]))
				}
				kill(ids...)
				f.calls = 0
				if got, err := g.layer.readHead(ctx, "b", "k"); err != nil || got == nil || got.Version != m.Version {
					t.Fatalf("dead %v: %v, %v", dead, got, err)
				}
				if f.calls != tc.calls {
					t.Errorf("dead %v: %d calls, want %d", dead, f.calls, tc.calls)
				}
			}
			f.calls = 0
			if _, err := g.layer.readHead(ctx, "b", "never-written"); err != errNotFound {
				t.Fatalf("absent key: %v", err)
			}
			if f.calls != 6 {
				t.Errorf("absent key: %d calls, want 6", f.calls)
			}
		})
	}
	t.Run("a newer version mostly among the unasked", func(t *testing.T) {
		g, f, _ := fakeCluster(t, 12)
		putFake(g, f, "b", "k")
		// A failed write that stayed on six servers, three of them
		// beyond the first six asked.
		newer := putFake(g, f, "b", "k", 0, 1, 2)
		m, err := g.layer.readHead(ctx, "b", "k")
		if err != nil || m.Version != newer.Version {
			t.Fatalf("read %v, %v; want the newer version %v", m, err, newer.Version)
		}
	})
	t.Run("a server of the first six fails", func(t *testing.T) {
		g, f, _ := fakeCluster(t, 12)
		want := putFake(g, f, "b", "k")
		order, _ := g.layer.manifestOrder("b", "k")
		// Down without gossip knowing: asked, and fails.
		f.down["a"+order[1][1:]] = true
		f.calls = 0
		m, err := g.layer.readHead(ctx, "b", "k")
		if err != nil || m.Version != want.Version {
			t.Fatalf("read %v, %v", m, err)
		}
		if f.calls != 9 {
			t.Errorf("%d calls, want 9 (4, 2, then the other 3)", f.calls)
		}
	})
}

// TestDeleteKeysSlowLookup: a batched lookup that takes most of an
// operation's time leaves the batched tombstones time of their own, so
// every key is deleted (they all failed with SlowDown under load).
func TestDeleteKeysSlowLookup(t *testing.T) {
	g, f, _ := fakeCluster(t, 12)
	g.cfg.OpTimeout = 400 * time.Millisecond
	var keys []string
	for i := range 20 {
		k := fmt.Sprintf("k%02d", i)
		putFake(g, f, "b", k)
		keys = append(keys, k)
	}
	f.batchDelay = 250 * time.Millisecond
	ctx, cancel := g.opContext()
	defer cancel()
	for i, err := range g.deleteKeys(ctx, "b", keys) {
		if err != nil {
			t.Errorf("%s: %v", keys[i], err)
		}
	}
}
