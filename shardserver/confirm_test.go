package shardserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// peerState is what a fake peer holds of one key; err is its answer
// instead, when set.
type peerState struct {
	cur  *metadata.Manifest
	prev []*metadata.Manifest
	err  error
}

// fakePeers answers GetManifestVersions for peers by node ID (the "address"
// is the node ID). mirror, when set, answers for every peer with this
// server's own versions: a healthy cluster where every write reached all.
type fakePeers struct {
	mu     sync.Mutex
	peers  map[string]peerState
	mirror *metadata.Store
	calls  int
}

func (f *fakePeers) GetManifestVersions(ctx context.Context, addr, bucket, key string) (*metadata.Manifest, []*metadata.Manifest, error) {
	f.mu.Lock()
	f.calls++
	mirror, st, ok := f.mirror, f.peers[addr], f.peers != nil
	f.mu.Unlock()
	if mirror != nil {
		cur, prev, err := mirror.Versions(ctx, bucket, key)
		if errors.Is(err, metadata.ErrNotFound) {
			err = shardrpc.ErrNotFound
		}
		return cur, prev, err
	}
	if !ok || (st.cur == nil && st.err == nil) {
		return nil, nil, fmt.Errorf("get manifest versions: %w", shardrpc.ErrNotFound)
	}
	return st.cur, st.prev, st.err
}

func (f *fakePeers) set(node string, st peerState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.peers == nil {
		f.peers = map[string]peerState{}
	}
	f.peers[node] = st
}

// withPeers makes every node but those in unknown reachable through f.
func (e *testEnv) withPeers(f *fakePeers, unknown ...string) {
	e.srv.peers = f
	e.srv.cfg.Peers = func(id string) (string, bool) {
		for _, u := range unknown {
			if u == id {
				return "", false
			}
		}
		return id, true
	}
}

// healthyPeers makes every peer answer with this server's own versions.
func (e *testEnv) healthyPeers() { e.withPeers(&fakePeers{mirror: e.srv.meta}) }

// nine is an rs-6-3 placement with testNode holding shard 1: a write quorum
// is 7 servers.
var nine = []string{"a000000000000000", testNode, "a000000000000002", "a000000000000003", "a000000000000004",
	"a000000000000005", "a000000000000006", "a000000000000007", "a000000000000008"}

func wide(ts int64, part string) *metadata.Manifest {
	m := manifest("b", "k", ts, part)
	m.Code, m.Placement = "rs-6-3", nine
	m.Parts[0].ShardCRC = make([]uint32, len(nine))
	return m
}

// elsewhere is a placement sharing six servers with nine: testNode and
// the last two replaced, as a repair after their loss rebuilds them.
var elsewhere = []string{"a000000000000000", "b000000000000001", "a000000000000002", "a000000000000003", "a000000000000004",
	"a000000000000005", "a000000000000006", "b000000000000007", "b000000000000008"}

// moved is m switched by a repair to the elsewhere placement at ts.
func moved(m *metadata.Manifest, ts int64) *metadata.Manifest {
	r := *m
	r.Version = metadata.Version{TS: ts, Writer: "repair-x"}
	r.Placement = elsewhere
	return &r
}

// tomb is a tombstone over m, one tick newer.
func tomb(m *metadata.Manifest) *metadata.Manifest {
	r := *m
	r.Version = metadata.Version{TS: m.Version.TS + 1, Writer: "gw"}
	r.Deleted, r.Parts = true, nil
	return &r
}

