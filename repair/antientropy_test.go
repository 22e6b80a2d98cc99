package repair

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// aeCluster is shard servers holding many keys, in memory: every
// server's current manifests, and the calls made to them.
type aeCluster struct {
	mu      sync.Mutex
	members []cluster.Member
	held    map[string]map[metadata.ObjectRef]*metadata.Manifest // addr -> current manifests
	self    string                                               // this server's addr
	gets    int                                                  // GetManifest calls to peers
	puts    map[string][]string                                  // addr -> keys given
	listed  map[string][]int                                     // addr -> ranges listed
	same    int                                                  // digest calls answered "same root"
}

func newAECluster(n int, keys int) *aeCluster {
	c := &aeCluster{held: map[string]map[metadata.ObjectRef]*metadata.Manifest{}, self: "a0",
		puts: map[string][]string{}, listed: map[string][]int{}}
	var place []string
	for i := range n {
		place = append(place, fmt.Sprintf("n%d", i))
	}
	for i := range n {
		c.members = append(c.members, cluster.Member{ID: place[i], State: cluster.StateAlive, Since: time.Unix(100, 0),
			Meta: cluster.Meta{Role: cluster.RoleShard, HTTP: fmt.Sprintf("a%d", i), Boot: 1}})
		c.held[fmt.Sprintf("a%d", i)] = map[metadata.ObjectRef]*metadata.Manifest{}
	}
	for k := range keys {
		m := aeManifest(k, 10, place)
		for i := range n {
			c.held[fmt.Sprintf("a%d", i)][aeRef(k)] = m
		}
	}
	return c
}

func aeRef(k int) metadata.ObjectRef {
	return metadata.ObjectRef{Bucket: "b", Key: fmt.Sprintf("key-%05d", k)}
}

func aeManifest(k int, ts int64, place []string) *metadata.Manifest {
	return &metadata.Manifest{Bucket: "b", Key: aeRef(k).Key, Version: metadata.Version{TS: ts, Writer: "gw"}, Code: "rs-6-3",
		ChunkSize: 4096, Placement: place, Parts: []metadata.Part{{Number: 1, ID: fmt.Sprintf("f%d-%d", k, ts), Size: 100,
			ShardCRC: make([]uint32, len(place))}}}
}

func (c *aeCluster) idOf(addr string) string { return "n" + addr[1:] }

func (c *aeCluster) Members() []cluster.Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.members)
}

// The local store's side (Store and rangeStore).

