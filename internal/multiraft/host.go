package multiraft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Errors.
var (
	// ErrStopped: the replica or host is shutting down.
	ErrStopped = errors.New("multiraft: stopped")
	// ErrAmbiguous: a proposal's outcome is unknown (the caller gave up
	// waiting, or leadership changed and it never came back): it may
	// or may not be applied.
	ErrAmbiguous = errors.New("multiraft: proposal outcome unknown")
)

// NotLeaderError says this host cannot serve the group's proposals or
// linearizable reads; Leader is the leader it knows of (0: none or no
// replica here).
type NotLeaderError struct {
	Group  uint32
	Leader uint64
}

// Error says which group this host does not lead, and who does if known.
func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return fmt.Sprintf("multiraft: not the leader of group %d (leader unknown)", e.Group)
	}
	return fmt.Sprintf("multiraft: not the leader of group %d (leader %016x)", e.Group, e.Leader)
}

// StateMachine applies a group's committed commands. Apply must be
// deterministic: every replica applies the same commands in the same
// order to the same state and must end in the same state. It writes only
// keys under prefix (the group's StatePrefix) through b, which also
// reads them (an indexed batch: earlier commands of the same batch are
// visible). The value is handed to the proposer; an error is a storage
// failure that stops the replica, never a refused command (return that
// as the value).
type StateMachine interface {
	Apply(b *pebble.Batch, group uint32, prefix []byte, index uint64, cmd []byte) (any, error)
}

// Transport carries raft messages between hosts. Send never blocks and
// may drop messages (raft retries); SendSnapshot streams a snapshot's
// key/value pairs after the message and returns once the receiver has
// stored them.
type Transport interface {
	Send(to uint64, group uint32, m *pb.Message)
	SendSnapshot(ctx context.Context, to uint64, group uint32, m *pb.Message, kvs func(yield func(k, v []byte) error) error) error
}

// Config configures a Host.
type Config struct {
	// NodeID is this host's raft ID, unique in the cluster, not 0.
	NodeID uint64
	// DB holds every group's log and state; the caller opens and closes it.
	DB *pebble.DB
	// TempDir stages received snapshots; on the DB's file system.
	TempDir string
	// StateMachine applies committed commands.
	StateMachine StateMachine
	// Transport sends messages to other hosts.
	Transport Transport
	// TickInterval is raft's clock: heartbeats go out every
	// HeartbeatTicks and a follower that hears nothing for ElectionTicks
	// (randomised up to twice that) campaigns.
	TickInterval   time.Duration
	HeartbeatTicks int
	ElectionTicks  int
	// LogKeep is how many applied entries a log keeps for followers
	// that fall a little behind; it is truncated at twice that.
	LogKeep uint64
	// OnLeadership, if set, is called (on the replica's goroutine; keep
	// it short) when this host gains or loses a group's leadership.
	OnLeadership func(group uint32, leader bool)
	Logger       *slog.Logger
}

// DefaultConfig returns the timing used by shard servers: heartbeats every
// 500 ms, elections after 3-6 s of silence (long enough for a loaded
// machine not to flap leaders, short enough that a write waits a few
// seconds at most when a leader dies).
func DefaultConfig() Config {
	return Config{
		TickInterval:   100 * time.Millisecond,
		HeartbeatTicks: 5,
		ElectionTicks:  30,
		LogKeep:        2000,
	}
}

// Validate checks the config.
func (c *Config) Validate() error {
	switch {
	case c.NodeID == 0 || raft.IsLocalMsgTarget(c.NodeID):
		return fmt.Errorf("multiraft: node ID %x cannot be a raft ID", c.NodeID)
	case c.DB == nil || c.StateMachine == nil || c.Transport == nil:
		return errors.New("multiraft: config needs a DB, a state machine and a transport")
	case c.TempDir == "":
		return errors.New("multiraft: config needs a temp dir")
	case c.TickInterval <= 0 || c.HeartbeatTicks <= 0 || c.ElectionTicks <= c.HeartbeatTicks:
		return errors.New("multiraft: tick interval and heartbeat ticks must be positive, election ticks more than heartbeat ticks")
	case c.LogKeep == 0:
		return errors.New("multiraft: LogKeep must be positive")
	}
	return nil
}

