package multiraft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// replica is this host's member of one raft group. One goroutine (run)
// owns the RawNode and everything it touches; other goroutines talk to it
// through the inbox and wait on channels.
type replica struct {
	h     *Host
	g     uint32
	store *logStore
	rn    *raft.RawNode
	log   *slog.Logger

	// Published by the goroutine for readers elsewhere.
	applied atomic.Uint64
	leader  atomic.Uint64
	term    atomic.Uint64
	isLead  atomic.Bool

	mu    sync.Mutex // guards the inbox
	inbox inbox
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}

	// Owned by the goroutine.
	seq       uint64                  // last proposal sequence number
	waiting   map[uint64]*proposal    // proposals by sequence number
	reads     readQueue               // linearizable reads
	outSnaps  map[uint64]*outSnapshot // snapshots raft asked for, by ID
	snapSeq   uint64
	inSnaps   map[snapID]string // received snapshot files, by index and term
	destroyed bool              // removed from the group: stop and delete
	lastTrunc time.Time
}

type inbox struct {
	ticks   int
	msgs    []*pb.Message
	props   []*proposal
	reads   []*readReq
	funcs   []func()
	reports []func(rn *raft.RawNode)
}

// proposal is a command waiting to be applied.
type proposal struct {
	data []byte
	done chan result
	at   time.Time
}

type result struct {
	val any
	err error
}

type readReq struct {
	done chan error
}

type snapID struct{ index, term uint64 }

type outSnapshot struct {
	snap *pebble.Snapshot
	at   time.Time
}

// Proposal entries carry the proposer's node ID and sequence number in
// front of the command, so the proposer learns the result when it applies
// the entry, whoever led when it committed.
const propHeader = 16

func encodeProposal(node, seq uint64, cmd []byte) []byte {
	out := make([]byte, propHeader, propHeader+len(cmd))
	binary.BigEndian.PutUint64(out, node)
	binary.BigEndian.PutUint64(out[8:], seq)
	return append(out, cmd...)
}

func decodeProposal(data []byte) (node, seq uint64, cmd []byte, ok bool) {
	if len(data) < propHeader {
		return 0, 0, nil, false
	}
	return binary.BigEndian.Uint64(data), binary.BigEndian.Uint64(data[8:]), data[propHeader:], true
}

func newReplica(h *Host, g uint32, store *logStore) (*replica, error) {
	r := &replica{
		h: h, g: g, store: store,
		log:      h.log.With("group", g),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		waiting:  map[uint64]*proposal{},
		outSnaps: map[uint64]*outSnapshot{},
		inSnaps:  map[snapID]string{},
	}
	applied, _, err := readApplied(h.db, g)
	if err != nil {
		return nil, err
	}
	r.applied.Store(applied)
	store.snapshot = r.makeSnapshot
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        h.cfg.NodeID,
		ElectionTick:              h.cfg.ElectionTicks,
		HeartbeatTick:             h.cfg.HeartbeatTicks,
		Storage:                   store,
		Applied:                   applied,
		MaxSizePerMsg:             1 << 20,
		MaxCommittedSizePerReady:  8 << 20,
		MaxUncommittedEntriesSize: 64 << 20,
		MaxInflightMsgs:           256,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{r.log},
	})
	if err != nil {
		return nil, fmt.Errorf("multiraft: group %d: %w", g, err)
	}
	r.rn = rn
	return r, nil
}

func readApplied(rd pebble.Reader, g uint32) (index, term uint64, err error) {
	v, ok, err := get(rd, appliedKey(g))
	if err != nil || !ok {
		return 0, 0, err
	}
	index, term, good := parseU64pair(v)
	if !good {
		return 0, 0, fmt.Errorf("%w: applied state of group %d", errCorrupt, g)
	}
	return index, term, nil
}

// notify wakes the goroutine.
func (r *replica) notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *replica) enqueue(f func(in *inbox)) {
	r.mu.Lock()
	f(&r.inbox)
	r.mu.Unlock()
	r.notify()
}