func (c *aeCluster) EachManifest(_ context.Context, fn func(*metadata.Manifest) error) error {
	c.mu.Lock()
	ms := slices.Collect(maps.Values(c.held[c.self]))
	c.mu.Unlock()
	for _, m := range ms {
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

func (c *aeCluster) GetManifest(_ context.Context, bucket, key string) (*metadata.Manifest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.held[c.self][metadata.ObjectRef{Bucket: bucket, Key: key}]; m != nil {
		return m, nil
	}
	return nil, metadata.ErrNotFound
}

func (c *aeCluster) RangeDigest(peer string) *metadata.RangeSums { return c.digest(c.self, peer) }

func (c *aeCluster) RangeEntries(_ context.Context, peer string, ranges []int) ([]metadata.RangeEntry, error) {
	return c.entries(c.self, peer, ranges), nil
}

func (c *aeCluster) digest(addr, peer string) *metadata.RangeSums {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := metadata.NewDigests(c.idOf(addr))
	for _, m := range c.held[addr] {
		d.Toggle(m)
	}
	return d.Peer(peer)
}

func (c *aeCluster) entries(addr, peer string, ranges []int) []metadata.RangeEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []metadata.RangeEntry
	for _, m := range c.held[addr] {
		if metadata.Shared(m, c.idOf(addr), peer) && slices.Contains(ranges, metadata.KeyRange(m.Bucket, m.Key)) {
			out = append(out, metadata.RangeEntry{Bucket: m.Bucket, Key: m.Key, Version: m.Version})
		}
	}
	return out
}

// aeShards is the peers' side (Shards and rangePeers).
type aeShards struct{ c *aeCluster }

func (s aeShards) PutShard(context.Context, string, string, int, io.Reader) (shardrpc.ShardInfo, error) {
	return shardrpc.ShardInfo{}, nil
}
func (s aeShards) GetShard(context.Context, string, string, int, int64, int64) (io.ReadCloser, error) {
	return nil, shardrpc.ErrNotFound
}
func (s aeShards) StatShard(context.Context, string, string, int) (shardrpc.ShardInfo, error) {
	return shardrpc.ShardInfo{}, nil // every shard there (CRC 0, as the manifests say)
}
func (s aeShards) GetManifest(_ context.Context, addr, bucket, key string) (*metadata.Manifest, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.gets++
	if m := s.c.held[addr][metadata.ObjectRef{Bucket: bucket, Key: key}]; m != nil {
		return m, nil
	}
	return nil, shardrpc.ErrNotFound
}
func (s aeShards) PutManifest(_ context.Context, addr string, m *metadata.Manifest) (bool, metadata.Version, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	ref := metadata.ObjectRef{Bucket: m.Bucket, Key: m.Key}
	if cur := s.c.held[addr][ref]; cur != nil && !cur.Version.Less(m.Version) {
		return false, cur.Version, nil
	}
	s.c.held[addr][ref] = m
	s.c.puts[addr] = append(s.c.puts[addr], m.Key)
	return true, m.Version, nil
}
func (s aeShards) SyncDigest(_ context.Context, addr, peer string, root metadata.Sum) (*metadata.RangeSums, bool, error) {
	d := s.c.digest(addr, peer)
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if d.Root() == root {
		s.c.same++
		return nil, true, nil
	}
	return d, false, nil
}
func (s aeShards) SyncEntries(_ context.Context, addr, peer string, ranges []int) ([]metadata.RangeEntry, error) {
	s.c.mu.Lock()
	s.c.listed[addr] = append(s.c.listed[addr], ranges...)
	s.c.mu.Unlock()
	return s.c.entries(addr, peer, ranges), nil
}

func newAEWorker(t *testing.T, c *aeCluster) *Worker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID = "n0"
	w, err := New(cfg, c, c, aeShards{c}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func rangesOf(keys []int) []int {
	var out []int
	for _, k := range keys {
		r := aeRef(k)
		out = append(out, metadata.KeyRange(r.Bucket, r.Key))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// A sync compares range sums with every peer, lists only the ranges that
// differ, and runs the per-key rules only for the keys that differ: a
// peer that missed overwrites and new keys gets them from the first
// holder, and this server takes the newer versions it missed, while the
// thousands of keys in step cost no call.
func TestAntiEntropyDescendsOnlyIntoDifferences(t *testing.T) {
	const keys = 2000
	c := newAECluster(9, keys)
	place := c.held["a0"][aeRef(0)].Placement
	// n3 missed the overwrites of 10-14 and the new keys 20-22.
	missed := []int{10, 11, 12, 13, 14, 20, 21, 22}
	for _, k := range missed {
		m := aeManifest(k, 20, place)
		for i := range 9 {
			if i != 3 {
				c.held[fmt.Sprintf("a%d", i)][aeRef(k)] = m
			}
		}
		if k >= 20 {
			delete(c.held["a3"], aeRef(k))
		}
	}
	// This server missed the overwrites of 30-33, every peer holds them.
	behind := []int{30, 31, 32, 33}
	for _, k := range behind {
		m := aeManifest(k, 20, place)
		for i := 1; i < 9; i++ {
			c.held[fmt.Sprintf("a%d", i)][aeRef(k)] = m
		}
	}
	w := newAEWorker(t, c)
	var win syncWindow
	n, err := w.syncer.pass(context.Background(), false, &win)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(behind) {
		t.Errorf("stored %d newer versions here, want %d", n, len(behind))
	}
	for _, k := range behind {
		if got := c.held["a0"][aeRef(k)].Version.TS; got != 20 {
			t.Errorf("%s here at version %d, want 20", aeRef(k).Key, got)
		}
	}
	for _, k := range missed {
		if m := c.held["a3"][aeRef(k)]; m == nil || m.Version.TS != 20 {
			t.Errorf("n3 was not given %s", aeRef(k).Key)
		}
	}
	slices.Sort(c.puts["a3"])
	var want []string
	for _, k := range missed {
		want = append(want, aeRef(k).Key)
	}
	if !slices.Equal(c.puts["a3"], want) {
		t.Errorf("n3 given %v, want %v", c.puts["a3"], want)
	}
	// Only the ranges that differ were listed: n3's for its misses and
	// this server's own, every peer's for this server's.
	got := slices.Clone(c.listed["a3"])
	slices.Sort(got)
	if want := rangesOf(append(slices.Clone(missed), behind...)); !slices.Equal(got, want) {
		t.Errorf("ranges listed by n3: %v, want %v", got, want)
	}
	if got, want := slices.Sorted(slices.Values(c.listed["a5"])), rangesOf(behind); !slices.Equal(got, want) {
		t.Errorf("ranges listed by n5: %v, want %v", got, want)
	}
	// The per-key rules ask the 8 peers about each differing key, never
	// about the keys in step.
	if checked := len(missed) + len(behind); c.gets > checked*8 {
		t.Errorf("%d manifest reads from peers for %d differing keys of %d", c.gets, checked, keys)
	}
	st := w.Status().Sync
	if st.RangesCompared != 8*metadata.DigestRanges || st.KeysSynced != int64(len(missed)+len(behind)) || st.ManifestCalls == 0 {
		t.Errorf("sync status %+v", st)
	}
	if p := st.Peers["n3"]; p.Differing != int64(len(rangesOf(append(slices.Clone(missed), behind...)))) || p.Err != "" {
		t.Errorf("n3's comparison: %+v", p)
	}

	if c.same != 0 {
		t.Errorf("%d peers answered that their digests equal this server's before the sync", c.same)
	}

	// In step now: a second sync lists nothing and asks nothing, and
	// every peer answers its root equals this server's (no sums sent).
	c.gets, c.listed = 0, map[string][]int{}
	if _, err := w.syncer.pass(context.Background(), false, &win); err != nil {
		t.Fatal(err)
	}
	if c.gets != 0 || len(c.listed) != 0 {
		t.Errorf("a sync in step read %d manifests and listed %v", c.gets, c.listed)
	}
	if c.same != 8 {
		t.Errorf("%d of 8 peers in step answered by root alone", c.same)
	}
}

// The periodic pass leaves keys written within the last interval to a
// later pass (a write may still be reaching its servers), and heals a
// difference of any age (the walk it replaces looked only at the writes
// of the last interval, and left older misses to a start or a return).
func TestAntiEntropyPeriodicSkipsRecentWrites(t *testing.T) {
	c := newAECluster(9, 100)
	place := c.held["a0"][aeRef(0)].Placement
	w := newAEWorker(t, c)
	now := time.Unix(10000, 0)
	w.now = func() time.Time { return now }
	recent := aeManifest(1, now.Add(-time.Second).UnixNano(), place)
	old := aeManifest(2, now.Add(-time.Hour).UnixNano(), place)
	for _, m := range []*metadata.Manifest{recent, old} {
		for i := range 9 {
			if i != 4 {
				c.held[fmt.Sprintf("a%d", i)][metadata.ObjectRef{Bucket: m.Bucket, Key: m.Key}] = m
			}
		}
	}
	var win syncWindow
	for range 2 { // NB: the first pass notes the differing ranges, the second lists those that lasted
		if _, err := w.syncer.pass(context.Background(), true, &win); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.puts["a4"]; !slices.Equal(got, []string{old.Key}) {
		t.Errorf("n4 given %v, want only %s", got, old.Key)
	}
}

// digestHook is the peers' side of aeCluster with something happening
// while a peer works out its answer to a digest request.
type digestHook struct {
	aeShards
	during func()
}

func (s digestHook) SyncDigest(ctx context.Context, addr, peer string, root metadata.Sum) (*metadata.RangeSums, bool, error) {
	if s.during != nil {
		s.during()
	}
	return s.aeShards.SyncDigest(ctx, addr, peer, root)
}

// Writes that reach both servers while a peer works out its answer make
// its sums differ from the ones this server sent; those ranges are in
// step and must not be listed (under a steady stream of writes that was
// most ranges at every comparison, each listing reading every key of its
// range), while a lasting difference still is.
func TestAntiEntropyIgnoresWritesDuringComparison(t *testing.T) {
	const keys = 2000
	c := newAECluster(9, keys)
	place := c.held["a0"][aeRef(0)].Placement
	// n3 missed the overwrite of key 7: a lasting difference.
	m7 := aeManifest(7, 20, place)
	for i := range 9 {
		if i != 3 {
			c.held[fmt.Sprintf("a%d", i)][aeRef(7)] = m7
		}
	}
	// Keys 100-149 are overwritten on every server while the peers
	// answer: in step, before and after.
	inFlight := make([]int, 0, 50)
	for k := 100; k < 150; k++ {
		inFlight = append(inFlight, k)
	}
	var once sync.Once
	during := func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, k := range inFlight {
				m := aeManifest(k, 30, place)
				for i := range 9 {
					c.held[fmt.Sprintf("a%d", i)][aeRef(k)] = m
				}
			}
		})
	}
	cfg := DefaultConfig()
	cfg.NodeID = "n0"
	w, err := New(cfg, c, c, digestHook{aeShards{c}, during}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var win syncWindow
	if _, err := w.syncer.pass(context.Background(), false, &win); err != nil {
		t.Fatal(err)
	}
	if m := c.held["a3"][aeRef(7)]; m == nil || m.Version.TS != 20 {
		t.Errorf("n3 was not given %s, which it missed", aeRef(7).Key)
	}
	want := rangesOf([]int{7})
	for addr, got := range c.listed {
		got = slices.Compact(slices.Sorted(slices.Values(got)))
		if addr == "a3" && !slices.Equal(got, want) {
			t.Errorf("ranges listed by n3: %v, want only %v", got, want)
		}
		if addr != "a3" && len(got) > 0 {
			t.Errorf("ranges listed by %s, in step but for the writes made during the comparison: %v", addr, got)
		}
	}
}

// An inline job's estimate, as the scan queues it, is what the manifest
// would give, without reading the manifest again: the scan of a dead
// server's groups queues hundreds of thousands of them.
func TestInlineEstimateWithoutRead(t *testing.T) {
	c := newAECluster(9, 1)
	m := c.held["a0"][aeRef(0)]
	m.Parts = nil // inline
	w := newAEWorker(t, c)
	read := w.estimate(&job{bucket: m.Bucket, key: m.Key, version: m.Version, lost: []int{3}, inline: true})
	if read.Seconds == 0 || read.Fsyncs != float64(len(m.Placement)) {
		t.Fatalf("estimate from the manifest: %+v", read)
	}
	delete(c.held["a0"], aeRef(0)) // a read now finds nothing and estimates zero
	got := w.estimate(&job{bucket: m.Bucket, key: m.Key, version: m.Version, lost: []int{3}, inline: true, width: len(m.Placement)})
	if got != read {
		t.Fatalf("estimate of a scanned inline job %+v, want %+v (as from its manifest)", got, read)
	}
}

func TestPickRanges(t *testing.T) {
	rs := []int{3, 10, 20, 30, 40}
	for _, c := range []struct {
		start, limit int
		want         []int
		next         int
	}{
		{0, 0, rs, 0},
		{0, 5, rs, 0},
		{0, 2, []int{3, 10}, 11},
		{11, 2, []int{20, 30}, 31},
		{31, 2, []int{3, 40}, 4},
		{41, 3, []int{3, 10, 20}, 21},
		{4095, 1, []int{3}, 4},
	} {
		got, next := pickRanges(rs, c.start, c.limit)
		if !slices.Equal(got, c.want) || next != c.next {
			t.Errorf("pickRanges(%v, %d, %d) = %v, %d; want %v, %d", rs, c.start, c.limit, got, next, c.want, c.next)
		}
	}
}

// A periodic pass lists at most periodicRanges differing ranges per peer
// (listing reads every key of a range, and while repairs or heavy writes
// stream through, most ranges differ), going round from pass to pass, so
// that a peer missing many old writes is still healed in a few passes.
func TestAntiEntropyPeriodicBoundsListing(t *testing.T) {
	c := newAECluster(9, 3000)
	place := c.held["a0"][aeRef(0)].Placement
	w := newAEWorker(t, c)
	now := time.Unix(10000, 0)
	w.now = func() time.Time { return now }
	var missed []int
	for k := 0; k < 3000; k += 30 { // 100 keys, old writes n4 missed
		m := aeManifest(k, now.Add(-time.Hour).UnixNano(), place)
		for i := range 9 {
			if i != 4 {
				c.held[fmt.Sprintf("a%d", i)][aeRef(k)] = m
			}
		}
		missed = append(missed, k)
	}
	want := len(rangesOf(missed))
	if want <= 2*periodicRanges {
		t.Fatalf("only %d differing ranges: the test needs more than two passes' worth", want)
	}
	var win syncWindow
	passes := 0
	for ; passes < 20 && len(c.puts["a4"]) < len(missed); passes++ {
		c.listed = map[string][]int{}
		if _, err := w.syncer.pass(context.Background(), true, &win); err != nil {
			t.Fatal(err)
		}
		if got := len(c.listed["a4"]); got > periodicRanges {
			t.Fatalf("pass %d listed %d ranges of n4, want at most %d", passes, got, periodicRanges)
		}
	}
	if got := len(c.puts["a4"]); got != len(missed) {
		t.Fatalf("n4 given %d of the %d keys it missed after %d passes", got, len(missed), passes)
	}
	// NB: +1: the first pass only notes the ranges (lasting).
	if max := (want+periodicRanges-1)/periodicRanges + 1; passes > max {
		t.Errorf("healed in %d passes, want at most %d (%d ranges, %d a pass)", passes, max, want, periodicRanges)
	}
}

// Where ranges are dense (a larger server), a periodic pass lists fewer
// of them, so that what it reads stays within periodicEntries whatever the
// server holds: the first listing, with nothing known of the density,
// takes periodicRanges; the ones after it as many as fit.
func TestAntiEntropyPeriodicBoundsEntries(t *testing.T) {
	const keys, entries = 6000, 10
	c := newAECluster(9, keys) // ~1.5 keys a range, a few with 4 or more
	place := c.held["a0"][aeRef(0)].Placement
	w := newAEWorker(t, c)
	w.syncer.periodicEntries = entries
	now := time.Unix(10000, 0)
	w.now = func() time.Time { return now }
	count := map[int]int{}
	for k := range keys {
		count[rangesOf([]int{k})[0]]++
	}
	// n3 missed an overwrite of one key in each of 30 ranges holding 4 keys
	// or more: a listed range then holds at least 3.5 entries on average
	// over both sides, and a pass after the first may list 10/3.5 ranges.
	var missed []int
	taken := map[int]bool{}
	for k := 0; k < keys && len(missed) < 30; k++ {
		r := rangesOf([]int{k})[0]
		if count[r] < 4 || taken[r] {
			continue
		}
		taken[r] = true
		m := aeManifest(k, now.Add(-time.Hour).UnixNano(), place)
		for i := range 9 {
			if i != 3 {
				c.held[fmt.Sprintf("a%d", i)][aeRef(k)] = m
			}
		}
		missed = append(missed, k)
	}
	const after = 2 // floor(10 / 3.5)
	var win syncWindow
	listings := 0
	for passes := 0; passes < 40 && len(c.puts["a3"]) < len(missed); passes++ {
		c.listed = map[string][]int{}
		if _, err := w.syncer.pass(context.Background(), true, &win); err != nil {
			t.Fatal(err)
		}
		got := len(c.listed["a3"])
		if got == 0 {
			continue
		}
		listings++
		if listings == 1 && got != periodicRanges {
			t.Fatalf("first listing took %d ranges of n3, want %d (nothing known of their density)", got, periodicRanges)
		}
		if listings > 1 && got > after {
			t.Fatalf("listing %d took %d ranges of n3 at 4 keys a range or more, want at most %d (%d entries a pass)", listings, got, after, entries)
		}
	}
	if got := len(c.puts["a3"]); got != len(missed) {
		t.Fatalf("n3 given %d of the %d keys it missed", got, len(missed))
	}
}

func TestLasting(t *testing.T) {
	sum := func(x uint64) metadata.Sum { return metadata.Sum{x, x} }
	var ours, theirs metadata.RangeSums
	for r := range 6 {
		ours[r], theirs[r] = sum(uint64(r+1)), sum(uint64(100+r))
	}
	prev := map[int]rangeSeen{
		0: {ours: ours[0], theirs: theirs[0], passes: 1}, // unchanged since the last pass: lasting
		1: {ours: sum(9), theirs: theirs[1], passes: 1},  // ours moved: a write in flight, maybe
		2: {ours: ours[2], theirs: sum(9), passes: 1},    // theirs moved
		3: {ours: sum(9), theirs: sum(9), passes: 2},     // moved, but the third pass in a row
		4: {ours: ours[4], theirs: theirs[4], passes: 5}, // unchanged and long-lasting
		9: {ours: sum(1), theirs: sum(2), passes: 1},     // in step now: forgotten
	}
	list, seen := lasting(prev, &ours, &theirs, []int{0, 1, 2, 3, 4, 5})
	if want := []int{0, 3, 4}; !slices.Equal(list, want) {
		t.Errorf("listed %v, want %v", list, want)
	}
	wantPasses := map[int]int{0: 2, 1: 2, 2: 2, 3: 3, 4: 6, 5: 1}
	if len(seen) != len(wantPasses) {
		t.Errorf("seen %v, want ranges %v", seen, wantPasses)
	}
	for r, n := range wantPasses {
		if got := seen[r]; got.passes != n || got.ours != ours[r] || got.theirs != theirs[r] {
			t.Errorf("seen[%d] = %+v, want %d passes with the sums of now", r, got, n)
		}
	}
	if list, _ := lasting(nil, &ours, &theirs, []int{0, 1}); len(list) != 0 {
		t.Errorf("a first comparison listed %v", list)
	}
}

// A periodic pass lists a differing range only once it lasts: a range
// whose sums change from pass to pass (writes streaming through it, each
// seen on one server of the pair before the other) is not listed until it
// has differed in lastingPasses passes, while a missed write, which
// leaves its range's sums alone, is listed by the second pass.
func TestAntiEntropyPeriodicListsLastingDifferences(t *testing.T) {
	c := newAECluster(9, 2000)
	place := c.held["a0"][aeRef(0)].Placement
	w := newAEWorker(t, c)
	now := time.Unix(10000, 0)
	w.now = func() time.Time { return now }
	// n4 missed an old write of key 7: a lasting difference.
	m7 := aeManifest(7, now.Add(-time.Hour).UnixNano(), place)
	for i := range 9 {
		if i != 4 {
			c.held[fmt.Sprintf("a%d", i)][aeRef(7)] = m7
		}
	}
	// Key 11 is written on every pass, reaching n4 last: its range
	// differs at every comparison, with other sums each time.
	hot := aeRef(11)
	if slices.Contains(rangesOf([]int{7}), rangesOf([]int{11})[0]) {
		t.Fatal("keys 7 and 11 share a range: pick others")
	}
	var win syncWindow
	for pass := 1; pass <= lastingPasses; pass++ {
		m := aeManifest(11, now.Add(-time.Hour+time.Duration(pass)*time.Second).UnixNano(), place)
		for i := range 9 {
			if i != 4 {
				c.held[fmt.Sprintf("a%d", i)][hot] = m
			}
		}
		c.listed = map[string][]int{}
		if _, err := w.syncer.pass(context.Background(), true, &win); err != nil {
			t.Fatal(err)
		}
		got := slices.Compact(slices.Sorted(slices.Values(c.listed["a4"])))
		var want []int
		switch {
		case pass == 2:
			want = rangesOf([]int{7})
		case pass == lastingPasses:
			want = rangesOf([]int{11})
		}
		if !slices.Equal(got, want) {
			t.Errorf("pass %d listed %v with n4, want %v", pass, got, want)
		}
	}
	if m := c.held["a4"][aeRef(7)]; m == nil || m.Version != m7.Version {
		t.Errorf("n4 was not given key 7, which it missed")
	}
}

// digestCalls is aeShards counting each peer's digest requests and
// running before(addr, n) ahead of the n-th answer (from 1).
type digestCalls struct {
	aeShards
	mu     *sync.Mutex
	n      map[string]int
	before func(addr string, n int)
}

func (s digestCalls) SyncDigest(ctx context.Context, addr, peer string, root metadata.Sum) (*metadata.RangeSums, bool, error) {
	s.mu.Lock()
	s.n[addr]++
	n := s.n[addr]
	s.mu.Unlock()
	s.before(addr, n)
	return s.aeShards.SyncDigest(ctx, addr, peer, root)
}

// A full sync (a start, a return) compares twice, a moment apart, and
// lists only the ranges that differed both times with the same sums: a
// write still reaching its servers at the first comparison (the stream
// of a repair's switches or a fill) is in step by the second and costs no
// listing, while what a server missed is listed at once.
func TestAntiEntropyFullSyncListsWhatLasts(t *testing.T) {
	c := newAECluster(9, 2000)
	place := c.held["a0"][aeRef(0)].Placement
	// n4 missed the overwrite of key 7.
	m7 := aeManifest(7, 20, place)
	for i := range 9 {
		if i != 4 {
			c.held[fmt.Sprintf("a%d", i)][aeRef(7)] = m7
		}
	}
	// The overwrite of key 11 reaches every server but n4 before the
	// sync, and n4 between its two comparisons.
	m11 := aeManifest(11, 30, place)
	for i := range 9 {
		if i != 4 {
			c.held[fmt.Sprintf("a%d", i)][aeRef(11)] = m11
		}
	}
	if slices.Equal(rangesOf([]int{7}), rangesOf([]int{11})) {
		t.Fatal("keys 7 and 11 share a range: pick others")
	}
	var mu sync.Mutex
	shards := digestCalls{aeShards: aeShards{c}, mu: &mu, n: map[string]int{}, before: func(addr string, n int) {
		if addr == "a4" && n == 2 {
			c.mu.Lock()
			c.held["a4"][aeRef(11)] = m11
			c.mu.Unlock()
		}
	}}
	cfg := DefaultConfig()
	cfg.NodeID = "n0"
	w, err := New(cfg, c, c, shards, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.syncer.recheck = time.Millisecond
	var win syncWindow
	if _, err := w.syncer.pass(context.Background(), false, &win); err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Compact(slices.Sorted(slices.Values(c.listed["a4"]))), rangesOf([]int{7}); !slices.Equal(got, want) {
		t.Errorf("ranges listed with n4: %v, want only %v (key 11's write was in flight)", got, want)
	}
	if m := c.held["a4"][aeRef(7)]; m == nil || m.Version != m7.Version {
		t.Error("n4 was not given key 7, which it missed")
	}
	for addr, n := range shards.n {
		if addr != "a4" && n != 1 {
			t.Errorf("%s, in step, was asked for its digest %d times, want once", addr, n)
		}
	}
}

// A periodic pass leaves out the peers that compared their digests with
// this server within the last interval and found them in step (the
// shard server's side of the exchange, NotePeerInStep): the set two
// servers share is the same from either side. Once that answer is older
// than an interval the peer is asked again; a full sync asks everyone.
func TestAntiEntropyPeriodicTrustsPeersInStep(t *testing.T) {
	c := newAECluster(9, 100)
	var mu sync.Mutex
	shards := digestCalls{aeShards: aeShards{c}, mu: &mu, n: map[string]int{}, before: func(string, int) {}}
	cfg := DefaultConfig()
	cfg.NodeID = "n0"
	w, err := New(cfg, c, c, shards, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(10000, 0)
	w.now = func() time.Time { return now }
	asked := func(step string, want map[string]int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for i := 1; i < 9; i++ {
			addr := fmt.Sprintf("a%d", i)
			if shards.n[addr] != want[addr] {
				t.Errorf("%s: %s asked for its digest %d times, want %d", step, addr, shards.n[addr], want[addr])
			}
		}
	}
	w.NotePeerInStep("n3")
	w.NotePeerInStep("n5")
	now = now.Add(cfg.SyncInterval / 2)
	var win syncWindow
	if _, err := w.syncer.pass(context.Background(), true, &win); err != nil {
		t.Fatal(err)
	}
	asked("a pass within the interval", map[string]int{"a1": 1, "a2": 1, "a4": 1, "a6": 1, "a7": 1, "a8": 1})

	now = now.Add(cfg.SyncInterval)
	if _, err := w.syncer.pass(context.Background(), true, &win); err != nil {
		t.Fatal(err)
	}
	asked("a pass an interval later", map[string]int{"a1": 2, "a2": 2, "a3": 1, "a4": 2, "a5": 1, "a6": 2, "a7": 2, "a8": 2})

	w.NotePeerInStep("n3")
	if _, err := w.syncer.pass(context.Background(), false, &win); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n3 := shards.n["a3"]
	mu.Unlock()
	if n3 != 2 {
		t.Errorf("a full sync asked a3 %d times in all, want 2 (it asks everyone)", n3)
	}
}
