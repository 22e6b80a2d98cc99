package cluster

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Role is what a member does.
type Role string

// The roles.
const (
	RoleShard   Role = "shard"
	RoleGateway Role = "gateway"
)

// State is a member's liveness as this node sees it.
type State string

// The states.
const (
	StateAlive   State = "alive"
	StateSuspect State = "suspect"
	StateDead    State = "dead"
	StateLeft    State = "left"
)

// Meta is what a member advertises through gossip. memberlist caps node
// metadata at 512 bytes, so keep it compact.
type Meta struct {
	Role Role   `json:"r"`
	HTTP string `json:"h"`           // host:port of its HTTP API (S3 for gateways, shard API for shard servers)
	Zone string `json:"z,omitempty"` // failure domain; placement may spread over zones
	// Capacity is the disk size in bytes (0 if unknown).
	Capacity int64 `json:"c,omitempty"`
	// Replaces names a dead node this (new, empty) server replaces.
	Replaces string `json:"rp,omitempty"`
	// Draining marks a shard server an operator is taking out: it still
	// serves reads and helps repairs, but receives no new shards, and the
	// repair workers move the shards it holds to other servers. The server
	// persists the flag in its data dir and advertises it here, so every
	// node sees it and it survives restarts.
	Draining bool `json:"d,omitempty"`
	// Boot is when the process started (Unix ns). A restart changes it,
	// even one too quick for the others to see the node die, so peers
	// know it may have missed writes.
	Boot int64 `json:"b,omitempty"`
	// Machine identifies the machine (kernel) the node runs on: servers
	// with the same one share its CPU and disk, whatever their addresses
	// (containers of one host each have their own IP). Empty if unknown.
	Machine string `json:"m,omitempty"`
}

// Member is one node of the cluster.
type Member struct {
	ID     string    `json:"id"`
	Gossip string    `json:"gossip"` // host:port memberlist listens on
	State  State     `json:"state"`
	Since  time.Time `json:"since"` // when State last changed, as seen here
	Meta
}

// Alive reports whether the member counts as up (alive or only suspected).
func (m Member) Alive() bool { return m.State == StateAlive || m.State == StateSuspect }

// Config configures a cluster node.
type Config struct {
	// NodeID is the stable node ID; it is the memberlist node name.
	NodeID string
	// BindAddr and BindPort are where gossip listens (UDP and TCP).
	BindAddr string
	BindPort int
	// AdvertiseAddr and AdvertisePort override what is told to peers
	// (e.g. behind NAT); empty/0 means the bind address.
	AdvertiseAddr string
	AdvertisePort int
	// Join lists host:port of existing members to contact at start.
	Join []string
	// Secret is the cluster secret; gossip is encrypted and authenticated
	// with a key derived from it, so outsiders cannot join or listen.
	Secret string
	// Meta is advertised to peers.
	Meta Meta
	// Profile picks memberlist timing: "lan" (default) or "local" (fast
	// failure detection, for one machine and tests).
	Profile string
	Logger  *slog.Logger
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.NodeID == "":
		return errors.New("cluster: empty node ID")
	case c.BindPort < 0 || c.BindPort > 65535:
		return fmt.Errorf("cluster: bad gossip port %d", c.BindPort)
	case c.Secret == "":
		return errors.New("cluster: empty cluster secret")
	case c.Meta.Role != RoleShard && c.Meta.Role != RoleGateway:
		return fmt.Errorf("cluster: unknown role %q", c.Meta.Role)
	case c.Profile != "" && c.Profile != "lan" && c.Profile != "local":
		return fmt.Errorf("cluster: unknown profile %q (lan or local)", c.Profile)
	}
	return nil
}

// Node is this process's membership in the cluster.
type Node struct {
	ml     *memberlist.Memberlist
	log    *slog.Logger
	events chan Event

	mu struct {
		sync.Mutex
		meta    []byte            // our encoded Meta, served to memberlist
		members map[string]Member // every node ever seen, by ID
	}
}

// Event reports a membership change.
type Event struct {
	Member Member
}

