package multiraft

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A group bootstrapped on one host grows to the configured number of
// voters, commits proposals and serves linearizable reads.
func TestBootstrapGrowProposeRead(t *testing.T) {
	c := newTestCluster(t, 5, 3)
	for id := uint64(1); id <= 5; id++ {
		c.start(id)
	}
	if err := c.host(1).Bootstrap([]uint32{1, 2}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []uint32{1, 2} {
		c.waitVoters(g, 3)
		if got := c.propose(g, "set a 1"); got != "" {
			t.Fatalf("first set returned old value %q", got)
		}
		if got := c.propose(g, "set a 2"); got != "1" {
			t.Fatalf("second set returned old value %q, want 1", got)
		}
		if got := c.read(g, "a"); got != "2" {
			t.Fatalf("read %q, want 2", got)
		}
	}
	// Groups are independent.
	c.propose(1, "set b x")
	if got := c.read(2, "b"); got != "" {
		t.Fatalf("group 2 sees group 1's key: %q", got)
	}
	// Compare-and-set is decided by the log order.
	if got := c.propose(1, "cas a 2 3"); got != "ok" {
		t.Fatalf("cas = %v", got)
	}
	if got := c.propose(1, "cas a 2 4"); got != "conflict" {
		t.Fatalf("second cas = %v", got)
	}
	// A follower refuses reads and proposals, naming the leader.
	leader := c.leader(1)
	for id := uint64(1); id <= 5; id++ {
		h := c.host(id)
		if h == leader {
			continue
		}
		if lead, _ := h.Leader(1); lead == 0 {
			continue // not a member of the group
		}
		var nl *NotLeaderError
		err := h.ReadBarrier(context.Background(), 1)
		if !errors.As(err, &nl) || nl.Leader != leader.cfg.NodeID {
			t.Fatalf("follower %d read: %v, want NotLeaderError naming %d", id, err, leader.cfg.NodeID)
		}
		_, err = h.Propose(context.Background(), 1, []byte("set z 1"))
		if !errors.As(err, &nl) {
			t.Fatalf("follower %d proposal: %v, want NotLeaderError", id, err)
		}
	}
}

// When the leader dies the others elect a new one that has every
// committed entry, and after the grace the dead voter is replaced.
func TestFailoverAndReplace(t *testing.T) {
	c := newTestCluster(t, 4, 3)
	for id := uint64(1); id <= 4; id++ {
		c.start(id)
	}
	c.host(1).Bootstrap([]uint32{7})
	c.waitVoters(7, 3)
	for i := range 20 {
		c.propose(7, fmt.Sprintf("set k%d v%d", i, i))
	}
	old := c.leader(7)
	c.stop(old.cfg.NodeID)
	for i := range 20 {
		if got := c.read(7, fmt.Sprintf("k%d", i)); got != fmt.Sprintf("v%d", i) {
			t.Fatalf("after failover k%d = %q", i, got)
		}
	}
	c.propose(7, "set after failover")
	// The dead voter is replaced by the fourth host.
	c.eventually(20*time.Second, func() error {
		v := c.voters(7)
		for _, id := range v {
			if id == old.cfg.NodeID {
				return fmt.Errorf("dead voter %d still in %x", id, v)
			}
		}
		if len(v) != 3 {
			return fmt.Errorf("voters %x", v)
		}
		return nil
	})
	if got := c.read(7, "after"); got != "failover" {
		t.Fatalf("read %q", got)
	}
}

// A host far behind (the log was truncated meanwhile) catches up through
// a snapshot, and a host restarted from its disk keeps its state.
func TestSnapshotAndRestart(t *testing.T) {
	c := newTestCluster(t, 3, 3)
	c.logKeep = 5
	for id := uint64(1); id <= 3; id++ {
		c.start(id)
	}
	c.host(1).Bootstrap([]uint32{3})
	c.waitVoters(3, 3)
	lag := uint64(3)
	if h := c.leader(3); h.cfg.NodeID == 3 {
		lag = 2
	}
	c.stop(lag)
	for i := range 200 {
		c.propose(3, fmt.Sprintf("set k%d v%d", i, i))
	}
	// Let the leader truncate past what the stopped host has.
	leader := c.leader(3)
	c.eventually(10*time.Second, func() error {
		if first, _ := leader.replica(3).store.FirstIndex(); first < 150 {
			return fmt.Errorf("log starts at %d", first)
		}
		return nil
	})
	c.start(lag)
	target := leader.Applied(3)
	c.eventually(10*time.Second, func() error {
		h := c.host(lag)
		if h.Applied(3) < target {
			return fmt.Errorf("host %d applied %d of %d", lag, h.Applied(3), target)
		}
		return nil
	})
	// Its state is the leader's.
	h := c.host(lag)
	for i := range 200 {
		v, _, err := get(h.db, append(StatePrefix(3), fmt.Sprintf("k%d", i)...))
		if err != nil || string(v) != fmt.Sprintf("v%d", i) {
			t.Fatalf("caught-up host has k%d = %q, %v", i, v, err)
		}
	}
	// Restart every host from disk: the group comes back with its data.
	for id := uint64(1); id <= 3; id++ {
		c.stop(id)
	}
	for id := uint64(1); id <= 3; id++ {
		c.start(id)
	}
	if got := c.read(3, "k199"); got != "v199" {
		t.Fatalf("after restart k199 = %q", got)
	}
	c.propose(3, "set fresh yes")
	if got := c.read(3, "fresh"); got != "yes" {
		t.Fatalf("after restart fresh = %q", got)
	}
}

// A minority cannot commit or read: with two of three voters down, a
// proposal times out ambiguous and a read never succeeds.
func TestMinorityIsUnavailable(t *testing.T) {
	c := newTestCluster(t, 3, 3)
	c.mcfg.Grace = time.Hour
	for id := uint64(1); id <= 3; id++ {
		c.start(id)
	}
	c.host(1).Bootstrap([]uint32{1})
	c.waitVoters(1, 3)
	c.propose(1, "set a 1")
	leader := c.leader(1)
	for id := uint64(1); id <= 3; id++ {
		if id != leader.cfg.NodeID {
			c.stop(id)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := leader.Propose(ctx, 1, []byte("set a 2"))
	var nl *NotLeaderError
	if !errors.Is(err, ErrAmbiguous) && !errors.As(err, &nl) {
		t.Fatalf("minority proposal: %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if err := leader.ReadBarrier(ctx2, 1); err == nil {
		t.Fatal("a minority leader served a linearizable read")
	}
}
