package multiraft

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// NodeInfo is what the manager knows of a server that may hold replicas.
type NodeInfo struct {
	ID       uint64
	Alive    bool
	Since    time.Time // when Alive last changed, as seen here
	Draining bool      // being emptied: holds replicas only until replaced
}

// Membership lists every server that may hold replicas, dead ones too.
type Membership interface {
	Nodes() []NodeInfo
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Replicas is how many voters each group should have (capped by the
	// servers there are). 2f+1 voters keep a group available through f
	// failures.
	Replicas int
	// Grace is how long a voter must be dead before it is replaced: a
	// server back within it keeps its replicas (and catches up from the
	// log or a snapshot).
	Grace time.Duration
	// Stable is how long a server must have been alive to get a new
	// replica or leadership, so a flapping server gets neither.
	Stable time.Duration
	// Interval is how often every led group is looked at.
	Interval time.Duration
	// Order returns ids in group g's order of preference (rendezvous
	// hashing): new replicas go to the first servers, leadership to the
	// first voter.
	Order  func(g uint32, ids []uint64) []uint64
	Logger *slog.Logger
}

// Validate checks the config.
func (c ManagerConfig) Validate() error {
	if c.Replicas < 1 || c.Grace < 0 || c.Stable < 0 || c.Interval <= 0 || c.Order == nil {
		return fmt.Errorf("multiraft: manager config needs replicas >= 1, grace and stable >= 0, an interval and an order")
	}
	return nil
}

// Manager keeps the groups this host leads at the configured number of
// voters on live servers: it adds learners and promotes them once caught
// up, removes voters dead past the grace and servers being drained, and
// hands leadership to each group's preferred voter, so leaders spread
// over the servers. One configuration change at a time per group.
type Manager struct {
	h     *Host
	nodes Membership
	cfg   ManagerConfig
	log   *slog.Logger

	mu      sync.Mutex
	pending map[uint32]pendingChange
	missing map[uint64]time.Time // voters the membership does not know, since when
	ledAt   map[uint32]time.Time // when this host became leader of each group
}

type pendingChange struct {
	conf  string
	until time.Time
}

// NewManager returns a manager for h's groups.
func NewManager(h *Host, nodes Membership, cfg ManagerConfig) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = h.log
	}
	return &Manager{h: h, nodes: nodes, cfg: cfg, log: log,
		pending: map[uint32]pendingChange{}, missing: map[uint64]time.Time{}, ledAt: map[uint32]time.Time{}}, nil
}

// Run looks at every led group each interval until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			m.Pass(ctx)
		}
	}
}

