package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/regen-s3/regen/gateway"
	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/sse"
	"github.com/regen-s3/regen/shardserver"
)

// DevInfo is what `regen dev` writes to DATA/dev.json for scripts.
type DevInfo struct {
	Endpoint  string       `json:"endpoint"`
	AccessKey string       `json:"access_key"`
	SecretKey string       `json:"secret_key"`
	Region    string       `json:"region"`
	Secret    string       `json:"cluster_secret"`
	Shards    []DevProcess `json:"shards"`
	Gateways  []DevProcess `json:"gateways"`
}

// DevProcess is one process of the dev cluster.
type DevProcess struct {
	ID     string `json:"id"`
	PID    int    `json:"pid"`
	Addr   string `json:"addr"`
	Gossip string `json:"gossip"`
	Data   string `json:"data,omitempty"`
}

// devFlags are the options of `regen dev`: a gateway's, the repair options
// and GC timings it passes on to its shard servers, and its own.
type devFlags struct {
	gateway gatewayFlags
	data    string
	shards  int
	repair  repairFlags
	shard   shardFlags // only the GC timings are used
	// shardProcs is each shard server's GOMAXPROCS (0: devShardProcs).
	shardProcs int
}

func (f *devFlags) register(o *optionSet) {
	f.gateway.register(o, true)
	o.String(&f.data, "data", "REGEN_DATA", "./data", "data directory of the whole dev cluster")
	o.Int(&f.shards, "shards", "REGEN_SHARDS", 12, "number of shard servers")
	o.Int(&f.shardProcs, "shard-procs", "REGEN_SHARD_PROCS", 0, "GOMAXPROCS of each shard server; 0 = this machine's cores shared among them, at least 1 (GOMAXPROCS, if set, wins)")
	f.repair.register(o, devRepairDefaults())
	f.shard.registerGC(o)
}

// Validate checks dev's options.
func (f *devFlags) Validate() error {
	if f.shards < 1 || f.shards > 64 {
		return badOption("shards", "want 1..64")
	}
	if f.data == "" {
		return badOption("data", "must not be empty")
	}
	if f.shardProcs < 0 || f.shardProcs > 1024 {
		return badOption("shard-procs", "want 0..1024")
	}
	if err := f.gateway.Validate(); err != nil {
		return err
	}
	if err := f.repair.Validate(); err != nil {
		return err
	}
	return f.shard.validateGC()
}