func TestDecide(t *testing.T) {
	v1, v2, v3 := wide(1, "p1"), wide(2, "p2"), wide(3, "p3")
	q := func(m *metadata.Manifest) int { return min(6, len(m.Placement)) }
	tl := func(unreachable int, holders ...any) tally {
		t := tally{holders: map[metadata.Version]int{}, manifests: map[metadata.Version]*metadata.Manifest{}, unreachable: unreachable}
		for i := 0; i < len(holders); i += 2 {
			m := holders[i].(*metadata.Manifest)
			t.holders[m.Version], t.manifests[m.Version] = holders[i+1].(int), m
		}
		return t
	}
	const after = 10 * time.Minute
	cases := []struct {
		name string
		cur  *metadata.Manifest
		t    tally
		age  time.Duration
		want verdict
	}{
		{"all nine hold it", v2, tl(0, v2, 9, v1, 4), time.Minute, verdictConfirm},
		{"exactly a quorum", v2, tl(2, v2, 7, v1, 9), time.Minute, verdictConfirm},
		{"k holders: visible, so it stays", v2, tl(0, v2, 6, v1, 9), time.Minute, verdictConfirm},
		{"a newer version is confirmed", v2, tl(0, v2, 1, v3, 8), time.Minute, verdictConfirm},
		// A newer version, even unconfirmed, means v2 was replaced: its
		// servers may have dropped v2 already, so v2's count proves nothing.
		{"a newer version unconfirmed rules out a rollback", v2, tl(0, v2, 4, v3, 5, v1, 9), time.Hour, verdictRetry},
		{"back after the grace: v2 here only, its repair on seven elsewhere", v2, tl(2, v2, 1, moved(v2, 3), 7), after, verdictConfirm},
		{"back after the grace: v2 here only, its repair on six", v2, tl(2, v2, 1, moved(v2, 3), 6), after, verdictConfirm},
		{"back after the grace: v2 here only, its repair on five", v2, tl(2, v2, 1, moved(v2, 3), 5), after, verdictRetry},
		{"back after the grace: a tombstone on another placement", v2, tl(0, v2, 3, tomb(moved(v2, 4)), 9), after, verdictConfirm},
		{"an older version on a quorum does not confirm", v2, tl(0, v2, 4, v1, 9), time.Minute, verdictRetry},
		{"four of nine, young", v2, tl(0, v2, 4, v1, 9), time.Minute, verdictRetry},
		{"four of nine, old, all answered", v2, tl(0, v2, 4, v1, 9), after, verdictRollBack},
		{"four of nine, old, one silent", v2, tl(1, v2, 4, v1, 8), after, verdictRollBack},
		{"four of nine, old, two silent: may be visible", v2, tl(2, v2, 4, v1, 7), after, verdictRetry},
		{"five of nine, old (one short of k)", v2, tl(0, v2, 5, v1, 9), after, verdictRollBack},
		{"five of nine, one silent", v2, tl(1, v2, 5, v1, 8), after, verdictRetry},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.cur, tc.t, tc.age, after, q); got != tc.want {
				t.Fatalf("decide = %v, want %v", got, tc.want)
			}
		})
	}
}

// confirmEnv is one server of a nine-server placement with fake peers, a
// fake clock, and this server's shard 1 of p1 (v1) and p2 (v2) on disk.
type confirmEnv struct {
	*testEnv
	peers *fakePeers
	clock *fakeClock
}

const (
	testGCDelay       = time.Minute
	testRollbackAfter = 10 * time.Minute
)

func newConfirmEnv(t *testing.T, unknown ...string) *confirmEnv {
	e := newEnv(t, func(c *Config) {
		c.GCDelay, c.RollbackAfter, c.ConfirmRetry = testGCDelay, testRollbackAfter, 30*time.Second
	})
	ce := &confirmEnv{testEnv: e, peers: &fakePeers{}, clock: &fakeClock{t: time.Unix(1_000_000, 0)}}
	e.withPeers(ce.peers, unknown...)
	e.srv.now = ce.clock.now
	for _, id := range []string{"p1", "p2"} {
		e.put(t, id, 1, []byte("shard 1 of "+id))
	}
	return ce
}

func (ce *confirmEnv) putManifest(t *testing.T, m *metadata.Manifest) {
	t.Helper()
	if _, _, err := ce.client.PutManifest(context.Background(), ce.addr, m); err != nil {
		t.Fatal(err)
	}
}

// tick advances the clock by d and runs the confirm and GC queues.
func (ce *confirmEnv) tick(t *testing.T, d time.Duration) {
	t.Helper()
	ce.clock.advance(d)
	ctx := context.Background()
	if _, err := ce.srv.runConfirms(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.srv.collectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
}

// state renders this server's versions of b/k as "cur | prev...".
func (ce *confirmEnv) state(t *testing.T) string {
	t.Helper()
	cur, prev, err := ce.client.GetManifestVersions(context.Background(), ce.addr, "b", "k")
	if err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprintf("%d |", cur.Version.TS)
	for _, p := range prev {
		s += fmt.Sprintf(" %d", p.Version.TS)
	}
	return s
}

// setPeers gives the peers at placement positions in from..to-1 the state st.
func (ce *confirmEnv) setPeers(from, to int, st peerState) {
	for i := from; i < to; i++ {
		if nine[i] != testNode {
			ce.peers.set(nine[i], st)
		}
	}
}

func TestConfirmedReplacementCollectsOld(t *testing.T) {
	ce := newConfirmEnv(t)
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)
	ce.setPeers(0, 9, peerState{cur: v2, prev: []*metadata.Manifest{v1}})
	ce.tick(t, testGCDelay/2)
	if !ce.exists(t, "p1", 1) || ce.state(t) != "2 | 1" {
		t.Fatal("previous version dropped before GCDelay")
	}
	ce.tick(t, testGCDelay)
	if ce.exists(t, "p1", 1) || !ce.exists(t, "p2", 1) {
		t.Fatal("want p1.1 collected once v2 is confirmed, p2.1 kept")
	}
	if got := ce.state(t); got != "2 |" {
		t.Fatalf("versions %q after confirmation", got)
	}
}

