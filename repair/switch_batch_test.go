package repair

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// inlineCluster is twelve shard servers n0..n11 (a0..a11) holding inline
// objects, in memory: this server's (n0's) store and every server's
// versions of each key. It counts the manifest calls made of each server.
type inlineCluster struct {
	members *fakeCluster

	mu    sync.Mutex
	local map[string]*metadata.Manifest              // key -> n0's manifest
	held  map[string]map[string][]*metadata.Manifest // addr -> key -> versions, current first
	calls map[string]int                             // "fence a3", "write a3", "get a3", "put a3", "confirm a3"
	// refuse: addr/key whose writes fail.
	refuse map[string]bool
	// confirmed: addr -> the versions it was told are confirmed, by key.
	confirmed map[string]map[string][]metadata.Version
}

func newInlineCluster() *inlineCluster {
	return &inlineCluster{members: newFakeCluster(12), local: map[string]*metadata.Manifest{},
		held: map[string]map[string][]*metadata.Manifest{}, calls: map[string]int{}, refuse: map[string]bool{},
		confirmed: map[string]map[string][]metadata.Version{}}
}

// confirmedOn returns the servers told that key's version v is confirmed,
// and fails t if one was told so twice or of another version of key.
func (c *inlineCluster) confirmedOn(t *testing.T, key string, v metadata.Version) []string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for i := range 12 {
		vs := c.confirmed[fmt.Sprintf("a%d", i)][key]
		if len(vs) > 1 || (len(vs) == 1 && vs[0] != v) {
			t.Fatalf("n%d told %v of %s confirmed, want %s at most once", i, vs, key, v)
		}
		if len(vs) == 1 {
			ids = append(ids, fmt.Sprintf("n%d", i))
		}
	}
	return ids
}

// add places an inline object on n0, n8 and 7 of the others (which
// depend on i), held by each of them; n8 is the server that dies.
func (c *inlineCluster) add(i int) *metadata.Manifest {
	others := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n9", "n10", "n11"}
	place := []string{"n0", "n8"}
	for j := range 7 {
		place = append(place, others[(i+j)%len(others)])
	}
	m := &metadata.Manifest{Bucket: "b", Key: fmt.Sprintf("k%02d", i), Version: metadata.Version{TS: 1000, Writer: "gw"},
		Code: "rs-6-3", Size: 6, Placement: place, Inline: []byte(fmt.Sprintf("data%02d", i))}
	c.local[m.Key] = m
	for _, id := range place {
		c.hold(addrOf(id), m.Key, m)
	}
	return m
}

func addrOf(id string) string { return "a" + id[1:] }

// hold makes m the current version of key on addr, the others previous.
func (c *inlineCluster) hold(addr, key string, vs ...*metadata.Manifest) {
	if c.held[addr] == nil {
		c.held[addr] = map[string][]*metadata.Manifest{}
	}
	c.held[addr][key] = vs
}

// current is key's current version on addr (nil: none).
func (c *inlineCluster) current(addr, key string) *metadata.Manifest {
	c.mu.Lock()
	defer c.mu.Unlock()
	if vs := c.held[addr][key]; len(vs) > 0 {
		return vs[0]
	}
	return nil
}

// put stores m on addr as a shard server does: current when newer than
// the current version, else kept beside it.
func (c *inlineCluster) put(addr string, m *metadata.Manifest) (stored bool, cur metadata.Version) {
	if c.held[addr] == nil {
		c.held[addr] = map[string][]*metadata.Manifest{}
	}
	vs := c.held[addr][m.Key]
	for _, h := range vs {
		if h.Version == m.Version {
			return false, vs[0].Version
		}
	}
	if len(vs) > 0 && m.Version.Less(vs[0].Version) {
		c.held[addr][m.Key] = append(vs, m)
		return false, vs[0].Version
	}
	c.held[addr][m.Key] = append([]*metadata.Manifest{m}, vs...)
	return true, m.Version
}

// inlineStore is the cluster's Store side (n0's manifests).
type inlineStore struct{ c *inlineCluster }

func (s inlineStore) EachManifest(context.Context, func(*metadata.Manifest) error) error { return nil }
func (s inlineStore) GetManifest(_ context.Context, _, key string) (*metadata.Manifest, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if m := s.c.local[key]; m != nil {
		return m, nil
	}
	return nil, metadata.ErrNotFound
}