// do runs f on the replica goroutine and waits for it.
func (r *replica) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	r.enqueue(func(in *inbox) { in.funcs = append(in.funcs, func() { f(); close(done) }) })
	select {
	case <-done:
		return nil
	case <-r.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// propose appends cmd to the group's log and waits until it is applied
// here, returning what the state machine returned.
func (r *replica) propose(ctx context.Context, cmd []byte) (any, error) {
	p := &proposal{data: cmd, done: make(chan result, 1), at: time.Now()}
	r.enqueue(func(in *inbox) { in.props = append(in.props, p) })
	select {
	case res := <-p.done:
		return res.val, res.err
	case <-r.done:
		return nil, ErrStopped
	case <-ctx.Done():
		// NB: the entry may still commit and apply; the caller cannot
		// know. That is what ErrAmbiguous says.
		return nil, fmt.Errorf("%w: %w", ErrAmbiguous, ctx.Err())
	}
}

// readBarrier returns once this replica, still the leader, has applied
// everything committed before the call: reading its state then is
// linearizable.
func (r *replica) readBarrier(ctx context.Context) error {
	q := &readReq{done: make(chan error, 1)}
	r.enqueue(func(in *inbox) { in.reads = append(in.reads, q) })
	select {
	case err := <-q.done:
		return err
	case <-r.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *replica) notLeader() error {
	return &NotLeaderError{Group: r.g, Leader: r.leader.Load()}
}

// run is the replica goroutine.
func (r *replica) run() {
	defer close(r.done)
	defer r.shutdown()
	for {
		select {
		case <-r.wake:
		case <-r.stop:
			return
		}
		if err := r.cycle(); err != nil {
			// A storage failure leaves the replica unable to go on safely;
			// it stops and the others carry the group.
			r.log.Error("replica stopped", "err", err)
			return
		}
		if r.destroyed {
			r.h.destroyed(r)
			return
		}
	}
}

func (r *replica) shutdown() {
	for _, p := range r.waiting {
		p.done <- result{err: ErrStopped}
	}
	r.reads.failAll(ErrStopped)
	r.mu.Lock()
	in := r.inbox
	r.inbox = inbox{}
	r.mu.Unlock()
	for _, p := range in.props {
		p.done <- result{err: ErrStopped}
	}
	for _, q := range in.reads {
		q.done <- ErrStopped
	}
	for _, f := range in.funcs {
		f()
	}
	for _, s := range r.outSnaps {
		s.snap.Close()
	}
	for _, path := range r.inSnaps {
		os.Remove(path)
	}
}

func (r *replica) cycle() error {
	r.mu.Lock()
	in := r.inbox
	r.inbox = inbox{}
	r.mu.Unlock()

	for range in.ticks {
		r.rn.Tick()
	}
	for _, m := range in.msgs {
		if err := r.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
			r.log.Debug("step", "type", m.GetType(), "from", m.GetFrom(), "err", err)
		}
	}
	for _, f := range in.reports {
		f(r.rn)
	}
	for _, f := range in.funcs {
		f()
	}
	for _, p := range in.props {
		r.startProposal(p)
	}
	r.reads.add(in.reads)
	if err := r.drainReady(); err != nil {
		return err
	}
	r.issueRead()
	if err := r.drainReady(); err != nil {
		return err
	}
	// Received snapshots raft did not take are stale.
	for id, path := range r.inSnaps {
		os.Remove(path)
		delete(r.inSnaps, id)
	}
	if in.ticks > 0 {
		r.housekeeping()
	}
	return nil
}

func (r *replica) drainReady() error {
	for r.rn.HasReady() {
		rd := r.rn.Ready()
		if err := r.handleReady(rd); err != nil {
			return err
		}
		r.rn.Advance(rd)
	}
	return nil
}

func (r *replica) startProposal(p *proposal) {
	if !r.isLead.Load() {
		p.done <- result{err: r.notLeader()}
		return
	}
	r.seq++
	if err := r.rn.Propose(encodeProposal(r.h.cfg.NodeID, r.seq, p.data)); err != nil {
		p.done <- result{err: fmt.Errorf("%w: %w", r.notLeader(), err)}
		return
	}
	r.waiting[r.seq] = p
}

// handleReady persists, sends and applies one Ready, in the order raft
// requires: a snapshot and the log and hard state are durable before any
// message leaves, and committed entries are applied after.
func (r *replica) handleReady(rd raft.Ready) error {
	if rd.SoftState != nil {
		r.softStateChanged(rd.SoftState)
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := r.installSnapshot(rd.Snapshot); err != nil {
			return err
		}
	}
	if len(rd.Entries) > 0 || !raft.IsEmptyHardState(rd.HardState) {
		b := r.h.db.NewBatch()
		if err := r.store.append(b, rd.Entries, rd.HardState); err != nil {
			b.Close()
			return err
		}
		opt := pebble.NoSync
		if rd.MustSync {
			opt = pebble.Sync
		}
		if err := b.Commit(opt); err != nil {
			b.Close()
			return fmt.Errorf("multiraft: group %d: persist log: %w", r.g, err)
		}
		b.Close()
		r.store.appended(rd.Entries, rd.HardState)
	}
	if rd.HardState != nil && rd.HardState.GetTerm() != 0 {
		r.term.Store(rd.HardState.GetTerm())
	}
	for _, m := range rd.Messages {
		r.send(m)
	}
	if len(rd.CommittedEntries) > 0 {
		if err := r.apply(rd.CommittedEntries); err != nil {
			return err
		}
	}
	for _, rs := range rd.ReadStates {
		r.reads.indexed(rs.RequestCtx, rs.Index)
	}
	r.reads.release(r.applied.Load())
	return nil
}

func (r *replica) softStateChanged(ss *raft.SoftState) {
	r.leader.Store(ss.Lead)
	wasLead := r.isLead.Load()
	isLead := ss.RaftState == raft.StateLeader
	r.isLead.Store(isLead)
	if wasLead && !isLead {
		// Reads need a leader; proposals may still commit under the new
		// one, so they keep waiting (their callers' deadlines bound it).
		r.reads.failAll(r.notLeader())
	}
	if wasLead != isLead {
		r.h.leadershipChanged(r.g, isLead)
	}
}

func (r *replica) send(m *pb.Message) {
	if m.GetType() != pb.MsgSnap {
		r.h.cfg.Transport.Send(m.GetTo(), r.g, m)
		return
	}
	id := binary.BigEndian.Uint64(m.GetSnapshot().GetData())
	out, ok := r.outSnaps[id]
	if !ok {
		r.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
		return
	}
	delete(r.outSnaps, id)
	go r.h.sendSnapshot(r, m, out.snap)
}

// apply applies committed entries to the state machine in one batch and
// hands results to the proposers waiting here.
func (r *replica) apply(ents []*pb.Entry) error {
	b := r.h.db.NewIndexedBatch()
	defer b.Close()
	type delivery struct {
		p   *proposal
		res result
	}
	var out []delivery
	var index, term uint64
	var confChanged bool
	for _, e := range ents {
		index, term = e.GetIndex(), e.GetTerm()
		switch e.GetType() {
		case pb.EntryNormal:
			if len(e.GetData()) == 0 {
				continue // a new leader's empty entry
			}
			node, seq, cmd, ok := decodeProposal(e.GetData())
			if !ok {
				return fmt.Errorf("%w: group %d entry %d has no proposal header", errCorrupt, r.g, index)
			}
			val, err := r.h.cfg.StateMachine.Apply(b, r.g, StatePrefix(r.g), index, cmd)
			if err != nil {
				return fmt.Errorf("multiraft: group %d: apply entry %d: %w", r.g, index, err)
			}
			if node == r.h.cfg.NodeID {
				if p, ok := r.waiting[seq]; ok {
					delete(r.waiting, seq)
					out = append(out, delivery{p, result{val: val}})
				}
			}
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			cc, err := decodeConfChange(e)
			if err != nil {
				return fmt.Errorf("multiraft: group %d entry %d: %w", r.g, index, err)
			}
			cs := r.rn.ApplyConfChange(cc)
			v, err := proto.Marshal(cs)
			if err != nil {
				return err
			}
			if err := b.Set(confKey(r.g), v, nil); err != nil {
				return err
			}
			r.store.setConf(cs)
			confChanged = true
			if !isMember(cs, r.h.cfg.NodeID) && len(cs.GetVoters()) > 0 {
				r.destroyed = true
			}
		}
	}
	if err := b.Set(appliedKey(r.g), u64pair(index, term), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("multiraft: group %d: commit applied entries: %w", r.g, err)
	}
	r.applied.Store(index)
	for _, d := range out {
		d.p.done <- d.res
	}
	if confChanged {
		r.log.Info("configuration changed", "conf", confString(r.store.confState()))
		r.h.confChanged(r.g)
	}
	return nil
}

func decodeConfChange(e *pb.Entry) (pb.ConfChangeI, error) {
	if e.GetType() == pb.EntryConfChange {
		var cc pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			return nil, err
		}
		return &cc, nil
	}
	var cc pb.ConfChangeV2
	if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
		return nil, err
	}
	return &cc, nil
}