func TestOlderArrivalKeptUntilConfirmed(t *testing.T) {
	// Scenario 2 on one server: a newer write (v2) that will fail got here
	// first; the older write v1 arrives, is acknowledged elsewhere, and
	// must keep its shards here.
	ce := newConfirmEnv(t)
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v2)
	ce.putManifest(t, v1)
	ce.setPeers(0, 4, peerState{cur: v2, prev: []*metadata.Manifest{v1}})
	ce.setPeers(4, 9, peerState{cur: v1})
	ce.tick(t, testGCDelay+time.Second)
	if !ce.exists(t, "p1", 1) || !ce.exists(t, "p2", 1) || ce.state(t) != "2 | 1" {
		t.Fatalf("unconfirmed v2: state %q, want both kept", ce.state(t))
	}
	ce.tick(t, testRollbackAfter)
	if got := ce.state(t); got != "1 |" {
		t.Fatalf("after RollbackAfter: versions %q, want v2 rolled back", got)
	}
	ce.tick(t, testGCDelay+time.Second)
	if !ce.exists(t, "p1", 1) || ce.exists(t, "p2", 1) {
		t.Fatal("want the acknowledged v1's shard kept, the failed v2's collected")
	}
}

func TestFailedOverwriteKeptThenRolledBack(t *testing.T) {
	// Scenario 1: v1 acknowledged on all nine; v2 reached four (this server
	// and three peers) and its gateway died.
	ce := newConfirmEnv(t)
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)
	ce.setPeers(0, 4, peerState{cur: v2, prev: []*metadata.Manifest{v1}})
	ce.setPeers(4, 9, peerState{cur: v1})
	for range 5 {
		ce.tick(t, testGCDelay)
		if got, err := ce.get("p1", 1, 0, -1); err != nil || string(got) != "shard 1 of p1" {
			t.Fatalf("v1's shard unreadable while v2 is unconfirmed: %q %v", got, err)
		}
	}
	if got := ce.state(t); got != "2 | 1" {
		t.Fatalf("before RollbackAfter: versions %q", got)
	}
	ce.tick(t, testRollbackAfter)
	if got := ce.state(t); got != "1 |" {
		t.Fatalf("after RollbackAfter: versions %q, want v1 current again", got)
	}
	if got := counterValue(ce.srv.m.confirms.WithLabelValues("rolled_back")); got != 1 {
		t.Fatalf("rolled_back = %v", got)
	}
	ce.tick(t, testGCDelay+time.Second)
	if !ce.exists(t, "p1", 1) || ce.exists(t, "p2", 1) {
		t.Fatal("want v1's shard kept, the failed v2's collected")
	}
}

func TestUnconfirmedWithSilentPeersIsKept(t *testing.T) {
	// v2 on four, two peers unknown to the address book and one failing:
	// 4+3 could be a quorum, so v2 may have been acknowledged. Keep both.
	ce := newConfirmEnv(t, nine[7], nine[8])
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)
	ce.setPeers(0, 4, peerState{cur: v2, prev: []*metadata.Manifest{v1}})
	ce.setPeers(4, 6, peerState{cur: v1})
	ce.setPeers(6, 7, peerState{err: errors.New("connection refused")})
	for range 3 {
		ce.tick(t, testRollbackAfter)
	}
	if got := ce.state(t); got != "2 | 1" || !ce.exists(t, "p1", 1) || !ce.exists(t, "p2", 1) {
		t.Fatalf("versions %q; want v2 current, v1 kept, both shards on disk", got)
	}
	// The silent peers come back holding v2: confirmed, v1 collected.
	ce.srv.cfg.Peers = func(id string) (string, bool) { return id, true }
	ce.setPeers(6, 9, peerState{cur: v2, prev: []*metadata.Manifest{v1}})
	ce.tick(t, time.Minute)
	if got := ce.state(t); got != "2 |" || !ce.exists(t, "p1", 1) {
		t.Fatalf("versions %q after the peers returned; want v1 dropped, its shard kept for GCDelay (reads of v1 may be in flight)", got)
	}
	ce.tick(t, testGCDelay+time.Second)
	if ce.exists(t, "p1", 1) || !ce.exists(t, "p2", 1) {
		t.Fatal("want v1's shard collected GCDelay after the late confirmation")
	}
}