// inlineShards is the cluster's Shards side, batched calls included.
type inlineShards struct{ c *inlineCluster }

func (s inlineShards) PutShard(context.Context, string, string, int, io.Reader) (shardrpc.ShardInfo, error) {
	return shardrpc.ShardInfo{}, errors.New("no shards here")
}
func (s inlineShards) GetShard(context.Context, string, string, int, int64, int64) (io.ReadCloser, error) {
	return nil, shardrpc.ErrNotFound
}
func (s inlineShards) StatShard(context.Context, string, string, int) (shardrpc.ShardInfo, error) {
	return shardrpc.ShardInfo{}, shardrpc.ErrNotFound
}
func (s inlineShards) GetManifest(_ context.Context, addr, _, key string) (*metadata.Manifest, error) {
	s.c.mu.Lock()
	s.c.calls["get "+addr]++
	s.c.mu.Unlock()
	if m := s.c.current(addr, key); m != nil {
		return m, nil
	}
	return nil, shardrpc.ErrNotFound
}
func (s inlineShards) PutManifest(_ context.Context, addr string, m *metadata.Manifest) (bool, metadata.Version, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.calls["put "+addr]++
	if s.c.refuse[addr+"/"+m.Key] {
		return false, metadata.Version{}, errors.New("refused")
	}
	stored, cur := s.c.put(addr, m)
	return stored, cur, nil
}

// GetManifestVersionsBatch answers as a shard server does: current
// manifests without their inline data.
func (s inlineShards) GetManifestVersionsBatch(_ context.Context, addr, _ string, keys []string) ([]shardrpc.KeyVersions, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.calls["fence "+addr]++
	out := make([]shardrpc.KeyVersions, len(keys))
	for i, k := range keys {
		vs := s.c.held[addr][k]
		if len(vs) == 0 {
			continue
		}
		cur := *vs[0]
		cur.Inline = nil
		out[i] = shardrpc.KeyVersions{Current: &cur, Previous: slices.Clone(vs[1:])}
	}
	return out, nil
}

func (s inlineShards) PutManifestsFenced(_ context.Context, addr string, ms []*metadata.Manifest, lease string) ([]shardrpc.PutResult, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.calls["write "+addr]++
	if lease != shardrpc.Unfenced {
		return nil, fmt.Errorf("lease %q, want an unfenced batch", lease)
	}
	out := make([]shardrpc.PutResult, len(ms))
	for i, m := range ms {
		if s.c.refuse[addr+"/"+m.Key] {
			out[i] = shardrpc.PutResult{Code: "InternalError", Message: "refused"}
			continue
		}
		stored, cur := s.c.put(addr, m)
		out[i] = shardrpc.PutResult{Stored: stored, Current: &cur, Held: true}
	}
	return out, nil
}

// Committed counts commit notices, which switches must not send (see
// switchOp): TestInlineBatchOneCallPerServer fails on any.
func (s inlineShards) Committed(_ context.Context, addr string, refs []shardrpc.VersionRef) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.calls["notice "+addr]++
	return nil
}

// SwitchConfirmed counts confirm notices and records the versions they
// name.
func (s inlineShards) SwitchConfirmed(_ context.Context, addr string, refs []shardrpc.VersionRef) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.calls["confirm "+addr]++
	if s.c.confirmed[addr] == nil {
		s.c.confirmed[addr] = map[string][]metadata.Version{}
	}
	for _, r := range refs {
		s.c.confirmed[addr][r.Key] = append(s.c.confirmed[addr][r.Key], r.Version)
	}
	return nil
}

// inlineWorker is n0's worker over c with n8 dead (its objects lost), and
// the repair of objects 0..n-1 queued.
func inlineWorker(t *testing.T, c *inlineCluster, n int) *Worker {
	t.Helper()
	c.members.setState(8, cluster.StateDead)
	cfg := DefaultConfig()
	cfg.NodeID = "n0"
	w, err := New(cfg, inlineStore{c}, c.members, inlineShards{c}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m := c.local[fmt.Sprintf("k%02d", i)]
		if !w.enqueue(&job{bucket: m.Bucket, key: m.Key, version: m.Version, lost: []int{1}, prio: 1, inline: true}) {
			t.Fatalf("%s not queued", m.Key)
		}
	}
	return w
}