func isMember(cs *pb.ConfState, id uint64) bool {
	for _, l := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
		for _, v := range l {
			if v == id {
				return true
			}
		}
	}
	return false
}

func confString(cs *pb.ConfState) string {
	return fmt.Sprintf("voters=%x learners=%x", cs.GetVoters(), cs.GetLearners())
}

// makeSnapshot is raft.Storage.Snapshot: raft calls it on this goroutine
// when a follower needs entries already truncated. The snapshot is the
// current applied state, read through a pebble snapshot that the sender
// streams; Data carries the ID under which it waits in outSnaps.
func (r *replica) makeSnapshot() (*pb.Snapshot, error) {
	snap := r.h.db.NewSnapshot()
	index, term, err := readApplied(snap, r.g)
	if err != nil || index == 0 {
		snap.Close()
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	cs := &pb.ConfState{}
	v, ok, err := get(snap, confKey(r.g))
	if err != nil || !ok {
		snap.Close()
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	if err := proto.Unmarshal(v, cs); err != nil {
		snap.Close()
		return nil, fmt.Errorf("%w: conf state of group %d: %v", errCorrupt, r.g, err)
	}
	r.snapSeq++
	r.outSnaps[r.snapSeq] = &outSnapshot{snap: snap, at: time.Now()}
	return &pb.Snapshot{
		Data:     binary.BigEndian.AppendUint64(nil, r.snapSeq),
		Metadata: &pb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: cs},
	}, nil
}

// installSnapshot replaces the log and the state with a received
// snapshot, atomically (one ingestion that excises the old span).
func (r *replica) installSnapshot(s *pb.Snapshot) error {
	md := s.GetMetadata()
	id := snapID{md.GetIndex(), md.GetTerm()}
	path, ok := r.inSnaps[id]
	if !ok {
		return fmt.Errorf("multiraft: group %d: raft took snapshot %d/%d whose data is not here", r.g, id.index, id.term)
	}
	delete(r.inSnaps, id)
	defer os.Remove(path)
	start, end := replicaSpan(r.g)
	if _, err := r.h.db.IngestAndExcise(context.Background(), []string{path}, nil, nil, pebble.KeyRange{Start: start, End: end}); err != nil {
		return fmt.Errorf("multiraft: group %d: install snapshot %d: %w", r.g, id.index, err)
	}
	r.store.installed(id.index, id.term, md.GetConfState())
	r.applied.Store(id.index)
	r.log.Info("snapshot installed", "index", id.index, "term", id.term, "conf", confString(md.GetConfState()))
	r.h.confChanged(r.g)
	return nil
}

// housekeeping runs on ticks: truncates the log, drops stale snapshot
// state and proposals nobody will apply, retries stuck reads.
func (r *replica) housekeeping() {
	now := time.Now()
	for id, s := range r.outSnaps {
		if now.Sub(s.at) > time.Minute {
			s.snap.Close()
			delete(r.outSnaps, id)
		}
	}
	for seq, p := range r.waiting {
		if now.Sub(p.at) > 2*time.Minute {
			delete(r.waiting, seq)
			p.done <- result{err: ErrAmbiguous}
		}
	}
	r.reads.retry(now)
	if now.Sub(r.lastTrunc) > time.Second {
		r.lastTrunc = now
		r.maybeTruncate()
	}
}

// maybeTruncate drops applied log entries once the log is long: followers
// that fall further behind get a snapshot instead. The leader keeps the
// entries its live followers still need.
func (r *replica) maybeTruncate() {
	applied := r.applied.Load()
	first, _ := r.store.FirstIndex()
	keep := r.h.cfg.LogKeep
	if applied < first+2*keep {
		return
	}
	to := applied - keep
	if r.isLead.Load() {
		st := r.rn.Status()
		for id, pr := range st.Progress {
			if id != r.h.cfg.NodeID && pr.RecentActive && pr.Match+1 < to && applied-pr.Match < 4*keep {
				to = pr.Match // a live follower a little behind: let it catch up from the log
			}
		}
	}
	if to <= first {
		return
	}
	if err := r.store.truncate(to); err != nil {
		r.log.Warn("log truncation", "err", err)
	}
}

func (r *replica) issueRead() {
	if !r.reads.hasPending() {
		return
	}
	if !r.isLead.Load() {
		r.reads.failPending(r.notLeader())
		return
	}
	if ctx := r.reads.start(time.Now()); ctx != nil {
		r.rn.ReadIndex(ctx)
	}
}

// readQueue batches linearizable reads: every read that arrives while a
// ReadIndex round is out waits for the next one, so one heartbeat round
// serves them all.
type readQueue struct {
	pending  []*readReq
	inflight *readBatch
	answered []*readBatch // rounds answered, waiting for apply
	seq      uint64
}

type readBatch struct {
	id    uint64
	reqs  []*readReq
	index uint64
	sent  time.Time
}

func (q *readQueue) add(reqs []*readReq) { q.pending = append(q.pending, reqs...) }
func (q *readQueue) hasPending() bool    { return len(q.pending) > 0 && q.inflight == nil }

func (q *readQueue) start(now time.Time) []byte {
	if q.inflight != nil || len(q.pending) == 0 {
		return nil
	}
	q.seq++
	q.inflight = &readBatch{id: q.seq, reqs: q.pending, sent: now}
	q.pending = nil
	return binary.BigEndian.AppendUint64(nil, q.seq)
}

func (q *readQueue) indexed(ctx []byte, index uint64) {
	if q.inflight == nil || len(ctx) != 8 || binary.BigEndian.Uint64(ctx) != q.inflight.id {
		return
	}
	q.inflight.index = index
	q.answered = append(q.answered, q.inflight)
	q.inflight = nil
}

func (q *readQueue) release(applied uint64) {
	keep := q.answered[:0]
	for _, b := range q.answered {
		if b.index <= applied {
			for _, r := range b.reqs {
				r.done <- nil
			}
			continue
		}
		keep = append(keep, b)
	}
	q.answered = keep
}

// retry re-issues a round that got no answer (raft drops ReadIndex
// requests on leadership changes without saying so).
func (q *readQueue) retry(now time.Time) {
	if q.inflight != nil && now.Sub(q.inflight.sent) > 2*time.Second {
		q.pending = append(q.inflight.reqs, q.pending...)
		q.inflight = nil
	}
}

func (q *readQueue) failPending(err error) {
	for _, r := range q.pending {
		r.done <- err
	}
	q.pending = nil
}

func (q *readQueue) failAll(err error) {
	q.failPending(err)
	if q.inflight != nil {
		for _, r := range q.inflight.reqs {
			r.done <- err
		}
		q.inflight = nil
	}
	for _, b := range q.answered {
		for _, r := range b.reqs {
			r.done <- err
		}
	}
	q.answered = nil
}
