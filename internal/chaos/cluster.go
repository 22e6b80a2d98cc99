package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/sigv4"
)

// DevConfig says how to start the cluster under test: `regen dev` (one
// gateway and its shard-server children) plus a second gateway.
type DevConfig struct {
	Bin    string // the regen binary
	Dir    string // the cluster's data directory (created)
	Shards int
	// ChunkSize is both gateways' --chunk-size (small, so a few MiB make
	// several stripes).
	ChunkSize string
	// Skew is the second gateway's --clock-offset.
	Skew                 time.Duration
	AccessKey, SecretKey string
	// Env is the environment of every process (the caller removes the
	// REGEN_* variables that would change the cluster).
	Env []string
	// TombstoneGrace, when positive, is the shard servers'
	// --tombstone-grace: short, so that deletes are collected during the
	// run and the checker sees whether a collected key stays deleted.
	TombstoneGrace time.Duration
	// GCDelay, when positive, is the shard servers' --gc-delay: a
	// tombstone is collected only once the confirm job (GCDelay after the
	// delete) dropped what it replaced, so a short run needs it short too.
	GCDelay time.Duration
}

// proc is one process of the cluster the nemesis may kill.
type proc struct {
	name    string
	id      string // node ID (shard servers)
	addr    string
	args    []string // without the binary
	pid     int
	exited  chan struct{} // closed once waited for; nil for regen dev's own children
	logPath string
	down    bool // killed, not restarted
	paused  bool // SIGSTOPped
}

// DevCluster is a running cluster under test.
type DevCluster struct {
	cfg       DevConfig
	dev       *exec.Cmd
	devExited chan struct{}
	secret    string
	endpoints []string // host:port of gateway 1 (regen dev's) and 2
	hc        *http.Client

	mu     sync.Mutex
	shards []*proc
	gw2    *proc
}

// devInfo is what regen dev writes to DATA/dev.json.
type devInfo struct {
	Endpoint string `json:"endpoint"`
	Secret   string `json:"cluster_secret"`
	Shards   []struct {
		ID   string `json:"id"`
		PID  int    `json:"pid"`
		Addr string `json:"addr"`
		Data string `json:"data"`
	} `json:"shards"`
	Gateways []struct {
		Gossip string `json:"gossip"`
	} `json:"gateways"`
}

// StartDev starts regen dev in cfg.Dir and a second gateway that joins
// it, and waits until both serve. On error, whatever started is stopped.
func StartDev(ctx context.Context, cfg DevConfig) (c *DevCluster, err error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		c, err = startDev(ctx, cfg)
		if err == nil || attempt == 3 || ctx.Err() != nil {
			break
		}
		// A port picked free may be taken before dev binds it on a busy
		// machine; dev then exits at once.
		out, _ := os.ReadFile(filepath.Join(cfg.Dir, "dev.out"))
		if !strings.Contains(string(out), "cannot listen") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if err := c.startGateway2(ctx); err != nil {
		return c, err
	}
	return c, nil
}