// Pass looks at every group this host leads once.
func (m *Manager) Pass(ctx context.Context) {
	now := time.Now()
	nodes := m.nodes.Nodes()
	byID := make(map[uint64]NodeInfo, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	for _, g := range m.h.Groups() {
		if _, self := m.h.Leader(g); !self {
			m.mu.Lock()
			delete(m.ledAt, g)
			m.mu.Unlock()
			continue
		}
		v, err := m.h.view(ctx, g)
		if err != nil || !v.leader {
			continue
		}
		in := m.input(g, v, nodes, byID, now)
		a := plan(in)
		if a.kind == actNone {
			continue
		}
		m.log.Info("group membership", "group", g, "action", a.String(), "reason", a.reason, "conf", v.conf)
		if err := m.h.act(ctx, g, a); err != nil {
			m.log.Warn("group membership change", "group", g, "action", a.String(), "err", err)
			continue
		}
		if a.kind != actTransfer {
			m.mu.Lock()
			m.pending[g] = pendingChange{conf: v.conf, until: now.Add(10 * time.Second)}
			m.mu.Unlock()
		}
	}
}

func (m *Manager) input(g uint32, v groupView, nodes []NodeInfo, byID map[uint64]NodeInfo, now time.Time) planInput {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.ledAt[g]; !ok {
		m.ledAt[g] = now
	}
	p, ok := m.pending[g]
	pending := ok && p.conf == v.conf && now.Before(p.until)
	if !pending {
		delete(m.pending, g)
	}
	// A voter the membership has never heard of (this host restarted and
	// gossip has not mentioned it since) counts as dead from when it was
	// first missed.
	for _, id := range append(slices.Clone(v.voters), v.learners...) {
		if _, known := byID[id]; known {
			delete(m.missing, id)
		} else if _, seen := m.missing[id]; !seen {
			m.missing[id] = now
		}
	}
	info := make(map[uint64]NodeInfo, len(byID)+len(m.missing))
	for id, n := range byID {
		info[id] = n
	}
	for id, since := range m.missing {
		info[id] = NodeInfo{ID: id, Since: since}
	}
	ids := make([]uint64, 0, len(nodes))
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	return planInput{
		self: m.h.cfg.NodeID, voters: v.voters, learners: v.learners, progress: v.progress,
		commit: v.commit, pending: pending, nodes: info, order: m.cfg.Order(g, ids),
		replicas: m.cfg.Replicas, grace: m.cfg.Grace, stable: m.cfg.Stable,
		ledFor: now.Sub(m.ledAt[g]), now: now,
	}
}

// groupView is a leader's view of its group, for the manager.
type groupView struct {
	leader           bool
	voters, learners []uint64
	progress         map[uint64]tracker.Progress
	commit           uint64
	conf             string
}

// view returns group g's configuration and progress as its replica sees it.
func (h *Host) view(ctx context.Context, g uint32) (groupView, error) {
	r := h.replica(g)
	if r == nil {
		return groupView{}, &NotLeaderError{Group: g}
	}
	var v groupView
	err := r.do(ctx, func() {
		st := r.rn.Status()
		cs := r.store.confState()
		v = groupView{
			leader: st.RaftState == raft.StateLeader,
			voters: cs.GetVoters(), learners: cs.GetLearners(),
			progress: st.Progress, commit: st.GetCommit(), conf: confString(cs),
		}
	})
	return v, err
}

// act carries out a manager action on group g's replica.
func (h *Host) act(ctx context.Context, g uint32, a action) error {
	r := h.replica(g)
	if r == nil {
		return &NotLeaderError{Group: g}
	}
	var err error
	derr := r.do(ctx, func() {
		var typ pb.ConfChangeType
		switch a.kind {
		case actTransfer:
			r.rn.TransferLeader(a.node)
			return
		case actAddLearner:
			typ = pb.ConfChangeAddLearnerNode
		case actPromote:
			typ = pb.ConfChangeAddNode
		case actRemove:
			typ = pb.ConfChangeRemoveNode
		default:
			return
		}
		err = r.rn.ProposeConfChange(&pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(a.node)}}})
	})
	if derr != nil {
		return derr
	}
	return err
}

type actionKind int

const (
	actNone actionKind = iota
	actAddLearner
	actPromote
	actRemove
	actTransfer
)

// action is one step the manager takes on a group.
type action struct {
	kind   actionKind
	node   uint64
	reason string
}

func (a action) String() string {
	name := [...]string{"none", "add-learner", "promote", "remove", "transfer-leader"}[a.kind]
	if a.kind == actNone {
		return name
	}
	return fmt.Sprintf("%s %016x", name, a.node)
}

// planInput is everything plan looks at.
type planInput struct {
	self             uint64
	voters, learners []uint64
	progress         map[uint64]tracker.Progress
	commit           uint64
	pending          bool // a configuration change is still in flight
	nodes            map[uint64]NodeInfo
	order            []uint64 // every known server, in the group's preference order
	replicas         int
	grace, stable    time.Duration
	ledFor           time.Duration // how long self has led the group
	now              time.Time
}

