package cluster

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

func freePort(t *testing.T) int {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			pc.Close()
			return port
		}
	}
}

func start(t *testing.T, id string, role Role, secret string, join ...string) *Node {
	t.Helper()
	n, err := Start(context.Background(), Config{
		NodeID: id, BindAddr: "127.0.0.1", BindPort: freePort(t), Join: join, Secret: secret,
		Meta: Meta{Role: role, HTTP: "127.0.0.1:1"}, Profile: "local",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	return n
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestMembershipAndDeath(t *testing.T) {
	gw := start(t, "gw", RoleGateway, "s3cret")
	a := start(t, "a", RoleShard, "s3cret", gw.GossipAddr())
	b := start(t, "b", RoleShard, "s3cret", gw.GossipAddr())
	eventually(t, "gateway to see both shard servers", func() bool { return len(gw.Live(RoleShard)) == 2 })
	eventually(t, "shard a to see b", func() bool { m, ok := a.Member("b"); return ok && m.Alive() })

	// A node from another cluster (other secret) cannot join.
	if _, err := Start(context.Background(), Config{NodeID: "intruder", BindAddr: "127.0.0.1", BindPort: freePort(t),
		Join: []string{gw.GossipAddr()}, Secret: "other", Meta: Meta{Role: RoleShard}, Profile: "local"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, ok := gw.Member("intruder"); ok {
		t.Fatal("a node with the wrong cluster secret joined")
	}

	b.Shutdown() // no goodbye: peers must detect the failure
	eventually(t, "gateway to declare b dead", func() bool { m, ok := gw.Member("b"); return ok && m.State == StateDead })
	if live := gw.Live(RoleShard); len(live) != 1 || live[0].ID != "a" {
		t.Fatalf("live shard servers after b died: %v", live)
	}
	// Dead nodes are still reported.
	if len(gw.Members()) != 3 {
		t.Fatalf("members: %v", gw.Members())
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{NodeID: "x", Secret: "s", Meta: Meta{Role: RoleShard}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Config{
		{Secret: "s", Meta: Meta{Role: RoleShard}},
		{NodeID: "x", Meta: Meta{Role: RoleShard}},
		{NodeID: "x", Secret: "s", Meta: Meta{Role: "boss"}},
		{NodeID: "x", Secret: "s", Meta: Meta{Role: RoleShard}, Profile: "wan"},
	} {
		if bad.Validate() == nil {
			t.Errorf("config %+v should be invalid", bad)
		}
	}
}