func startDev(ctx context.Context, cfg DevConfig) (*DevCluster, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	os.Remove(filepath.Join(cfg.Dir, "dev.json"))
	out, err := os.OpenFile(filepath.Join(cfg.Dir, "dev.out"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	args := []string{"dev", "--data", cfg.Dir, "--addr", addr, "--shards", strconv.Itoa(cfg.Shards), "--chunk-size", cfg.ChunkSize}
	if cfg.TombstoneGrace > 0 {
		args = append(args, "--tombstone-grace", cfg.TombstoneGrace.String())
	}
	if cfg.GCDelay > 0 {
		args = append(args, "--gc-delay", cfg.GCDelay.String())
	}
	cmd := exec.Command(cfg.Bin, args...)
	cmd.Env = append(cfg.Env, "REGEN_ACCESS_KEY="+cfg.AccessKey, "REGEN_SECRET_KEY="+cfg.SecretKey)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start regen dev: %w", err)
	}
	c := &DevCluster{cfg: cfg, dev: cmd, devExited: make(chan struct{}), hc: &http.Client{Timeout: 30 * time.Second}}
	go func() { cmd.Wait(); out.Close(); close(c.devExited) }()
	deadline := time.Now().Add(2 * time.Minute)
	var info devInfo
	for {
		b, err := os.ReadFile(filepath.Join(cfg.Dir, "dev.json"))
		if err == nil && json.Unmarshal(b, &info) == nil && len(info.Shards) > 0 {
			break
		}
		select {
		case <-c.devExited:
			return nil, fmt.Errorf("regen dev exited (%v); see %s", cmd.ProcessState, filepath.Join(cfg.Dir, "dev.out"))
		case <-ctx.Done():
			c.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.Close()
			return nil, fmt.Errorf("regen dev wrote no dev.json within 2m; see %s", filepath.Join(cfg.Dir, "dev.out"))
		}
	}
	c.secret = info.Secret
	c.endpoints = []string{strings.TrimPrefix(info.Endpoint, "http://")}
	for i, s := range info.Shards {
		argv, err := cmdline(s.PID)
		if err != nil || len(argv) < 2 || argv[1] != "shard" {
			c.Close()
			return nil, fmt.Errorf("shard server %d (pid %d): cannot read its command line: %v %q", i, s.PID, err, argv)
		}
		c.shards = append(c.shards, &proc{name: fmt.Sprintf("shard %d", i), id: s.ID, addr: s.Addr, args: argv[1:], pid: s.PID,
			logPath: filepath.Join(s.Data, "shard.log")})
	}
	if len(info.Gateways) == 0 {
		c.Close()
		return nil, errors.New("dev.json names no gateway")
	}
	c.gw2 = &proc{name: "gateway 2", logPath: filepath.Join(cfg.Dir, "gateway2.log")}
	addr2, err1 := freePort()
	gossip2, err2 := freePort()
	if err := errors.Join(err1, err2); err != nil {
		c.Close()
		return nil, err
	}
	c.gw2.args = []string{"gateway", "--addr", addr2, "--gossip", gossip2, "--join", info.Gateways[0].Gossip,
		"--gossip-profile", "local", "--chunk-size", cfg.ChunkSize, "--clock-offset", cfg.Skew.String(),
		"--storage-class", "STANDARD=rs-6-3", "--storage-class", "STANDARD_IA=clay-6-3"}
	c.endpoints = append(c.endpoints, addr2)
	return c, nil
}

// startGateway2 starts the second gateway and waits until it is ready.
func (c *DevCluster) startGateway2(ctx context.Context) error {
	c.mu.Lock()
	err := c.start(ctx, c.gw2)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if c.ready(ctx, c.endpoints[1]) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway 2 not ready within 1m; see %s", c.gw2.logPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *DevCluster) ready(ctx context.Context, hostport string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostport+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Describe lists the cluster's processes, one a line, for the report: the
// nemesis names shard servers by their index.
func (c *DevCluster) Describe() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "gateway 1 (regen dev) %s  log %s\n", c.endpoints[0], filepath.Join(c.cfg.Dir, "gateway.log"))
	fmt.Fprintf(&b, "gateway 2 %s  clock offset %s  log %s\n", c.endpoints[1], c.cfg.Skew, c.gw2.logPath)
	for i, p := range c.shards {
		fmt.Fprintf(&b, "shard %-2d %s  %s  log %s\n", i, p.id, p.addr, p.logPath)
	}
	return b.String()
}

// Endpoints returns the gateways' host:port, regen dev's first.
func (c *DevCluster) Endpoints() []string { return c.endpoints }

// Shards is the number of shard servers.
func (c *DevCluster) Shards() int { return len(c.shards) }

// KillShard SIGKILLs shard server i and waits until it is gone.
func (c *DevCluster) KillShard(i int) error { return c.kill(c.shards[i]) }

// RestartShard starts shard server i again as regen dev had: same data
// directory, node ID and ports, as after a reboot.
func (c *DevCluster) RestartShard(ctx context.Context, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start(ctx, c.shards[i])
}

// PauseShard SIGSTOPs shard server i.
func (c *DevCluster) PauseShard(i int) error { return c.signal(c.shards[i], syscall.SIGSTOP) }

// ResumeShard SIGCONTs shard server i.
func (c *DevCluster) ResumeShard(i int) error { return c.signal(c.shards[i], syscall.SIGCONT) }

// KillGateway SIGKILLs the second gateway.
func (c *DevCluster) KillGateway() error { return c.kill(c.gw2) }

// RestartGateway starts the second gateway again, on the same ports.
func (c *DevCluster) RestartGateway(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start(ctx, c.gw2)
}

func (c *DevCluster) signal(p *proc, sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.down {
		return fmt.Errorf("%s is down", p.name)
	}
	if err := syscall.Kill(p.pid, sig); err != nil {
		return fmt.Errorf("%s %v (pid %d): %w", p.name, sig, p.pid, err)
	}
	p.paused = sig == syscall.SIGSTOP
	return nil
}

