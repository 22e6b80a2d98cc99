package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/netlimit"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/stripe"
	"github.com/regen-s3/regen/repair"
	"github.com/regen-s3/regen/shardserver"
)

const repairSecret = "repair-test-secret"

// repairNodes is a set of shard servers reachable over loopback.
type repairNodes struct {
	nodes  []repair.Node
	client *shardrpc.Client
}

// startServers starts n in-process shard servers, each on its own
// loopback listener: real HTTP between real servers. limits, if set,
// caps server i's traffic at limits[i] bytes/s (0: unlimited).
func startServers(t *testing.T, n int, limits map[int]int64) *repairNodes {
	t.Helper()
	e2e(t)
	rn := &repairNodes{client: shardrpc.New(repairSecret, shardrpc.NewRepairHTTPClient(nil))}
	for i := range n {
		dir := t.TempDir()
		id, err := shardserver.LoadOrCreateNodeID(dir)
		if err != nil {
			t.Fatal(err)
		}
		lim := netlimit.New(limits[i])
		cfg := shardserver.DefaultConfig()
		cfg.DataDir, cfg.Secret, cfg.NodeID = dir, repairSecret, id
		cfg.RepairHTTP = shardrpc.NewRepairHTTPClient(lim.Dialer((&net.Dialer{}).DialContext))
		srv, err := shardserver.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(lim.Listener(ln))
		t.Cleanup(func() { hs.Close(); srv.Close() })
		rn.nodes = append(rn.nodes, repair.Node{ID: id, Addr: ln.Addr().String()})
	}
	return rn
}

// writtenGroup is a stripe group written to the first n nodes.
type writtenGroup struct {
	task   repair.Task
	shards [][]byte // every shard file's data, read back after the write
}