// Start creates the memberlist and joins the given peers. A failed join is
// not fatal when Join is empty or when at least one peer answered; the node
// keeps retrying unreachable peers in the background until ctx ends.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{log: cfg.Logger, events: make(chan Event, 256)}
	n.mu.members = make(map[string]Member)
	meta, err := json.Marshal(cfg.Meta)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode meta: %w", err)
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("cluster: node meta is %d bytes, limit %d", len(meta), memberlist.MetaMaxSize)
	}
	n.mu.meta = meta

	mc := profileConfig(cfg.Profile)
	mc.Name = cfg.NodeID
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = cfg.BindPort
	mc.AdvertiseAddr = cfg.AdvertiseAddr
	mc.AdvertisePort = cfg.AdvertisePort
	if mc.AdvertisePort == 0 {
		mc.AdvertisePort = cfg.BindPort
	}
	mc.SecretKey = gossipKey(cfg.Secret)
	// A restarted server keeps its ID but may get a new address; let it
	// reclaim its name quickly instead of being refused as a conflict.
	mc.DeadNodeReclaimTime = time.Second
	mc.Delegate = delegate{n}
	mc.Events = eventDelegate{n}
	mc.Logger = log.New(&slogWriter{cfg.Logger}, "", 0)

	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("cluster: start gossip on %s: %w", net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.BindPort)), err)
	}
	n.ml = ml
	if len(cfg.Join) > 0 {
		if _, err := ml.Join(cfg.Join); err != nil {
			n.log.Warn("cluster join failed, retrying in background", "peers", cfg.Join, "err", err)
			go n.rejoin(ctx, cfg.Join)
		}
	}
	return n, nil
}

// localGossipInterval is how often the local profile sends the
// membership changes it has queued to a few random members. memberlist's
// local profile says 100 ms, but every tick wakes the process whether or
// not anything is queued, and ten wake-ups a second in each of a dev
// cluster's 13 processes were the largest single item of an idle
// cluster's CPU (issue 18). 500 ms: a change still reaches a dozen
// members within two or three rounds (about a second; three members are
// told each round), and failure detection (probes every second, then
// suspicion) does not wait for these ticks: suspicions and deaths also
// ride on the probes. (500 ms was tried once before and taken back when a
// million-object cluster stayed busy minutes after its start; that was
// the repair scan walking again because members had joined during its
// first walk, with 200 ms as well, and the scan now waits for the
// membership to settle before its first walk: repair/scanner.go.)
const localGossipInterval = 500 * time.Millisecond

// profileConfig returns memberlist's configuration for a timing profile
// ("local" or anything else, which is "lan").
func profileConfig(profile string) *memberlist.Config {
	if profile != "local" {
		return memberlist.DefaultLANConfig()
	}
	mc := memberlist.DefaultLocalConfig()
	// memberlist's local profile expects an ack within 200 ms; a dev
	// cluster of a dozen processes on two busy cores misses that and
	// flaps nodes dead and alive. 500 ms and one more suspicion round
	// still declare a killed server dead in about five seconds.
	mc.ProbeTimeout = 500 * time.Millisecond
	mc.SuspicionMult = 4
	// A dozen servers joining at once: the local profile sends each
	// announcement 2*log10(N+1) times (4 with 13 servers) to random
	// servers, too few for all to hear it, and some learned of
	// others only at a full state exchange. The LAN profile's
	// multiplier reaches them all, so the full exchange can stay
	// rare: every 10 s rather than the 2 s it took before, which
	// was a third of an idle dev server's CPU (TCP, msgpack,
	// compression and encryption of the whole member list).
	mc.RetransmitMult = 4
	mc.PushPullInterval = 10 * time.Second
	mc.GossipInterval = localGossipInterval
	// memberlist LZW-compresses every packet, pings and acks included,
	// and each compression allocates a 64 KiB table: in profiles of idle
	// dev shard servers compression was a tenth of the samples and the
	// collections of its garbage most of the GC's quarter, to save bytes
	// on loopback. Members
	// read compressed and plain packets alike, so this mixes with nodes
	// that compress.
	mc.EnableCompression = false
	return mc
}

// rejoin retries joining until one peer answers or ctx ends.
func (n *Node) rejoin(ctx context.Context, peers []string) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := n.ml.Join(peers); err == nil {
				n.log.Info("cluster joined", "peers", peers)
				return
			}
		}
	}
}

// ID is this node's ID.
func (n *Node) ID() string { return n.ml.LocalNode().Name }

// GossipAddr is the address this node gossips on.
func (n *Node) GossipAddr() string { return n.ml.LocalNode().Address() }

// Events delivers membership changes. It is buffered; when the consumer is
// slow, events are dropped (Members is always current).
func (n *Node) Events() <-chan Event { return n.events }