func TestManifestVersionsOverRPC(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, _, err := e.client.GetManifestVersions(ctx, e.addr, "b", "k"); !errors.Is(err, shardrpc.ErrNotFound) {
		t.Fatalf("absent key: %v", err)
	}
	for _, m := range []*metadata.Manifest{manifest("b", "k", 3, "p3"), manifest("b", "k", 1, "p1"), tombstone("b", "k", 2)} {
		if _, _, err := e.client.PutManifest(ctx, e.addr, m); err != nil {
			t.Fatal(err)
		}
	}
	cur, prev, err := e.client.GetManifestVersions(ctx, e.addr, "b", "k")
	if err != nil || cur.Version.TS != 3 || len(prev) != 2 || !prev[0].Deleted || prev[1].Parts[0].ID != "p1" {
		t.Fatalf("versions: %+v %+v %v", cur, prev, err)
	}
	if _, _, err := e.client.GetManifestVersions(ctx, e.addr, "", "k"); !errors.Is(err, shardrpc.ErrBadRequest) {
		t.Fatalf("no bucket: %v", err)
	}
}

// A server back after the repair grace (case 2 of issue 16): it holds the
// acknowledged v2 with v1 previous and a confirm job for v2, long due.
// Meanwhile v2 was repaired onto another placement (testNode and the last
// two servers replaced, those two still dead) and the survivors dropped v2
// once the repair was confirmed. Only this server holds v2 now; counted in
// v2's own placement, the repaired copy has 6 holders (k: visible). v2
// must not be rolled back, and once the others answer the repair is
// confirmed there.
func TestReturnAfterMoveIsNotRolledBack(t *testing.T) {
	ce := newConfirmEnv(t, nine[7], nine[8])
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)
	r := moved(v2, 3)
	for _, id := range elsewhere {
		if strings.HasPrefix(id, "a") {
			ce.peers.set(id, peerState{cur: r})
		} else {
			ce.peers.set(id, peerState{err: errors.New("connection refused")})
		}
	}
	for range 4 {
		ce.tick(t, testRollbackAfter)
		// The repaired copy on six servers is visible (k = 6): v2 is
		// confirmed through it, or waits; it is never rolled back.
		if got := ce.state(t); !strings.HasPrefix(got, "2 |") {
			t.Fatalf("with the repair's new servers silent: versions %q, want v2 kept current", got)
		}
	}
	for _, id := range elsewhere[1:] {
		ce.peers.set(id, peerState{cur: r})
	}
	ce.tick(t, testRollbackAfter)
	if got := ce.state(t); got != "2 |" {
		t.Fatalf("with the repair confirmed on its placement: versions %q, want v1 dropped, v2 kept", got)
	}
	if got := counterValue(ce.srv.m.confirms.WithLabelValues("rolled_back")); got != 0 {
		t.Fatalf("rolled_back = %v", got)
	}
	if !ce.exists(t, "p2", 1) {
		t.Fatal("v2's shard collected")
	}
}

// The same for a key deleted after moving: a tombstone on the other
// placement, held by all its servers, confirms; it is never a reason to
// restore v1 here.
func TestReturnAfterDeleteElsewhereIsNotRolledBack(t *testing.T) {
	ce := newConfirmEnv(t, nine[7], nine[8])
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)
	for _, id := range elsewhere {
		ce.peers.set(id, peerState{cur: tomb(moved(v2, 3))})
	}
	ce.tick(t, testRollbackAfter+testGCDelay)
	if got := ce.state(t); got != "2 |" {
		t.Fatalf("versions %q, want v1 dropped (a newer tombstone is confirmed), v2 kept", got)
	}
}

// A hot key: with metadata.MaxPrevious previous versions its confirm runs
// at once, not after GCDelay, so its versions stay few; the dropped
// versions' shards still wait GCDelay for reads in flight.
func TestHotKeyConfirmedEarly(t *testing.T) {
	ce := newConfirmEnv(t)
	ce.peers.mirror = ce.srv.meta // every peer holds what this server holds
	ce.putManifest(t, wide(1, "p1"))
	for ts := int64(2); ts <= 1+metadata.MaxPrevious; ts++ {
		ce.putManifest(t, wide(ts, "p2"))
	}
	ce.tick(t, time.Second)
	if got := ce.state(t); got != "5 |" {
		t.Fatalf("versions %q a second after the %dth overwrite, want the previous ones dropped", got, metadata.MaxPrevious)
	}
	if !ce.exists(t, "p1", 1) {
		t.Fatal("v1's shard collected at once; reads in flight get GCDelay")
	}
	ce.tick(t, testGCDelay+time.Second)
	if ce.exists(t, "p1", 1) || !ce.exists(t, "p2", 1) {
		t.Fatal("want v1's shard collected GCDelay after the early confirmation, p2 kept")
	}
}
