package shardserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// tombCluster is this server (testNode, first of the placement) and eight
// peers, each with its own metadata store, reached through a fake
// tombstoneAPI; the "address" of a peer is its node ID.
type tombCluster struct {
	*testEnv
	clock *fakeClock

	mu      sync.Mutex
	stores  map[string]*metadata.Store
	silent  map[string]bool // gossip shows them down
	failing map[string]bool // they answer with an error
}

const testTombGrace = time.Minute

// first9 is an rs-6-3 placement led by this server.
var first9 = append([]string{testNode}, nine[0], nine[2], nine[3], nine[4], nine[5], nine[6], nine[7], nine[8])

func newTombCluster(t *testing.T) *tombCluster {
	c := &tombCluster{clock: &fakeClock{t: time.Unix(1_000_000, 0)}, stores: map[string]*metadata.Store{},
		silent: map[string]bool{}, failing: map[string]bool{}}
	c.testEnv = newEnv(t, func(cfg *Config) {
		cfg.TombstoneGrace = testTombGrace
		cfg.Members = func() []string { return first9 }
		cfg.Peers = func(id string) (string, bool) {
			c.mu.Lock()
			defer c.mu.Unlock()
			return id, !c.silent[id]
		}
	})
	c.srv.now = c.clock.now
	c.srv.tpeers = c
	c.srv.peers = &fakePeers{} // confirm jobs this test does not run
	for _, id := range first9[1:] {
		st, err := metadata.Open("db", metadata.Options{FS: vfs.NewMem(), NodeID: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		c.stores[id] = st
	}
	return c
}

func (c *tombCluster) peer(addr string) (*metadata.Store, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing[addr] {
		return nil, fmt.Errorf("node %s: %w", addr, errors.New("connection refused"))
	}
	return c.stores[addr], nil
}

func (c *tombCluster) GetManifestVersionsBatch(ctx context.Context, addr, bucket string, keys []string) ([]shardrpc.KeyVersions, error) {
	st, err := c.peer(addr)
	if err != nil {
		return nil, err
	}
	out := make([]shardrpc.KeyVersions, len(keys))
	for i, k := range keys {
		cur, prev, err := st.Versions(ctx, bucket, k)
		if err != nil && !errors.Is(err, metadata.ErrNotFound) {
			return nil, err
		}
		out[i] = shardrpc.KeyVersions{Current: cur, Previous: prev}
	}
	return out, nil
}

func (c *tombCluster) RemoveTombstones(ctx context.Context, addr, bucket string, refs []shardrpc.TombstoneRef) ([]bool, error) {
	st, err := c.peer(addr)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(refs))
	for i, r := range refs {
		if out[i], err = st.RemoveTombstone(ctx, bucket, r.Key, r.Version); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (c *tombCluster) PutManifest(ctx context.Context, addr string, m *metadata.Manifest) (bool, metadata.Version, error) {
	st, err := c.peer(addr)
	if err != nil {
		return false, metadata.Version{}, err
	}
	mm := *m
	res, err := st.PutManifest(ctx, &mm)
	if err != nil {
		return false, metadata.Version{}, err
	}
	return res.Stored, res.Current.Version, nil
}

// put stores m on this server (through its API, as a gateway would) and
// on the peers named.
func (c *tombCluster) put(t *testing.T, m *metadata.Manifest, peers ...string) {
	t.Helper()
	if _, _, err := c.client.PutManifest(context.Background(), c.addr, m); err != nil {
		t.Fatal(err)
	}
	c.putPeers(t, m, peers...)
}

func (c *tombCluster) putPeers(t *testing.T, m *metadata.Manifest, peers ...string) {
	t.Helper()
	for _, id := range peers {
		mm := *m
		if _, err := c.stores[id].PutManifest(context.Background(), &mm); err != nil {
			t.Fatal(err)
		}
	}
}

// tick advances the clock by d and runs the tombstone queue.
func (c *tombCluster) tick(t *testing.T, d time.Duration) int {
	t.Helper()
	c.clock.advance(d)
	n, err := c.srv.runTombstones(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// holders lists the servers that hold any version of b/k.
func (c *tombCluster) holders(t *testing.T) []string {
	t.Helper()
	var out []string
	if _, _, err := c.srv.meta.Versions(context.Background(), "b", "k"); err == nil {
		out = append(out, testNode)
	}
	for _, id := range first9[1:] {
		if _, _, err := c.stores[id].Versions(context.Background(), "b", "k"); err == nil {
			out = append(out, id)
		}
	}
	return out
}

func (c *tombCluster) checks(outcome string) float64 {
	return counterValue(c.srv.m.tombstones.WithLabelValues(outcome))
}

// tomb9 is a tombstone of b/k at ts on first9.
func tomb9(ts int64) *metadata.Manifest {
	return &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: ts, Writer: "gw"}, Deleted: true,
		Code: "rs-6-3", Placement: first9}
}

// obj9 is an object of b/k at ts on first9.
func obj9(ts int64) *metadata.Manifest {
	m := wide(ts, fmt.Sprintf("p%d", ts))
	m.Placement = first9
	return m
}

func TestTombstoneCollectedWhenEveryServerHoldsItOrNothing(t *testing.T) {
	c := newTombCluster(t)
	// Seven of the placement stored the tombstone; the others (and the
	// rest of the cluster) hold nothing of the key.
	c.put(t, tomb9(10), first9[1:7]...)
	if n := c.tick(t, testTombGrace-time.Second); n != 0 || len(c.holders(t)) != 7 {
		t.Fatalf("collected %d before the grace; holders %v", n, c.holders(t))
	}
	if n := c.tick(t, time.Second); n != 1 {
		t.Fatalf("collected %d after the grace, want 1", n)
	}
	if h := c.holders(t); len(h) != 0 {
		t.Fatalf("holders after collection: %v", h)
	}
	st, _ := c.srv.meta.Stats(context.Background())
	if st.Tombstones != 0 || st.TombstoneJobs != 0 || st.TombstonesCollected != 1 || c.checks("collected") != 1 {
		t.Fatalf("stats %+v, collected checks %v", st, c.checks("collected"))
	}
}

func TestTombstoneWaitsForServerWithOlderVersion(t *testing.T) {
	c := newTombCluster(t)
	// The DELETE reached this server and six others (whose confirm jobs
	// have dropped v under it); the last two missed it and still hold v
	// as current.
	late := first9[7:]
	c.putPeers(t, obj9(5), late...)
	c.put(t, tomb9(10), first9[1:7]...)
	c.tick(t, testTombGrace)
	if h := c.holders(t); len(h) != 9 || c.checks("waiting") != 1 {
		t.Fatalf("holders %v, waiting checks %v: want every copy kept while two servers hold v", h, c.checks("waiting"))
	}
	// The tombstone was visible (seven holders): the two were handed it,
	// with v under it until their confirm jobs drop it.
	for _, id := range late {
		cur, prev, err := c.stores[id].Versions(context.Background(), "b", "k")
		if err != nil || cur.Version.TS != 10 || len(prev) != 1 {
			t.Fatalf("%s: %v %v %v, want the tombstone over v", id, cur, prev, err)
		}
	}
	c.tick(t, c.srv.tombRetry(0))
	if h := c.holders(t); len(h) != 9 {
		t.Fatalf("collected while v is still under the tombstone on %v: holders %v", late, h)
	}
	for _, id := range late {
		if _, err := c.stores[id].DropPrevious(context.Background(), "b", "k", metadata.Version{TS: 10, Writer: "gw"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.tick(t, c.srv.tombRetry(1)); n != 1 || len(c.holders(t)) != 0 {
		t.Fatalf("collected %d once every server holds the tombstone alone; holders %v", n, c.holders(t))
	}
}

func TestTombstoneBlockedBySilentServer(t *testing.T) {
	for _, how := range []string{"down", "failing"} {
		t.Run(how, func(t *testing.T) {
			c := newTombCluster(t)
			c.put(t, tomb9(10), first9[1:8]...)
			off := first9[8] // holds nothing it could tell
			c.mu.Lock()
			switch how {
			case "down":
				c.silent[off] = true
			case "failing":
				c.failing[off] = true
			}
			c.mu.Unlock()
			for i := range 3 {
				c.tick(t, c.srv.tombRetry(i)+testTombGrace)
			}
			if h := c.holders(t); len(h) != 8 || c.checks("blocked") != 3 {
				t.Fatalf("holders %v, blocked checks %v: want nothing removed while %s is silent", h, c.checks("blocked"), off)
			}
			c.mu.Lock()
			c.silent[off], c.failing[off] = false, false
			c.mu.Unlock()
			if n := c.tick(t, 10*time.Minute); n != 1 || len(c.holders(t)) != 0 {
				t.Fatalf("collected %d once every server answered; holders %v", n, c.holders(t))
			}
		})
	}
}

func TestTombstoneNewerWriteNotRemoved(t *testing.T) {
	c := newTombCluster(t)
	c.put(t, tomb9(10), first9[1:]...)
	// The key is written again on two servers (a write in flight, or one
	// that will fail): nothing is collected, the newer write stays.
	w := obj9(20)
	c.putPeers(t, w, first9[7:]...)
	c.tick(t, testTombGrace)
	if c.checks("superseded") != 1 {
		t.Fatalf("superseded checks %v, want 1", c.checks("superseded"))
	}
	for _, id := range first9[7:] {
		cur, _, err := c.stores[id].Versions(context.Background(), "b", "k")
		if err != nil || cur.Version.TS != 20 {
			t.Fatalf("%s: %v %v, want the newer write current", id, cur, err)
		}
	}
	if h := c.holders(t); len(h) != 9 {
		t.Fatalf("holders %v: want the tombstone kept where it is current", h)
	}

	// The removal call itself leaves a newer write alone: here, the
	// write landed between the check and the removal.
	c.put(t, obj9(30))
	removed, err := c.client.RemoveTombstones(context.Background(), c.addr, "b", []shardrpc.TombstoneRef{{Key: "k", Version: tomb9(10).Version}})
	if err != nil || len(removed) != 1 || removed[0] {
		t.Fatalf("RemoveTombstones over a newer write: %v, %v", removed, err)
	}
	if cur, _, err := c.srv.meta.Versions(context.Background(), "b", "k"); err != nil || cur.Version.TS != 30 {
		t.Fatalf("after the removal call: %v %v, want the write at 30", cur, err)
	}
}

func TestTombstoneRemovalRPC(t *testing.T) {
	c := newTombCluster(t)
	c.put(t, tomb9(10))
	ref := shardrpc.TombstoneRef{Key: "k", Version: tomb9(10).Version}
	for i, want := range []bool{true, false} { // idempotent: the second finds nothing
		removed, err := c.client.RemoveTombstones(context.Background(), c.addr, "b", []shardrpc.TombstoneRef{ref})
		if err != nil || len(removed) != 1 || removed[0] != want {
			t.Fatalf("call %d: removed %v, %v; want %v", i, removed, err, want)
		}
	}
	if h := c.holders(t); len(h) != 0 {
		t.Fatalf("holders %v after removal", h)
	}
}

func TestTombstoneWithVersionsUnderItKept(t *testing.T) {
	t.Run("suspended bucket: null delete over a version", func(t *testing.T) {
		c := newTombCluster(t)
		v := obj9(5)
		v.Versioned, v.VersionID = true, "v5"
		c.put(t, v, first9[1:]...)
		c.put(t, tomb9(10), first9[1:]...)
		c.tick(t, testTombGrace)
		if h := c.holders(t); len(h) != 9 || c.checks("kept") != 1 {
			t.Fatalf("holders %v, kept checks %v: want the delete and the version under it kept", h, c.checks("kept"))
		}
		if st, _ := c.srv.meta.Stats(context.Background()); st.TombstoneJobs != 0 {
			t.Fatalf("%d jobs left: the kept tombstone's job should end", st.TombstoneJobs)
		}
	})
	t.Run("versioned delete marker", func(t *testing.T) {
		c := newTombCluster(t)
		m := tomb9(10)
		m.Versioned = true
		c.put(t, m, first9[1:]...)
		if st, _ := c.srv.meta.Stats(context.Background()); st.TombstoneJobs != 0 {
			t.Fatalf("a delete marker was queued for collection (%d jobs)", st.TombstoneJobs)
		}
		c.tick(t, 4*testTombGrace)
		if h := c.holders(t); len(h) != 9 {
			t.Fatalf("holders %v: want the delete marker kept", h)
		}
	})
	t.Run("unversioned: the replaced object awaits its confirm job", func(t *testing.T) {
		c := newTombCluster(t)
		v := obj9(5)
		c.put(t, v, first9[1:]...)
		c.put(t, tomb9(10), first9[1:]...)
		c.tick(t, testTombGrace)
		if h := c.holders(t); len(h) != 9 || c.checks("waiting") != 1 {
			t.Fatalf("holders %v, waiting checks %v: want nothing removed while v is under the tombstone", h, c.checks("waiting"))
		}
		// The confirm jobs run (the tombstone is on a write quorum).
		upTo := tomb9(10).Version
		if _, err := c.srv.meta.DropPrevious(context.Background(), "b", "k", upTo, nil); err != nil {
			t.Fatal(err)
		}
		for _, id := range first9[1:] {
			if _, err := c.stores[id].DropPrevious(context.Background(), "b", "k", upTo, nil); err != nil {
				t.Fatal(err)
			}
		}
		if n := c.tick(t, c.srv.tombRetry(1)); n != 1 || len(c.holders(t)) != 0 {
			t.Fatalf("collected %d once nothing is under it; holders %v", n, c.holders(t))
		}
	})
}

func TestJudgeTombstone(t *testing.T) {
	tb := tomb9(10)
	older, newer := obj9(5), obj9(20)
	a := func(id string, cur *metadata.Manifest, prev ...*metadata.Manifest) tombAnswer {
		return tombAnswer{id: id, cur: cur, prev: prev}
	}
	cases := []struct {
		name    string
		answers []tombAnswer
		want    tombVerdict
		holders int
		behind  int
	}{
		{"all hold it", []tombAnswer{a("x", tb), a("y", tb)}, tombCollect, 2, 0},
		{"some hold nothing", []tombAnswer{a("x", tb), a("y", nil)}, tombCollect, 1, 0},
		{"nobody else holds it", []tombAnswer{a("x", nil)}, tombCollect, 0, 0},
		{"one missed it", []tombAnswer{a("x", tb), a("y", older)}, tombWait, 1, 1},
		{"one has the old version under it", []tombAnswer{a("x", tb, older)}, tombWait, 1, 0},
		{"one is silent", []tombAnswer{a("x", tb), {id: "y", failed: true}}, tombBlocked, 1, 0},
		{"silent outranks waiting", []tombAnswer{a("x", older), {id: "y", failed: true}}, tombBlocked, 0, 1},
		{"a newer write", []tombAnswer{a("x", tb), a("y", newer, tb)}, tombSuperseded, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, holders, behind := judgeTombstone(tb, tc.answers)
			if v != tc.want || len(holders) != tc.holders || len(behind) != tc.behind {
				t.Fatalf("got %v holders %v behind %v; want %v with %d holders, %d behind", v, holders, behind, tc.want, tc.holders, tc.behind)
			}
		})
	}
}

func TestTombstoneChecksWaitForGossipAfterStart(t *testing.T) {
	c := newTombCluster(t)
	c.put(t, tomb9(10), first9[1:]...)
	c.clock.advance(testTombGrace) // the check is due...
	c.srv.runStart = c.clock.now() // ...but Run just started: the gossip view may be partial
	if n := c.tick(t, time.Second); n != 0 || len(c.holders(t)) != 9 {
		t.Fatalf("collected %d within the first %v of the process; holders %v", n, c.srv.cfg.TombstoneSettle, c.holders(t))
	}
	if n := c.tick(t, c.srv.cfg.TombstoneSettle); n != 1 || len(c.holders(t)) != 0 {
		t.Fatalf("collected %d once the view settled; holders %v", n, c.holders(t))
	}
}