// kill SIGKILLs p and waits until it has exited.
func (c *DevCluster) kill(p *proc) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.down {
		return nil
	}
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, p.pid, err)
	}
	p.down, p.paused = true, false
	if p.exited != nil {
		<-p.exited
		return nil
	}
	// One of regen dev's children: dev reaps it.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(p.pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
	}
	return fmt.Errorf("%s (pid %d) still exists 10s after SIGKILL", p.name, p.pid)
}

// start runs p (again) with its arguments, once its ports are free.
// c.mu is held.
func (c *DevCluster) start(ctx context.Context, p *proc) error {
	if p.pid != 0 && !p.down {
		return nil
	}
	for _, a := range portArgs(p.args) {
		if err := waitFree(ctx, a); err != nil {
			return fmt.Errorf("restart %s: %w", p.name, err)
		}
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.cfg.Bin, p.args...)
	cmd.Env = append(c.cfg.Env, "REGEN_CLUSTER_SECRET="+c.secret,
		"REGEN_ACCESS_KEY="+c.cfg.AccessKey, "REGEN_SECRET_KEY="+c.cfg.SecretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	p.pid, p.exited, p.down, p.paused = cmd.Process.Pid, exited, false, false
	return nil
}

// portArgs returns the addresses a process listens on, from its flags.
func portArgs(args []string) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--listen", "--addr", "--gossip":
			out = append(out, args[i+1])
		}
	}
	return out
}

// waitFree waits until a killed process's port can be bound again.
func waitFree(ctx context.Context, addr string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			ln.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %s still busy: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops every process of the cluster: paused ones are resumed so
// they can exit, regen dev stops its children, and the processes the
// nemesis restarted are killed.
func (c *DevCluster) Close() {
	c.mu.Lock()
	procs := append([]*proc{c.gw2}, c.shards...)
	for _, p := range procs {
		if p != nil && p.paused && !p.down {
			syscall.Kill(p.pid, syscall.SIGCONT)
			p.paused = false
		}
	}
	c.mu.Unlock()
	c.dev.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.devExited:
	case <-time.After(20 * time.Second):
		// Its children die with it (Pdeathsig) or by the group kill.
		syscall.Kill(-c.dev.Process.Pid, syscall.SIGKILL)
		c.dev.Process.Kill()
		<-c.devExited
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range procs {
		if p == nil || p.exited == nil {
			continue
		}
		select {
		case <-p.exited:
		default:
			syscall.Kill(p.pid, syscall.SIGKILL)
			<-p.exited
		}
		p.down = true
	}
}

// Status fetches the admin status from regen dev's gateway.
func (c *DevCluster) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.admin(ctx, http.MethodGet, "status", nil, &st)
	return st, err
}

// SetBucketCode makes a bucket's new objects use code.
func (c *DevCluster) SetBucketCode(ctx context.Context, bucket, code string) error {
	return c.admin(ctx, http.MethodPost, "bucket-code", url.Values{"bucket": {bucket}, "code": {code}}, nil)
}

func (c *DevCluster) admin(ctx context.Context, method, path string, q url.Values, out any) error {
	u := "http://" + c.endpoints[0] + adminPrefix + path
	if len(q) > 0 {
		u += "?" + strings.ReplaceAll(q.Encode(), "+", "%20")
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	sigv4.Sign(req, c.cfg.AccessKey, c.cfg.SecretKey, "us-east-1", time.Now(), "UNSIGNED-PAYLOAD")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("admin %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("admin %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("admin %s: %w", path, err)
	}
	return nil
}

// Redundant reports whether the cluster is fully redundant as its status
// tells: every shard server up and answering, no degraded stripe, no
// repair queued or running. The string says what is still missing.
func Redundant(st Status, shards int) (bool, string) {
	up := 0
	for _, n := range st.Nodes {
		if n.Role == cluster.RoleShard && n.State == cluster.StateAlive && n.Error == "" {
			up++
		}
	}
	switch {
	case up < shards:
		return false, fmt.Sprintf("%d/%d shard servers up", up, shards)
	case st.Stripes == nil || st.Repair == nil:
		return false, "no repair status yet"
	case st.Stripes.Degraded > 0:
		return false, fmt.Sprintf("%d stripes degraded", st.Stripes.Degraded)
	case st.Repair.Queued > 0 || st.Repair.Running > 0:
		return false, fmt.Sprintf("repairs queued %d running %d", st.Repair.Queued, st.Repair.Running)
	}
	return true, "redundant"
}

// freePort returns a loopback host:port whose TCP and UDP ports were free
// a moment ago (gossip needs both).
func freePort() (string, error) {
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		pc, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		pc.Close()
		return "127.0.0.1:" + strconv.Itoa(port), nil
	}
	return "", errors.New("no free loopback port")
}