func writeGroup(t *testing.T, rn *repairNodes, code string, chunk, size int64, placement []repair.Node) writtenGroup {
	t.Helper()
	c, err := codec.Parse(code)
	if err != nil {
		t.Fatal(err)
	}
	m := int64(c.ShardMultiple())
	chunk = (chunk + m - 1) / m * m
	fileID := fmt.Sprintf("g%x", rand.Uint64())
	targets := make([]stripe.Target, len(placement))
	for i, n := range placement {
		targets[i] = stripe.Target{Node: n.ID, Addr: n.Addr}
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	ctx := context.Background()
	res, err := stripe.Write(ctx, rn.client, stripe.WriteParams{
		Code: c, ChunkSize: chunk, FileID: fileID, Targets: targets, Quorum: c.TotalShards(), Size: size,
	}, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	g := writtenGroup{task: repair.Task{
		Code: code, FileID: fileID, ChunkSize: chunk, PartSize: size, ShardCRC: res.ShardCRC,
		Placement: slices.Clone(placement),
	}}
	for i, n := range placement {
		g.shards = append(g.shards, readShard(t, rn.client, n.Addr, fileID, i))
	}
	return g
}

func readShard(t *testing.T, c *shardrpc.Client, addr, fileID string, idx int) []byte {
	t.Helper()
	rc, err := c.GetShard(context.Background(), addr, fileID, idx, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRepairExecutorsByteExact rebuilds t = 1..n-k lost shards of RS,
// Clay and PM groups with every method and compares the rebuilt shard
// files byte for byte with the originals.
func TestRepairExecutorsByteExact(t *testing.T) {
	cases := []struct {
		code        string
		chunk, size int64
		sru         int
	}{
		{"rs-4-2", 24 << 10, 250_000, 8 << 10},
		{"clay-4-2", 32 << 10, 300_000, 64 << 10},
		{"pm-3-3", 24 << 10, 200_000, 64 << 10},
	}
	rn := startServers(t, 9, nil)
	exec := repair.NewExecutor(rn.client, nil)
	for _, tc := range cases {
		c, _ := codec.Parse(tc.code)
		n, k := c.TotalShards(), c.DataShards()
		g := writeGroup(t, rn, tc.code, tc.chunk, tc.size, rn.nodes[:n])
		for lostN := 1; lostN <= n-k; lostN++ {
			for _, m := range repair.Methods {
				t.Run(fmt.Sprintf("%s/t=%d/%s", tc.code, lostN, m), func(t *testing.T) {
					task := g.task
					task.Method, task.SRU = m, tc.sru
					// Lose shards spread over the stripe: data and parity.
					task.Lost = nil
					for j := range lostN {
						task.Lost = append(task.Lost, (j*(n/lostN)+1)%n)
					}
					slices.Sort(task.Lost)
					task.Dest = map[int]repair.Node{}
					for j, l := range task.Lost {
						task.Dest[l] = rn.nodes[n+j%(len(rn.nodes)-n)]
					}
					res, err := exec.Run(context.Background(), task)
					if err != nil {
						t.Fatal(err)
					}
					for _, l := range task.Lost {
						d := res.Rebuilt[l]
						if d.ID != task.Dest[l].ID {
							t.Fatalf("shard %d rebuilt on %q, want %q", l, d.ID, task.Dest[l].ID)
						}
						got := readShard(t, rn.client, d.Addr, task.FileID, l)
						if !bytes.Equal(got, g.shards[l]) {
							t.Fatalf("shard %d differs from the original", l)
						}
						// Leave the destination clean for the next method.
						if err := rn.client.DeleteShard(context.Background(), d.Addr, task.FileID, l); err != nil {
							t.Fatal(err)
						}
					}
					if res.BytesMoved <= 0 || res.MaxNodeIn <= 0 || res.MaxNodeIn > res.BytesMoved {
						t.Errorf("byte accounting: moved %d, max node in %d", res.BytesMoved, res.MaxNodeIn)
					}
				})
			}
		}
	}
}

// TestRepairBesideUnavailableShard rebuilds one lost shard while another is
// lost too and waits for a server (Task.Unavailable), as the planner asks
// when the cluster has fewer spare servers than lost shards. The waiting
// shard's server is gone (nothing listens at its address), so any method
// that asks it for data fails. Every method must rebuild the shard byte
// for byte; CORE must plan for both failures, since a single-failure
// Clay or PM plan needs every other shard.
func TestRepairBesideUnavailableShard(t *testing.T) {
	rn := startServers(t, 7, nil)
	exec := repair.NewExecutor(rn.client, nil)
	for _, code := range []string{"rs-4-2", "clay-4-2", "pm-3-3"} {
		c, _ := codec.Parse(code)
		n := c.TotalShards()
		g := writeGroup(t, rn, code, 32<<10, 300_000, rn.nodes[:n])
		for _, m := range repair.Methods {
			t.Run(fmt.Sprintf("%s/%s", code, m), func(t *testing.T) {
				task := g.task
				task.Placement = slices.Clone(task.Placement)
				task.Placement[3].Addr = freeAddr(t) // its server is dead
				task.Method, task.SRU = m, 16<<10
				task.Lost, task.Unavailable = []int{0}, []int{3}
				task.Dest = map[int]repair.Node{0: rn.nodes[n]}
				res, err := exec.Run(context.Background(), task)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := res.Rebuilt[3]; ok {
					t.Errorf("the unavailable shard 3 was rebuilt somewhere: %+v", res.Rebuilt)
				}
				got := readShard(t, rn.client, res.Rebuilt[0].Addr, task.FileID, 0)
				if !bytes.Equal(got, g.shards[0]) {
					t.Fatalf("shard 0 differs from the original")
				}
				if err := rn.client.DeleteShard(context.Background(), res.Rebuilt[0].Addr, task.FileID, 0); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestRepairSlowHop runs PUSH chains and CORE through a hop whose network
// is 50x slower than the others': the repair is slower, never wrong.
func TestRepairSlowHop(t *testing.T) {
	rn := startServers(t, 8, map[int]int64{1: 2 << 20})
	exec := repair.NewExecutor(rn.client, nil)
	for _, code := range []string{"rs-4-2", "clay-4-2"} {
		g := writeGroup(t, rn, code, 32<<10, 400_000, rn.nodes[:6])
		for _, m := range []repair.Method{repair.PushRep, repair.PushSur, repair.Core} {
			task := g.task
			task.Method, task.SRU = m, 16<<10
			task.Lost = []int{0, 3}
			task.Helpers = []int{2, 1, 4, 5} // the slow server mid-chain
			task.Dest = map[int]repair.Node{0: rn.nodes[6], 3: rn.nodes[7]}
			res, err := exec.Run(context.Background(), task)
			if err != nil {
				t.Fatalf("%s %s: %v", code, m, err)
			}
			for _, l := range task.Lost {
				if got := readShard(t, rn.client, res.Rebuilt[l].Addr, task.FileID, l); !bytes.Equal(got, g.shards[l]) {
					t.Fatalf("%s %s: shard %d differs", code, m, l)
				}
				rn.client.DeleteShard(context.Background(), res.Rebuilt[l].Addr, task.FileID, l)
			}
		}
	}
}

// TestRepairHelperKilled kills a helper's process in the middle of a
// repair: the executor must fail, blame that node, and leave no rebuilt
// shard visible on the destination.
func TestRepairHelperKilled(t *testing.T) {
	e2e(t)
	const n = 7 // rs-4-2 plus one destination
	type proc struct {
		cmd       *exec.Cmd
		node      repair.Node
		dir, addr string
	}
	procs := make([]*proc, n)
	start := func(i int) {
		p := procs[i]
		cmd := exec.Command(regenBin, "shard", "--data", p.dir, "--listen", p.addr, "--gossip", freeAddr(t),
			"--secret", repairSecret, "--net-limit", "4MB", "--gossip-profile", "local", "--log-level", "warn")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		p.cmd = cmd
	}
	for i := range n {
		procs[i] = &proc{dir: t.TempDir(), addr: freeAddr(t)}
		start(i)
		id, err := waitNodeID(procs[i].dir)
		if err != nil {
			t.Fatal(err)
		}
		procs[i].node = repair.Node{ID: id, Addr: procs[i].addr}
	}
	rn := &repairNodes{client: shardrpc.New(repairSecret, shardrpc.NewRepairHTTPClient(nil))}
	for _, p := range procs {
		rn.nodes = append(rn.nodes, p.node)
	}
	up := func() {
		waitFor(t, 20*time.Second, "shard servers", func() bool {
			for _, nd := range rn.nodes {
				if _, err := rn.client.Stats(context.Background(), nd.Addr); err != nil {
					return false
				}
			}
			return true
		})
	}
	up()
	// 8 MiB of data: 2 MiB per shard, so a helper needs 0.5 s at 4 MB/s
	// to send its shard. The victim is stopped (SIGSTOP: it sends nothing
	// more) as soon as it has written 128 KiB more to its sockets than
	// before the repair, then killed: it has sent part of its shard, never
	// all of it, however late this goroutine runs on a loaded machine
	// (with a fixed delay, a late kill let the victim send its whole
	// shard and the repair succeed).
	g := writeGroup(t, rn, "rs-4-2", 256<<10, 8<<20, rn.nodes[:6])
	for _, m := range []repair.Method{repair.PushRep, repair.Core, repair.PullRep} {
		victim := map[repair.Method]int{repair.PushRep: 2, repair.Core: 3, repair.PullRep: 4}[m]
		t.Run(string(m), func(t *testing.T) {
			task := g.task
			task.Method, task.SRU = m, 64<<10
			task.Lost = []int{0}
			task.Helpers = []int{1, 2, 3, 4, 5}
			task.Dest = map[int]repair.Node{0: rn.nodes[6]}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pid := procs[victim].cmd.Process.Pid
			base, err := writtenBytes(pid)
			if err != nil {
				t.Fatal(err)
			}
			killed := make(chan error, 1)
			go func() {
				for ctx.Err() == nil {
					if w, err := writtenBytes(pid); err != nil || w-base >= 128<<10 {
						syscall.Kill(pid, syscall.SIGSTOP)
						killed <- procs[victim].cmd.Process.Kill()
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
				killed <- ctx.Err()
			}()
			_, err = repair.NewExecutor(rn.client, nil).Run(ctx, task)
			if kerr := <-killed; kerr != nil {
				t.Fatalf("the victim was not killed during the repair: %v (repair: %v)", kerr, err)
			}
			var xe *repair.ExecError
			if !errors.As(err, &xe) {
				t.Fatalf("repair with a killed helper: err = %v, want an *ExecError", err)
			}
			if xe.Node != rn.nodes[victim].ID {
				t.Errorf("blamed node %q, want the killed helper %q (err: %v)", xe.Node, rn.nodes[victim].ID, err)
			}
			if _, err := rn.client.StatShard(context.Background(), rn.nodes[6].Addr, task.FileID, 0); !errors.Is(err, shardrpc.ErrNotFound) {
				t.Errorf("destination has a shard after a failed repair: %v", err)
			}
			procs[victim].cmd.Wait()
			start(victim) // same data, same address: whole again
			up()
		})
	}
}

// writtenBytes is how many bytes process pid has written with write
// system calls (sockets included), from /proc/PID/io.
func writtenBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no wchar in /proc/%d/io", pid)
}

func waitNodeID(dir string) (string, error) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(filepath.Join(dir, "node-id")); err == nil && len(bytes.TrimSpace(b)) == 16 {
			return string(bytes.TrimSpace(b)), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("no node-id in %s", dir)
}