func runDev(ctx context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("dev", "Run a gateway and N shard servers on this machine, each shard server its own process,\n"+
		"with repair timings for one machine (the defaults below are dev's own).")
	var f devFlags
	f.register(o)
	if err := o.Parse(args, f.Validate); err != nil {
		return err
	}
	gf, rf, sf, data, shards := &f.gateway, &f.repair, &f.shard, f.data, f.shards
	if !o.Given("storage-class") {
		gf.classes = listFlag{"STANDARD=" + gf.code, "STANDARD_IA=clay-6-3"}
	}
	if gf.secret == "" {
		var b [16]byte
		rand.Read(b[:])
		gf.secret = hex.EncodeToString(b[:])
	}
	if err := checkClusterSecret(gf.secret); err != nil {
		return o.explain(err)
	}
	// What every shard server is given but its data directory and ports
	// (gf.gossip, the gateway's, is picked when the gateway starts).
	shardArgs := func(dir string) []string {
		args := []string{"--data", dir, "--join", gf.gossip, "--gossip-profile", gf.profile,
			"--log-format", gf.logFormat, "--log-level", gf.logLevel}
		args = append(args, rf.args()...)
		return append(args, "--gc-delay", sf.gcDelay.String(), "--rollback-after", sf.rollbackAfter.String(),
			"--tombstone-grace", sf.tombstoneGrace.String(), "--tombstone-settle", sf.tombstoneSettle.String())
	}
	if err := checkShardOptions(shardArgs(data), gf.secret); err != nil {
		return err
	}
	log, err := newLogger(gf.logFormat, gf.logLevel)
	if err != nil {
		return err
	}
	if err := privateDir(data); err != nil {
		return err
	}
	if !o.Given("sse-keys") {
		if gf.sseKeys, err = devKeyFile(data); err != nil {
			return err
		}
	}
	cfg, err := gf.config()
	if err != nil {
		return err
	}
	// Fail on a busy S3 port before starting anything.
	if ln, err := net.Listen("tcp", gf.addr); err != nil {
		return fmt.Errorf("cannot listen for S3 on %s: %w (is another regen running? choose another port with --addr)", gf.addr, err)
	} else {
		ln.Close()
	}
	pickGossip := !o.Given("gossip")
	gwLog, err := os.OpenFile(filepath.Join(data, "gateway.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer gwLog.Close()
	cfg.Logger = newFileLogger(gwLog, gf.logFormat, log)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := servePprof(ctx, gf.pprof, log); err != nil {
		return err
	}
	gw, err := startDevGateway(ctx, cfg, gf, pickGossip)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	info := DevInfo{
		Endpoint: gf.scheme() + "://" + gw.addr, AccessKey: gf.accessKey, SecretKey: gf.secretKey, Region: gf.region, Secret: gf.secret,
		Gateways: []DevProcess{{ID: cfg.NodeID, PID: os.Getpid(), Addr: gw.addr, Gossip: gf.gossip}},
	}
	env := devShardEnv(os.Environ(), gf.secret, f.shardProcs, o.Given("shard-procs"), runtime.NumCPU(), shards)
	sup := &devSupervisor{ctx: ctx, self: self, stdout: stdout, env: env}
	defer sup.stopAll()
	for i := range shards {
		dir := filepath.Join(data, fmt.Sprintf("shard-%02d", i+1))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		id, err := shardserver.LoadOrCreateNodeID(dir)
		if err != nil {
			return err
		}
		args := append([]string{"shard"}, shardArgs(dir)...)
		if gf.pprof != "" {
			a, err := offsetPort(gf.pprof, i+1)
			if err != nil {
				return err
			}
			args = append(args, "--pprof", a)
		}
		args = append(args, gf.shardTLS.args()...)
		if err := sup.start(DevProcess{ID: id, Data: dir}, args); err != nil {
			return fmt.Errorf("start shard server %d: %w", i+1, err)
		}
	}
	if err := waitShards(ctx, gw.node, shards, 90*time.Second); err != nil {
		return err
	}
	info.Shards = sup.started()
	b, _ := json.MarshalIndent(info, "", "  ")
	if err := os.WriteFile(filepath.Join(data, "dev.json"), append(b, '\n'), 0o600); err != nil {
		return err
	}
	printDev(stdout, info, data, cfg.DefaultCode, gf.classes)
	err = gw.wait()
	fmt.Fprintln(stdout, "regen dev: stopping")
	return err
}

// devShardProcs is the GOMAXPROCS of each of dev's shard servers: procs
// when set, else the machine's cores shared among the servers, at least
// one. With more Ps than its share of the cores, an idle server's
// timers (gossip, pebble, the repair loops) also wake threads that spin
// looking for work: on two cores, twelve idle servers with 2 Ps each
// took 0.42% of a core and 168 context switches a second each, with 1 P
// 0.36% and 148. Under load the servers still use every core together.
func devShardProcs(procs, cpus, shards int) int {
	if procs > 0 {
		return procs
	}
	return max(1, cpus/max(shards, 1))
}

// devShardEnv is the environment of dev's shard servers: dev's own
// (environ), the cluster secret, and GOMAXPROCS=devShardProcs unless
// environ sets GOMAXPROCS and --shard-procs was not given (given).
func devShardEnv(environ []string, secret string, procs int, given bool, cpus, shards int) []string {
	env := append(slices.Clone(environ), "REGEN_CLUSTER_SECRET="+secret)
	inherited := slices.ContainsFunc(environ, func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
	if !inherited || given {
		// NB: os/exec keeps the last value of a variable named twice.
		env = append(env, "GOMAXPROCS="+strconv.Itoa(devShardProcs(procs, cpus, shards)))
	}
	return env
}

// checkShardOptions parses args, what dev gives each of its shard servers
// but the ports it picks per server, as `regen shard` will, with dev's own
// environment, which the children inherit. A bad value of a variable only
// a shard server reads (REGEN_NET_LIMIT=fast, REGEN_UPLOAD_MAX_AGE=30)
// then stops dev at once with the shard server's own error, naming flag
// and variable, instead of every child exiting and dev restarting them and
// then waiting in vain for them to join.
func checkShardOptions(args []string, secret string) error {
	o := newOptionSet("shard", "")
	var f shardFlags
	f.register(o)
	args = append(args, "--secret", secret, "--listen", "127.0.0.1:0", "--gossip", "127.0.0.1:0")
	if err := o.Parse(args, f.Validate); err != nil {
		return fmt.Errorf("its shard servers would not start: %w", err)
	}
	return nil
}

// startDevGateway starts dev's in-process gateway. When the gossip port
// is dev's to pick, a port taken between picking and binding it (a busy
// machine) is retried on another one.
func startDevGateway(ctx context.Context, cfg gateway.Config, gf *gatewayFlags, pickGossip bool) (*runningGateway, error) {
	for attempt := 1; ; attempt++ {
		if pickGossip {
			port, err := freePort()
			if err != nil {
				return nil, err
			}
			gf.gossip = port
		}
		gw, err := startGateway(ctx, cfg, gf)
		if err == nil || !pickGossip || attempt == devStartAttempts || ctx.Err() != nil {
			return gw, err
		}
	}
}

func printDev(w io.Writer, info DevInfo, data, code string, classes listFlag) {
	fmt.Fprintf(w, "regen dev is running (data in %s, default code %s, storage classes %v)\n\n", absPath(data), code, []string(classes))
	fmt.Fprintf(w, "  S3 endpoint:  %s\n  access key:   %s\n  secret key:   %s\n  region:       %s\n\n", info.Endpoint, info.AccessKey, info.SecretKey, info.Region)
	// NB: the gateway runs inside regen dev: killing its pid stops the
	// whole cluster, so say so where operators pick pids to kill.
	fmt.Fprintf(w, "  gateway       pid %-7d %s  (this process; log: %s)\n", info.Gateways[0].PID, info.Gateways[0].Addr, filepath.Join(data, "gateway.log"))
	for _, s := range info.Shards {
		fmt.Fprintf(w, "  shard %s  pid %-7d %s\n", s.ID, s.PID, s.Addr)
	}
	fmt.Fprintf(w, "\n  try:  AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s aws --endpoint-url %s s3 ls\n", info.AccessKey, info.SecretKey, info.Endpoint)
	fmt.Fprintf(w, "        regen admin status --endpoint %s\n", info.Endpoint)
	fmt.Fprintf(w, "  details for scripts in %s; Ctrl-C stops everything\n", filepath.Join(data, "dev.json"))
}

// waitShards waits until the gateway sees want live shard servers.
func waitShards(ctx context.Context, node *cluster.Node, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		got := len(node.Live(cluster.RoleShard))
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d shard servers joined within %s; see their shard.log files", got, want, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePort returns a loopback host:port that was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	// memberlist also needs the UDP port; make sure it is free too.
	pc, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return freePort()
	}
	pc.Close()
	return "127.0.0.1:" + strconv.Itoa(port), nil
}

// devKeyFile returns DATA/sse-keys, made with one new key if missing.
func devKeyFile(data string) (string, error) {
	path := filepath.Join(data, "sse-keys")
	line, err := sse.NewKeyLine("dev-1")
	if err != nil {
		return "", err
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return path, nil
	}
	if err != nil {
		return "", err
	}
	_, err = fh.WriteString("# SSE-S3 cluster keys of this dev cluster: ID BASE64KEY, the last encrypts\n" + line)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return path, err
}