// runQueued runs what one job runner takes from the queue.
func runQueued(t *testing.T, w *Worker, want int) {
	t.Helper()
	js := w.sched.popBatch(inlineBatch, w.batchable)
	if len(js) != want {
		t.Fatalf("took %d jobs, want a batch of %d", len(js), want)
	}
	w.runBatch(context.Background(), js)
}

// switched reports the servers that hold a repair switch of m (n0's) as
// current, and that switch.
func switched(c *inlineCluster, m *metadata.Manifest) (ids []string, sw *metadata.Manifest) {
	for i := range 12 {
		cur := c.current(fmt.Sprintf("a%d", i), m.Key)
		if cur != nil && cur.Version.TS == m.Version.TS+1 {
			ids, sw = append(ids, fmt.Sprintf("n%d", i)), cur
		}
	}
	return ids, sw
}

// TestInlineBatchOneCallPerServer: the repairs of many inline objects
// taken together cost one fence call, one write call and one confirm
// notice per server, and each object is switched as alone: its live old
// servers and a new one hold the switch, inline data and all, and each of
// them is told it is confirmed. (No commit notice: see switchOp.)
func TestInlineBatchOneCallPerServer(t *testing.T) {
	const n = 40
	c := newInlineCluster()
	for i := range n {
		c.add(i)
	}
	w := inlineWorker(t, c, n)
	runQueued(t, w, n)
	for k, calls := range c.calls {
		if kind, _, _ := strings.Cut(k, " "); calls != 1 || (kind != "fence" && kind != "write" && kind != "confirm") {
			t.Errorf("%d calls %q, want one batched fence, write and confirm notice per server", calls, k)
		}
	}
	if len(c.calls) != 3*11 {
		t.Errorf("calls %v, want a fence, a write and a confirm notice to each of the 11 live servers", c.calls)
	}
	for i := range n {
		m := c.local[fmt.Sprintf("k%02d", i)]
		ids, sw := switched(c, m)
		if len(ids) != 9 || slices.Contains(ids, "n8") {
			t.Fatalf("%s switched on %v, want its 8 live servers and a new one", m.Key, ids)
		}
		if sw.Version.Writer != repairWriter("n0") || string(sw.Inline) != string(m.Inline) || slices.Contains(sw.Placement, "n8") {
			t.Fatalf("%s: switch %+v, want n0's with the object's data, off n8", m.Key, sw)
		}
		if sw.DataOf != m.Version {
			t.Fatalf("%s: switch names its data as version %v's, want %v's, which wrote it", m.Key, sw.DataOf, m.Version)
		}
		if told := c.confirmedOn(t, m.Key, sw.Version); !slices.Equal(told, ids) {
			t.Fatalf("%s: %v told its switch is confirmed, want its holders %v", m.Key, told, ids)
		}
	}
	if st := w.sched.counts; st.Done != n || st.Running != 0 || st.Queued != 0 || st.ByMethod[string(Inline)] != n {
		t.Errorf("counts %+v, want %d inline repairs done", st, n)
	}
}

// TestInlineBatchSupersededAlone: an object overwritten while its repair
// was queued fails alone (superseded, not switched anywhere); the others
// of its batch are repaired.
func TestInlineBatchSupersededAlone(t *testing.T) {
	const n = 10
	c := newInlineCluster()
	for i := range n {
		c.add(i)
	}
	m := c.local["k03"]
	over := *m
	over.Version = metadata.Version{TS: 5000, Writer: "gw"}
	c.hold(addrOf(m.Placement[2]), m.Key, &over, m)
	w := inlineWorker(t, c, n)
	runQueued(t, w, n)
	if ids, _ := switched(c, m); len(ids) != 0 {
		t.Errorf("the overwritten object was switched on %v", ids)
	}
	if told := c.confirmedOn(t, m.Key, metadata.Version{}); len(told) != 0 {
		t.Errorf("the overwritten object's switch was noticed to %v", told)
	}
	for i := range n {
		if i == 3 {
			continue
		}
		if ids, _ := switched(c, c.local[fmt.Sprintf("k%02d", i)]); len(ids) != 9 {
			t.Errorf("k%02d switched on %v, want 9 servers", i, ids)
		}
	}
	if st := w.sched.counts; st.Done != n-1 || st.Failed != 0 || st.Running != 0 {
		t.Errorf("counts %+v, want %d done and the superseded one neither done nor failed", st, n-1)
	}
	if q := w.sched.jobs(); len(q) != 0 {
		t.Errorf("%d jobs queued again, want none (the next scan looks at it afresh)", len(q))
	}
}