// Host runs this server's replicas of many raft groups over one pebble DB
// and one transport. Group membership changes are driven from outside
// (see Manager); the host only applies them.
type Host struct {
	cfg Config
	db  *pebble.DB
	log *slog.Logger

	mu       sync.Mutex
	replicas map[uint32]*replica
	closed   bool
	snapSeq  uint64
	wg       sync.WaitGroup
}

// hostReplicaKey marks that group g has a replica here: 'H' 'r' BE32(g).
func hostReplicaKey(g uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{nsHost, 'r'}, g)
}

// Open loads the replicas stored in the DB and starts them.
func Open(cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.TempDir, 0o700); err != nil {
		return nil, fmt.Errorf("multiraft: %w", err)
	}
	// Snapshots staged by an earlier run are useless now.
	if old, err := filepath.Glob(filepath.Join(cfg.TempDir, "snap-*.sst")); err == nil {
		for _, p := range old {
			os.Remove(p)
		}
	}
	h := &Host{cfg: cfg, db: cfg.DB, log: cfg.Logger, replicas: map[uint32]*replica{}}
	prefix := []byte{nsHost, 'r'}
	it, err := h.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: []byte{nsHost, 's'}})
	if err != nil {
		return nil, err
	}
	var groups []uint32
	for it.First(); it.Valid(); it.Next() {
		if k := it.Key(); len(k) == 6 {
			groups = append(groups, binary.BigEndian.Uint32(k[2:]))
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, err
	}
	for _, g := range groups {
		if _, err := h.startReplica(g); err != nil {
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

// startReplica loads group g's replica and starts its goroutine.
func (h *Host) startReplica(g uint32) (*replica, error) {
	store, err := loadLogStore(h.db, g)
	if err != nil {
		return nil, err
	}
	r, err := newReplica(h, g, store)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrStopped
	}
	if old, ok := h.replicas[g]; ok {
		return old, nil
	}
	h.replicas[g] = r
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		r.run()
	}()
	return r, nil
}

// Run ticks every replica until ctx ends.
func (h *Host) Run(ctx context.Context) error {
	t := time.NewTicker(h.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			for _, r := range h.all() {
				r.enqueue(func(in *inbox) { in.ticks++ })
			}
		}
	}
}

// Close stops every replica and waits for them. The DB stays open.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	rs := make([]*replica, 0, len(h.replicas))
	for _, r := range h.replicas {
		rs = append(rs, r)
	}
	h.mu.Unlock()
	for _, r := range rs {
		close(r.stop)
	}
	h.wg.Wait()
	return nil
}

func (h *Host) all() []*replica {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*replica, 0, len(h.replicas))
	for _, r := range h.replicas {
		out = append(out, r)
	}
	return out
}

func (h *Host) replica(g uint32) *replica {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.replicas[g]
}

// Bootstrap creates groups that have no replica here as one-member groups
// led by this host, whose Manager then adds the others. Only one host of
// a new cluster may bootstrap a group: two would make two groups of the
// same ID that never agree.
func (h *Host) Bootstrap(groups []uint32) error {
	for _, g := range groups {
		if h.replica(g) != nil {
			continue
		}
		if _, ok, err := get(h.db, hostReplicaKey(g)); err != nil {
			return err
		} else if ok {
			continue
		}
		b := h.db.NewBatch()
		hs, err := proto.Marshal(&pb.HardState{Term: new(uint64(1)), Vote: new(h.cfg.NodeID), Commit: new(uint64(1))})
		if err != nil {
			return err
		}
		cs, err := proto.Marshal(&pb.ConfState{Voters: []uint64{h.cfg.NodeID}})
		if err != nil {
			return err
		}
		b.Set(hostReplicaKey(g), nil, nil)
		b.Set(hardStateKey(g), hs, nil)
		b.Set(confKey(g), cs, nil)
		b.Set(appliedKey(g), u64pair(1, 1), nil)
		b.Set(truncatedKey(g), u64pair(1, 1), nil)
		err = b.Commit(pebble.Sync)
		b.Close()
		if err != nil {
			return fmt.Errorf("multiraft: bootstrap group %d: %w", g, err)
		}
		r, err := h.startReplica(g)
		if err != nil {
			return err
		}
		r.enqueue(func(in *inbox) {
			in.funcs = append(in.funcs, func() { r.rn.Campaign() })
		})
		h.log.Info("group bootstrapped", "group", g)
	}
	return nil
}