// Members returns every node seen so far, this one included, sorted by ID.
func (n *Node) Members() []Member {
	// Suspicion is only visible by asking memberlist; merge it in.
	suspect := map[string]bool{}
	for _, m := range n.ml.Members() {
		if m.State == memberlist.StateSuspect {
			suspect[m.Name] = true
		}
	}
	n.mu.Lock()
	out := make([]Member, 0, len(n.mu.members))
	for _, m := range n.mu.members {
		if suspect[m.ID] && m.State == StateAlive {
			m.State = StateSuspect
		}
		out = append(out, m)
	}
	n.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return cmpString(a.ID, b.ID) })
	return out
}

// Live returns the alive (or suspect) members with the given role.
func (n *Node) Live(role Role) []Member {
	var out []Member
	for _, m := range n.Members() {
		if m.Role == role && m.Alive() {
			out = append(out, m)
		}
	}
	return out
}

// Member returns the member with the given ID.
func (n *Node) Member(id string) (Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m, ok := n.mu.members[id]
	return m, ok
}

// UpdateMeta changes what this node advertises and gossips it.
func (n *Node) UpdateMeta(meta Meta) error {
	b, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("cluster: encode meta: %w", err)
	}
	n.mu.Lock()
	n.mu.meta = b
	n.mu.Unlock()
	return n.ml.UpdateNode(5 * time.Second)
}

// Leave tells peers this node is going away, then stops gossip.
func (n *Node) Leave(timeout time.Duration) error {
	err := n.ml.Leave(timeout)
	return errors.Join(err, n.ml.Shutdown())
}

// Shutdown stops gossip without telling peers (they will see it die).
func (n *Node) Shutdown() error { return n.ml.Shutdown() }

func (n *Node) record(node *memberlist.Node, state State) {
	var meta Meta
	if err := json.Unmarshal(node.Meta, &meta); err != nil {
		n.log.Warn("cluster: member with unreadable meta", "node", node.Name, "err", err)
		return
	}
	m := Member{ID: node.Name, Gossip: node.Address(), State: state, Meta: meta}
	n.mu.Lock()
	old, had := n.mu.members[m.ID]
	m.Since = time.Now()
	if had && old.State == state {
		m.Since = old.Since
	}
	n.mu.members[m.ID] = m
	n.mu.Unlock()
	if !had || old.State != state || old.Meta != meta {
		n.log.Info("cluster member", "node", m.ID, "role", m.Role, "http", m.HTTP, "state", state)
		select {
		case n.events <- Event{Member: m}:
		default:
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// delegate serves our metadata to memberlist. memberlist calls it from its
// own goroutines; it must not block.
type delegate struct{ n *Node }

func (d delegate) NodeMeta(limit int) []byte {
	d.n.mu.Lock()
	defer d.n.mu.Unlock()
	return slices.Clone(d.n.mu.meta)
}
func (d delegate) NotifyMsg([]byte)                           {}
func (d delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d delegate) LocalState(join bool) []byte                { return nil }
func (d delegate) MergeRemoteState(buf []byte, join bool)     {}

// eventDelegate records membership changes; called serially by memberlist.
type eventDelegate struct{ n *Node }

func (e eventDelegate) NotifyJoin(node *memberlist.Node)   { e.n.record(node, StateAlive) }
func (e eventDelegate) NotifyUpdate(node *memberlist.Node) { e.n.record(node, StateAlive) }
func (e eventDelegate) NotifyLeave(node *memberlist.Node) {
	state := StateDead
	if node.State == memberlist.StateLeft {
		state = StateLeft
	}
	e.n.record(node, state)
}

// slogWriter turns memberlist's log lines into debug records.
type slogWriter struct{ l *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	w.l.Debug("memberlist", "msg", string(trimNL(p)))
	return len(p), nil
}

func trimNL(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}

var _ io.Writer = (*slogWriter)(nil)

// gossipKey derives the gossip encryption key (AES-256) from the cluster
// secret with HKDF under its own label. Shard RPCs sign with a key
// derived under another label (internal/shardrpc), so knowing one key
// gives nothing of the other, and neither gives the secret.
func gossipKey(secret string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(secret), nil, "regen gossip v1", 32)
	if err != nil {
		panic("cluster: hkdf: " + err.Error()) // only for impossible lengths
	}
	return k
}
