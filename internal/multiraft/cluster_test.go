package multiraft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// kvSM is a test state machine: "set k v" stores v under k and returns
// the old value; "cas k old new" stores new only if k holds old.
type kvSM struct{}

func (kvSM) Apply(b *pebble.Batch, g uint32, prefix []byte, index uint64, cmd []byte) (any, error) {
	f := strings.Fields(string(cmd))
	key := append(slices.Clone(prefix), f[1]...)
	old, _, err := get(b, key)
	if err != nil {
		return nil, err
	}
	switch f[0] {
	case "set":
		return string(old), b.Set(key, []byte(f[2]), nil)
	case "cas":
		if string(old) != f[2] {
			return "conflict", nil
		}
		return "ok", b.Set(key, []byte(f[3]), nil)
	}
	return nil, fmt.Errorf("bad command %q", cmd)
}

// memNet connects hosts in one process; it can cut hosts off.
type memNet struct {
	mu    sync.Mutex
	hosts map[uint64]*Host
	down  map[uint64]bool
}

func (n *memNet) target(from, to uint64) *Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down[from] || n.down[to] {
		return nil
	}
	return n.hosts[to]
}

type memTransport struct {
	net  *memNet
	self uint64
}

func (t memTransport) Send(to uint64, g uint32, m *pb.Message) {
	if h := t.net.target(t.self, to); h != nil {
		h.Deliver(g, proto.Clone(m).(*pb.Message))
	}
}

func (t memTransport) SendSnapshot(ctx context.Context, to uint64, g uint32, m *pb.Message, kvs func(yield func(k, v []byte) error) error) error {
	h := t.net.target(t.self, to)
	if h == nil {
		return errors.New("unreachable")
	}
	var pairs [][2][]byte
	if err := kvs(func(k, v []byte) error {
		pairs = append(pairs, [2][]byte{slices.Clone(k), slices.Clone(v)})
		return nil
	}); err != nil {
		return err
	}
	i := 0
	return h.ReceiveSnapshot(g, proto.Clone(m).(*pb.Message), func() ([]byte, []byte, bool, error) {
		if i == len(pairs) {
			return nil, nil, false, nil
		}
		i++
		return pairs[i-1][0], pairs[i-1][1], true, nil
	})
}

// testCluster is n hosts on one memNet, each with its own pebble DB in a
// temp dir, a ticker and a manager.
type testCluster struct {
	t       *testing.T
	net     *memNet
	dirs    map[uint64]string
	dbs     map[uint64]*pebble.DB
	cancels map[uint64]context.CancelFunc
	mgrs    map[uint64]*Manager
	mcfg    ManagerConfig
	logKeep uint64
	members *staticMembers
}

type staticMembers struct {
	mu    sync.Mutex
	nodes map[uint64]NodeInfo
}

func (s *staticMembers) Nodes() []NodeInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []NodeInfo
	for _, n := range s.nodes {
		out = append(out, n)
	}
	return out
}

func (s *staticMembers) set(id uint64, alive bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[id] = NodeInfo{ID: id, Alive: alive, Since: time.Now()}
}

func orderByID(_ uint32, ids []uint64) []uint64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func newTestCluster(t *testing.T, n, replicas int) *testCluster {
	c := &testCluster{
		t: t, net: &memNet{hosts: map[uint64]*Host{}, down: map[uint64]bool{}},
		dirs: map[uint64]string{}, dbs: map[uint64]*pebble.DB{}, cancels: map[uint64]context.CancelFunc{},
		mgrs:    map[uint64]*Manager{},
		mcfg:    ManagerConfig{Replicas: replicas, Grace: 500 * time.Millisecond, Interval: 50 * time.Millisecond, Order: orderByID},
		logKeep: 2000,
		members: &staticMembers{nodes: map[uint64]NodeInfo{}},
	}
	for i := 1; i <= n; i++ {
		c.dirs[uint64(i)] = t.TempDir()
	}
	t.Cleanup(func() {
		for id := range c.dbs {
			c.stop(id)
		}
	})
	return c
}

func (c *testCluster) start(id uint64) *Host {
	c.t.Helper()
	db, err := pebble.Open(filepath.Join(c.dirs[id], "db"), &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: quietLogger{}})
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.TickInterval = 10 * time.Millisecond
	cfg.HeartbeatTicks, cfg.ElectionTicks = 2, 10
	cfg.LogKeep = c.logKeep
	cfg.NodeID, cfg.DB, cfg.TempDir = id, db, filepath.Join(c.dirs[id], "tmp")
	cfg.StateMachine, cfg.Transport = kvSM{}, memTransport{c.net, id}
	if testing.Verbose() && os.Getenv("MULTIRAFT_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("host", id)
	}
	h, err := Open(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	m, err := NewManager(h, c.members, c.mcfg)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go h.Run(ctx)
	go m.Run(ctx)
	c.net.mu.Lock()
	c.net.hosts[id] = h
	delete(c.net.down, id)
	c.net.mu.Unlock()
	c.dbs[id], c.cancels[id], c.mgrs[id] = db, cancel, m
	c.members.set(id, true)
	return h
}

// stop kills host id: it stops ticking and talking, its replicas stop,
// its DB closes (what it synced survives).
func (c *testCluster) stop(id uint64) {
	c.net.mu.Lock()
	h := c.net.hosts[id]
	delete(c.net.hosts, id)
	c.net.mu.Unlock()
	if h == nil {
		return
	}
	c.cancels[id]()
	h.Close()
	c.dbs[id].Close()
	delete(c.dbs, id)
	c.members.set(id, false)
}

func (c *testCluster) host(id uint64) *Host {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	return c.net.hosts[id]
}

// leader waits for group g to have a leader among the running hosts.
func (c *testCluster) leader(g uint32) *Host {
	c.t.Helper()
	var h *Host
	c.eventually(10*time.Second, func() error {
		c.net.mu.Lock()
		defer c.net.mu.Unlock()
		for _, x := range c.net.hosts {
			if _, self := x.Leader(g); self {
				h = x
				return nil
			}
		}
		return fmt.Errorf("group %d has no leader", g)
	})
	return h
}

func (c *testCluster) eventually(d time.Duration, f func() error) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("after %s: %v", d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// propose retries cmd on group g's current leader.
func (c *testCluster) propose(g uint32, cmd string) any {
	c.t.Helper()
	var out any
	c.eventually(10*time.Second, func() error {
		h := c.leader(g)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		v, err := h.Propose(ctx, g, []byte(cmd))
		out = v
		return err
	})
	return out
}

// read does a linearizable read of key in group g.
func (c *testCluster) read(g uint32, key string) string {
	c.t.Helper()
	var out string
	c.eventually(10*time.Second, func() error {
		h := c.leader(g)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := h.ReadBarrier(ctx, g); err != nil {
			return err
		}
		v, _, err := get(h.db, append(StatePrefix(g), key...))
		out = string(v)
		return err
	})
	return out
}

func (c *testCluster) voters(g uint32) []uint64 {
	h := c.leader(g)
	v, err := h.view(context.Background(), g)
	if err != nil {
		return nil
	}
	return v.voters
}

func (c *testCluster) waitVoters(g uint32, n int) {
	c.t.Helper()
	c.eventually(20*time.Second, func() error {
		if v := c.voters(g); len(v) != n {
			return fmt.Errorf("group %d has voters %x, want %d", g, v, n)
		}
		return nil
	})
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(f string, a ...any) {
	panic(fmt.Sprintf(f, a...))
}

var _ = io.EOF