// Groups lists the groups with a replica here.
func (h *Host) Groups() []uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]uint32, 0, len(h.replicas))
	for g := range h.replicas {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// Propose appends cmd to group g's log through this host, which must be
// its leader, and returns the state machine's value once it is applied
// here. Errors: *NotLeaderError (nothing was appended), ErrAmbiguous (it
// may have been), ErrStopped.
func (h *Host) Propose(ctx context.Context, g uint32, cmd []byte) (any, error) {
	r := h.replica(g)
	if r == nil {
		return nil, &NotLeaderError{Group: g}
	}
	return r.propose(ctx, cmd)
}

// ReadBarrier returns nil once reading group g's state here is
// linearizable: this host led the group after the call began (a quorum
// confirmed it) and has applied everything committed before. Errors:
// *NotLeaderError, ctx's, ErrStopped.
func (h *Host) ReadBarrier(ctx context.Context, g uint32) error {
	r := h.replica(g)
	if r == nil {
		return &NotLeaderError{Group: g}
	}
	if !r.isLead.Load() {
		return r.notLeader()
	}
	return r.readBarrier(ctx)
}

// Leader returns the leader of group g as this host knows it (0: none
// known, or no replica here) and whether this host is it.
func (h *Host) Leader(g uint32) (leader uint64, self bool) {
	r := h.replica(g)
	if r == nil {
		return 0, false
	}
	return r.leader.Load(), r.isLead.Load()
}

// Applied returns the index group g has applied here.
func (h *Host) Applied(g uint32) uint64 {
	if r := h.replica(g); r != nil {
		return r.applied.Load()
	}
	return 0
}

// Deliver hands a message from the transport to group g's replica,
// creating an empty one when a leader addresses a group this host does
// not have yet (the leader then sends it a snapshot).
func (h *Host) Deliver(g uint32, m *pb.Message) {
	r := h.replica(g)
	if r == nil {
		switch m.GetType() {
		case pb.MsgApp, pb.MsgHeartbeat, pb.MsgSnap:
		default:
			return
		}
		var err error
		if r, err = h.createReplica(g); err != nil {
			h.log.Warn("cannot create replica", "group", g, "err", err)
			return
		}
	}
	r.enqueue(func(in *inbox) { in.msgs = append(in.msgs, m) })
}

// createReplica makes an empty replica of g that learns its state from
// the leader.
func (h *Host) createReplica(g uint32) (*replica, error) {
	if err := h.db.Set(hostReplicaKey(g), nil, pebble.Sync); err != nil {
		return nil, err
	}
	h.log.Info("replica created", "group", g)
	return h.startReplica(g)
}

// destroyed removes a replica that applied its own removal: its log and
// state go; its hard state stays, so that if the group adds this host
// back it never votes twice in a term.
func (h *Host) destroyed(r *replica) {
	h.mu.Lock()
	if h.replicas[r.g] == r {
		delete(h.replicas, r.g)
	}
	h.mu.Unlock()
	b := h.db.NewBatch()
	defer b.Close()
	start, end := replicaSpan(r.g)
	b.DeleteRange(start, end, nil)
	b.Delete(hostReplicaKey(r.g), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		h.log.Error("delete removed replica", "group", r.g, "err", err)
	}
	h.log.Info("replica removed from its group and deleted", "group", r.g)
	if h.cfg.OnLeadership != nil {
		h.cfg.OnLeadership(r.g, false)
	}
}

func (h *Host) leadershipChanged(g uint32, leader bool) {
	h.log.Info("leadership", "group", g, "leader", leader)
	if h.cfg.OnLeadership != nil {
		h.cfg.OnLeadership(g, leader)
	}
}

func (h *Host) confChanged(uint32) {}

// sendSnapshot streams the state of r's group as of snap to m's target
// and reports the outcome to raft.
func (h *Host) sendSnapshot(r *replica, m *pb.Message, snap *pebble.Snapshot) {
	defer snap.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	prefix := StatePrefix(r.g)
	kvs := func(yield func(k, v []byte) error) error {
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: groupKey(r.g, subEnd)})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			if err := yield(it.Key(), v); err != nil {
				return err
			}
		}
		return it.Error()
	}
	status := raft.SnapshotFinish
	if err := h.cfg.Transport.SendSnapshot(ctx, m.GetTo(), r.g, m, kvs); err != nil {
		r.log.Warn("snapshot not delivered", "to", fmt.Sprintf("%016x", m.GetTo()), "index", m.GetSnapshot().GetMetadata().GetIndex(), "err", err)
		status = raft.SnapshotFailure
	} else {
		r.log.Info("snapshot sent", "to", fmt.Sprintf("%016x", m.GetTo()), "index", m.GetSnapshot().GetMetadata().GetIndex())
	}
	to := m.GetTo()
	r.enqueue(func(in *inbox) {
		in.reports = append(in.reports, func(rn *raft.RawNode) { rn.ReportSnapshot(to, status) })
	})
}

