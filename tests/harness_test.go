package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// regenBin is the binary under test, built once by TestMain.
var regenBin string

// raceBuild makes TestMain build regenBin with -race (set under go test
// -race, see race_test.go).
var raceBuild bool

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "regen-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if regenBin, err = buildRegen(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// e2e skips an end-to-end test (one that starts regen processes) under
// -short, except TestSmoke: `go test -short ./...` is the quick loop, unit
// tests plus one smoke test of a whole cluster; `go test ./...` runs every
// test. Every helper that starts a process calls it, so a new end-to-end
// test is skipped under -short without remembering to.
func e2e(t testing.TB) {
	t.Helper()
	if testing.Short() && !strings.HasPrefix(t.Name(), "TestSmoke") {
		t.Skip("end-to-end: skipped under -short (go test ./... runs it)")
	}
}

// parallel lets an end-to-end test run beside the other parallel ones
// (at most go test's -parallel at once, GOMAXPROCS by default; -parallel 1
// runs them one by one). Only tests whose checks hang on no timing call
// it: no kills, failure detection, repair, drain or expiry, which a
// machine starved by a second cluster could slow past their waits.
// Every test has its own cluster: its own free ports and temp directory.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// longTests reports whether REGEN_LONG_TESTS asks for the long tests
// (minutes each, e.g. TestRepairLifecycle); skipped otherwise, and always
// under -short.
func longTests() bool {
	return !testing.Short() && os.Getenv("REGEN_LONG_TESTS") != ""
}

// devInfo mirrors what `regen dev` writes to dev.json.
type devInfo struct {
	Endpoint  string `json:"endpoint"`
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
	Secret    string `json:"cluster_secret"`
	Shards    []struct {
		ID     string `json:"id"`
		PID    int    `json:"pid"`
		Addr   string `json:"addr"`
		Gossip string `json:"gossip"`
		Data   string `json:"data"`
	} `json:"shards"`
	Gateways []struct {
		ID     string `json:"id"`
		Addr   string `json:"addr"`
		Gossip string `json:"gossip"`
	} `json:"gateways"`
}

// devCluster is a running `regen dev`.
type devCluster struct {
	t    testing.TB
	dir  string
	cmd  *exec.Cmd
	info devInfo

	env     []string      // added to the environment of regen dev and of restarted shard servers
	exited  chan struct{} // closed once cmd has exited and been waited for
	stopped bool          // stop signalled it
	mu      sync.Mutex
	out     strings.Builder // what regen dev printed
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startDev starts `regen dev` with its data in a temp dir and waits until
// it has written dev.json. The cluster is stopped when the test ends,
// whether it passed or not.
func startDev(t testing.TB, args ...string) *devCluster {
	t.Helper()
	return startDevEnv(t, nil, args...)
}

// startDevEnv is startDev with env (KEY=value) added to the environment
// of regen dev and so of its shard servers, for what only they read
// (REGEN_UPLOAD_MAX_AGE): unlike t.Setenv, it leaves the test free to run
// in parallel.
func startDevEnv(t testing.TB, env []string, args ...string) *devCluster {
	t.Helper()
	dir := t.TempDir()
	if os.Getenv("REGEN_E2E_KEEP") != "" {
		// Keep the cluster's data and logs for a post-mortem.
		var err error
		if dir, err = os.MkdirTemp("", "regen-e2e-"+strings.ReplaceAll(t.Name(), "/", "_")+"-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("regen dev data and logs kept in %s", dir)
	}
	return startDevInEnv(t, dir, env, args...)
}

func startDevIn(t testing.TB, dir string, args ...string) *devCluster {
	t.Helper()
	return startDevInEnv(t, dir, nil, args...)
}

func startDevInEnv(t testing.TB, dir string, env []string, args ...string) *devCluster {
	t.Helper()
	e2e(t)
	// The S3 port is picked free and handed to regen dev, so on a busy
	// machine another process may take it first; dev then exits at once
	// with "cannot listen for S3" and we try again on another port.
	for attempt := 1; ; attempt++ {
		d, err := tryStartDev(t, dir, env, args)
		if err == nil {
			return d
		}
		if attempt < 3 && strings.Contains(d.output(), "cannot listen for S3") {
			continue
		}
		t.Fatalf("regen dev did not come up: %v; output:\n%s", err, d.output())
	}
}

func tryStartDev(t testing.TB, dir string, env, args []string) (*devCluster, error) {
	os.Remove(filepath.Join(dir, "dev.json"))
	addr := freeAddr(t)
	all := append([]string{"dev", "--data", dir, "--addr", addr}, args...)
	cmd := exec.Command(regenBin, all...)
	cmd.Env = append(append(os.Environ(), env...), "REGEN_ACCESS_KEY=e2e-access", "REGEN_SECRET_KEY=e2e-secret-key")
	pr, pw, _ := os.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	d := &devCluster{t: t, dir: dir, cmd: cmd, env: env, exited: make(chan struct{})}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.mu.Lock()
			d.out.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
		}
	}()
	go func() { <-copied; cmd.Wait(); close(d.exited) }()
	t.Cleanup(d.stop)
	deadline := time.Now().Add(120 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "dev.json"))
		if err == nil && json.Unmarshal(b, &d.info) == nil && len(d.info.Shards) > 0 {
			return d, nil
		}
		select {
		case <-d.exited:
			return d, fmt.Errorf("regen dev exited: %v", cmd.ProcessState)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return d, fmt.Errorf("no dev.json after 2m")
		}
	}
}