// TestInlineBatchFinishesUnfinishedSwitch: an earlier switch of an object
// stored on too few servers is finished (written everywhere, with the
// object's data, which the batched fence reads without), not fenced out.
func TestInlineBatchFinishesUnfinishedSwitch(t *testing.T) {
	const n = 6
	c := newInlineCluster()
	for i := range n {
		c.add(i)
	}
	m := c.local["k02"]
	outside := ""
	for _, id := range []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n9", "n10", "n11"} {
		if !slices.Contains(m.Placement, id) {
			outside = id // NB: the last server outside: not the one n0 picks first
		}
	}
	unfinished := *m
	unfinished.Version = metadata.Version{TS: m.Version.TS + 1, Writer: repairWriter("n3")}
	unfinished.Placement = slices.Clone(m.Placement)
	unfinished.Placement[1] = outside
	for _, id := range m.Placement[2:4] {
		c.hold(addrOf(id), m.Key, &unfinished, m)
	}
	w := inlineWorker(t, c, n)
	runQueued(t, w, n)
	ids, _ := switched(c, m)
	if len(ids) != 9 || !slices.Contains(ids, outside) {
		t.Fatalf("switched on %v, want the live old servers and %s", ids, outside)
	}
	for _, id := range ids {
		cur := c.current(addrOf(id), m.Key)
		if cur.Version != unfinished.Version || string(cur.Inline) != string(m.Inline) {
			t.Fatalf("%s holds %s with %q, want the unfinished switch %s with the object's data", id, cur.Version, cur.Inline, unfinished.Version)
		}
	}
	if st := w.sched.counts; st.Done != n {
		t.Errorf("counts %+v, want %d done", st, n)
	}
}

// TestInlineBatchQuorumShortRetriedAlone: an object whose switch too few
// servers stored fails alone and is queued again, to run alone; the
// others of its batch are repaired.
func TestInlineBatchQuorumShortRetriedAlone(t *testing.T) {
	const n = 8
	c := newInlineCluster()
	for i := range n {
		c.add(i)
	}
	m := c.local["k05"]
	for _, id := range m.Placement[3:] {
		c.refuse[addrOf(id)+"/"+m.Key] = true // 3 of its 9 targets store it, k+1 = 7 needed
	}
	w := inlineWorker(t, c, n)
	runQueued(t, w, n)
	if st := w.sched.counts; st.Done != n-1 || st.Failed != 0 || st.Queued != 1 {
		t.Fatalf("counts %+v, want %d done and one queued again", st, n-1)
	}
	if told := c.confirmedOn(t, m.Key, metadata.Version{}); len(told) != 0 {
		t.Errorf("a switch short of its quorum was noticed to %v", told)
	}
	q := w.sched.jobs()
	if len(q) != 1 || q[0].key != m.Key || q[0].attempt != 1 {
		t.Fatalf("queued %+v, want %s's second attempt", q, m.Key)
	}
	if w.batchable(nil, q[0]) {
		t.Errorf("a retried job may lead a batch; it runs alone")
	}
	// Its retry, alone and with the servers storing again, switches it.
	clear(c.refuse)
	w.now = func() time.Time { return time.Now().Add(time.Hour) } // past its backoff
	js := w.sched.popBatch(inlineBatch, w.batchable)
	if len(js) != 1 {
		t.Fatalf("took %d jobs, want the retry alone", len(js))
	}
	w.runJob(context.Background(), js[0])
	ids, sw := switched(c, m)
	if len(ids) != 9 {
		t.Fatalf("after the retry switched on %v, want 9 servers", ids)
	}
	if told := c.confirmedOn(t, m.Key, sw.Version); !slices.Equal(told, ids) {
		t.Errorf("after the retry (a single switch) %v told it is confirmed, want its holders %v", told, ids)
	}
	if st := w.sched.counts; st.Done != n {
		t.Errorf("counts %+v, want %d done", st, n)
	}
}