// plan is the manager's pure core: the next step for one group.
func plan(in planInput) action {
	if in.pending {
		return action{}
	}
	alive := func(id uint64) bool { n, ok := in.nodes[id]; return ok && n.Alive }
	stable := func(id uint64) bool {
		n, ok := in.nodes[id]
		return ok && n.Alive && in.now.Sub(n.Since) >= in.stable
	}
	lost := func(id uint64) bool {
		n, ok := in.nodes[id]
		return ok && !n.Alive && in.now.Sub(n.Since) >= in.grace
	}
	draining := func(id uint64) bool { return in.nodes[id].Draining }
	caughtUp := func(id uint64) bool {
		if id == in.self {
			return true
		}
		pr, ok := in.progress[id]
		return ok && pr.Match >= in.commit
	}
	member := func(id uint64) bool { return slices.Contains(in.voters, id) || slices.Contains(in.learners, id) }

	// 1. A learner: promote it once it has caught up; drop it if it died.
	for _, l := range in.learners {
		if !alive(l) {
			return action{actRemove, l, "learner is down"}
		}
		if caughtUp(l) {
			return action{actPromote, l, "learner caught up"}
		}
		//lint:ignore SA4004 only the first learner is acted on; the others wait their turn
		return action{} // wait for it
	}
	// 2. Voters dead past the grace go first: that never lowers the share
	// of live voters.
	for _, v := range in.voters {
		if v != in.self && lost(v) {
			return action{actRemove, v, "voter down past the grace"}
		}
	}
	want := min(in.replicas, countCandidates(in, alive))
	var drainingVoter uint64
	for _, v := range in.voters {
		if draining(v) {
			drainingVoter = v
			break
		}
	}
	// 3. Too few voters, or one being drained: add a learner on the most
	// preferred stable live server not yet in the group.
	if len(in.voters) < want || (drainingVoter != 0 && len(in.voters) <= in.replicas) {
		for _, id := range in.order {
			if !member(id) && stable(id) && !draining(id) {
				return action{actAddLearner, id, "group below its replica count"}
			}
		}
	}
	// 4. Too many voters: drop a dead one, then a draining one, then the
	// least preferred.
	if len(in.voters) > in.replicas || (drainingVoter != 0 && len(in.voters) > want) {
		victim := pickVictim(in, alive, draining)
		if victim == in.self {
			if to := preferredLeader(in, alive, stable, caughtUp, draining, in.self); to != 0 {
				return action{actTransfer, to, "leader is to leave the group"}
			}
			return action{}
		}
		if victim != 0 {
			return action{actRemove, victim, "group above its replica count"}
		}
	}
	// 5. Leadership to the preferred voter, once things are calm.
	if to := preferredLeader(in, alive, stable, caughtUp, draining, 0); to != 0 && to != in.self && in.ledFor >= 10*time.Second {
		return action{actTransfer, to, "preferred leader"}
	}
	return action{}
}

// countCandidates is how many servers could hold a voter: live ones not
// being drained, plus the current voters that are down but within the
// grace (they still count as replicas).
func countCandidates(in planInput, alive func(uint64) bool) int {
	n := 0
	for _, id := range in.order {
		node := in.nodes[id]
		if (alive(id) && !node.Draining) || (slices.Contains(in.voters, id) && !alive(id)) {
			n++
		}
	}
	for _, v := range in.voters {
		if !slices.Contains(in.order, v) {
			n++
		}
	}
	return n
}

func pickVictim(in planInput, alive, draining func(uint64) bool) uint64 {
	for _, v := range in.voters {
		if !alive(v) {
			return v
		}
	}
	for _, v := range in.voters {
		if draining(v) {
			return v
		}
	}
	for i := len(in.order) - 1; i >= 0; i-- {
		if slices.Contains(in.voters, in.order[i]) {
			return in.order[i]
		}
	}
	return 0
}

// preferredLeader is the first voter in the group's order that is live,
// stable, caught up and not draining, other than skip.
func preferredLeader(in planInput, alive, stable, caughtUp, draining func(uint64) bool, skip uint64) uint64 {
	for _, id := range in.order {
		if id != skip && slices.Contains(in.voters, id) && stable(id) && caughtUp(id) && !draining(id) {
			return id
		}
	}
	return 0
}