// output is what regen dev printed so far.
func (d *devCluster) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

// stop ends the dev cluster and every child, even if the test failed.
func (d *devCluster) stop() {
	select {
	case <-d.exited:
		if d.stopped {
			break
		}
		// It stopped before the test ended: say how, for the post-mortem
		// of whatever failed next (a refused connection to a live server
		// was once all a flake left behind).
		d.t.Logf("regen dev had exited before the test ended (%v); its output:\n%s", d.cmd.ProcessState, lastLines(d.output(), 40))
	default:
		d.stopped = true
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(15 * time.Second):
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			d.cmd.Process.Kill()
			<-d.exited
		}
	}
	for _, s := range d.info.Shards {
		syscall.Kill(s.PID, syscall.SIGKILL)
	}
	if raceBuild {
		d.checkRaces()
	}
}

// checkRaces fails the test if the race detector reported a data race in
// regen dev (its gateway) or one of its shard servers. The processes are
// killed, not exited, so their exit status cannot tell.
func (d *devCluster) checkRaces() {
	logs := map[string]string{"regen dev": d.output()}
	for i, s := range d.info.Shards {
		if b, err := os.ReadFile(filepath.Join(s.Data, "shard.log")); err == nil {
			logs[fmt.Sprintf("shard %d (%s)", i, s.Data)] = string(b)
		}
	}
	for who, out := range logs {
		if i := strings.Index(out, "WARNING: DATA RACE"); i >= 0 {
			d.t.Errorf("data race in %s:\n%s", who, out[i:min(len(out), i+8000)])
		}
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// killShard SIGKILLs shard server i.
func (d *devCluster) killShard(i int) {
	d.t.Helper()
	if err := syscall.Kill(d.info.Shards[i].PID, syscall.SIGKILL); err != nil {
		d.t.Fatalf("kill shard %d: %v", i, err)
	}
}

func (d *devCluster) client(t testing.TB) *minio.Client {
	return s3Client(t, d.info.Endpoint, d.info.AccessKey, d.info.SecretKey)
}

func s3Client(t testing.TB, endpoint, access, secret string) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{
		Creds:  credentials.NewStaticV4(access, secret, ""),
		Secure: false,
		Region: "us-east-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

// deadShards asks the gateway (regen admin status --json) how many shard
// servers it considers dead.
func (d *devCluster) deadShards(t testing.TB) int {
	t.Helper()
	dead := 0
	for _, n := range d.adminStatus(t).Nodes {
		if n.Role == "shard" && n.State == "dead" {
			dead++
		}
	}
	return dead
}

// repairsDone returns the repairs done that `regen admin status` reports
// (0 when the gateway has no repair source).
func (d *devCluster) repairsDone(t testing.TB) int64 {
	t.Helper()
	if st := d.adminStatus(t); st.Repair != nil {
		return st.Repair.Done
	}
	return 0
}

// statusView is the part of `regen admin status --json` the tests read.
type statusView struct {
	Nodes []struct {
		Role  string `json:"r"`
		State string `json:"state"`
	} `json:"nodes"`
	Repair *struct {
		Done int64 `json:"done"`
	} `json:"repair"`
	Lifecycle struct {
		Passes, Errors int64
		Noncurrent     int64 `json:"noncurrent_expired"`
		Markers        int64 `json:"delete_markers_removed"`
	} `json:"lifecycle"`
	tombStatus
}

// adminStatus runs `regen admin status --json` against the cluster, as an
// operator would.
func (d *devCluster) adminStatus(t testing.TB) statusView {
	t.Helper()
	out, err := exec.Command(regenBin, "admin", "status", "--json", "--endpoint", d.info.Endpoint,
		"--access-key", d.info.AccessKey, "--secret-key", d.info.SecretKey).Output()
	if err != nil {
		t.Fatalf("regen admin status: %v", err)
	}
	var st statusView
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("regen admin status --json: %v\n%s", err, out)
	}
	return st
}

// shardArgs returns the command line shard server i was started with
// (Linux: from /proc), so it can be started again exactly as dev did.
func (d *devCluster) shardArgs(i int) []string {
	d.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d.info.Shards[i].PID))
	if err != nil {
		d.t.Fatalf("command line of shard %d: %v", i, err)
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(args) < 2 || args[1] != "shard" {
		d.t.Fatalf("shard %d runs %q, not a shard server", i, args)
	}
	return args[1:]
}

// restartShard starts shard server i again with args (from shardArgs):
// the same data directory, node ID and ports, as after a reboot. The
// restarted process is not regen dev's child; it is killed when the test
// ends.
func (d *devCluster) restartShard(i int, args []string) {
	d.t.Helper()
	s := &d.info.Shards[i]
	// The killed process must have let go of its ports.
	waitFor(d.t, 10*time.Second, fmt.Sprintf("shard %d's port %s to be free", i, s.Addr), func() bool {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			return false
		}
		ln.Close()
		return true
	})
	logf, err := os.OpenFile(filepath.Join(s.Data, "shard.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	cmd := exec.Command(regenBin, args...)
	cmd.Env = append(append(os.Environ(), d.env...), "REGEN_CLUSTER_SECRET="+d.info.Secret)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		d.t.Fatalf("restart shard %d: %v", i, err)
	}
	go func() { cmd.Wait(); logf.Close() }()
	s.PID = cmd.Process.Pid // d.stop kills it with the others
	d.t.Cleanup(func() { cmd.Process.Kill() })
}