// ReceiveSnapshot stores a snapshot's key/value pairs in a staged file
// and steps its message into group g's replica, which installs it if raft
// takes it. next returns the pairs in key order, then ok=false.
func (h *Host) ReceiveSnapshot(g uint32, m *pb.Message, next func() (k, v []byte, ok bool, err error)) error {
	if m.GetType() != pb.MsgSnap {
		return fmt.Errorf("multiraft: snapshot stream carries a %s message", m.GetType())
	}
	md := m.GetSnapshot().GetMetadata()
	h.mu.Lock()
	h.snapSeq++
	path := filepath.Join(h.cfg.TempDir, fmt.Sprintf("snap-%d-%d-%d.sst", g, md.GetIndex(), h.snapSeq))
	h.mu.Unlock()
	if err := h.writeSnapshotFile(path, g, md, next); err != nil {
		os.Remove(path)
		return err
	}
	r := h.replica(g)
	if r == nil {
		var err error
		if r, err = h.createReplica(g); err != nil {
			os.Remove(path)
			return err
		}
	}
	id := snapID{md.GetIndex(), md.GetTerm()}
	r.enqueue(func(in *inbox) {
		in.reports = append(in.reports, func(rn *raft.RawNode) {
			if old, ok := r.inSnaps[id]; ok {
				os.Remove(old)
			}
			r.inSnaps[id] = path
			if err := rn.Step(m); err != nil {
				r.log.Debug("step snapshot", "err", err)
			}
		})
	})
	return nil
}

// writeSnapshotFile writes the sstable that replaces group g's log and
// state: its applied index, ConfState and truncated index as the snapshot
// metadata says, then the state machine's keys as received.
func (h *Host) writeSnapshotFile(path string, g uint32, md *pb.SnapshotMetadata, next func() (k, v []byte, ok bool, err error)) error {
	f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("multiraft: stage snapshot: %w", err)
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{TableFormat: h.db.TableFormat()})
	fail := func(err error) error {
		w.Close()
		return err
	}
	cs, err := proto.Marshal(md.GetConfState())
	if err != nil {
		return fail(err)
	}
	// NB: sstables take keys in order: 'a' < 'c' < 't' < the state
	// machine's prefix.
	if err := w.Set(appliedKey(g), u64pair(md.GetIndex(), md.GetTerm())); err != nil {
		return fail(err)
	}
	if err := w.Set(confKey(g), cs); err != nil {
		return fail(err)
	}
	if err := w.Set(truncatedKey(g), u64pair(md.GetIndex(), md.GetTerm())); err != nil {
		return fail(err)
	}
	prefix := StatePrefix(g)
	end := groupKey(g, subEnd)
	var last []byte
	for {
		k, v, ok, err := next()
		if err != nil {
			return fail(fmt.Errorf("multiraft: receive snapshot of group %d: %w", g, err))
		}
		if !ok {
			break
		}
		if string(k) < string(prefix) || string(k) >= string(end) || (last != nil && string(k) <= string(last)) {
			return fail(fmt.Errorf("multiraft: snapshot of group %d has key %q out of order or outside its span", g, k))
		}
		if err := w.Set(k, v); err != nil {
			return fail(err)
		}
		last = append(last[:0], k...)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("multiraft: stage snapshot: %w", err)
	}
	return nil
}
