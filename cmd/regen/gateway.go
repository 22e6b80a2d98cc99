package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/gateway"
	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/sse"
)

// Default credentials of a fresh install; regen dev prints them. Anything
// reachable from outside should set REGEN_ACCESS_KEY / REGEN_SECRET_KEY.
const (
	defaultAccessKey = "regenadmin"
	defaultSecretKey = "regenadmin-secret"
)

// gatewayFlags are the options of `regen gateway` (and the gateway part of
// `regen dev`).
type gatewayFlags struct {
	addr, gossip, advertise string
	advertiseHTTP           string
	join                    listFlag
	secret                  string
	accessKey, secretKey    string
	credFile                string
	region                  string
	code                    string
	classes                 listFlag
	chunk, writeMemory      int64
	bodyMemory, readMemory  int64
	memoryLimit             int64
	logOptions
	tlsCert, tlsKey   string
	domain            string
	opTimeout         time.Duration
	lifecycleDay      time.Duration
	lifecycleInterval time.Duration
	lifecycleRate     int
	clockOffset       time.Duration
	allowDefaultCreds bool
	limits            limitFlags
	shardTLS          shardTLSFlags
	sseKeys           string
	sseCOverHTTP      bool
}

// gatewayLimitDefaults are the S3 listener's defaults (gateway.Limits).
func gatewayLimitDefaults() limitFlags {
	d := gateway.DefaultLimits()
	return limitFlags{readHeader: d.ReadHeaderTimeout, read: d.ReadTimeout, write: d.WriteTimeout, idle: d.IdleTimeout,
		maxConns: d.MaxConns, maxConnsPerIP: d.MaxConnsPerIP, maxHeader: int64(d.MaxHeaderBytes)}
}

// register declares the gateway options; dev changes the defaults of the
// ones it runs differently (gossip profile, storage classes).
func (f *gatewayFlags) register(o *optionSet, dev bool) {
	def := gateway.DefaultConfig()
	o.String(&f.addr, "addr", "REGEN_ADDR", def.Addr, "S3 listen address host:port")
	gossip := o.String(&f.gossip, "gossip", "REGEN_GOSSIP", "127.0.0.1:7946", "gossip listen address host:port")
	if dev {
		gossip.showDefault("a free loopback port")
	}
	o.String(&f.advertise, "advertise", "REGEN_ADVERTISE", "", "gossip address told to peers, if different")
	o.String(&f.advertiseHTTP, "advertise-http", "REGEN_ADVERTISE_HTTP", "", "S3 address told to peers and shown in status, if different")
	o.List(&f.join, "join", "REGEN_JOIN", nil, "gossip address of a cluster member, repeatable (the variable: comma-separated)")
	secret := o.String(&f.secret, "secret", "REGEN_CLUSTER_SECRET", "", "cluster secret shared by all nodes (required)")
	if dev {
		secret.usage = "cluster secret shared by all nodes"
		secret.showDefault("a random one")
	}
	o.String(&f.accessKey, "access-key", "REGEN_ACCESS_KEY", defaultAccessKey, "S3 access key")
	o.String(&f.secretKey, "secret-key", "REGEN_SECRET_KEY", defaultSecretKey, "S3 secret key")
	o.String(&f.credFile, "credentials-file", "REGEN_CREDENTIALS_FILE", "", "file of 'ACCESS_KEY SECRET_KEY' lines, added to --access-key")
	o.String(&f.region, "region", "REGEN_REGION", def.Region, "S3 region")
	o.String(&f.code, "code", "REGEN_CODE", def.DefaultCode, "default erasure code: rs-K-M, clay-K-M or pm-K-M")
	classes := o.List(&f.classes, "storage-class", "REGEN_STORAGE_CLASSES", nil, "CLASS=CODE: code for an S3 storage class, repeatable (the variable: comma-separated)")
	if dev {
		classes.showDefault("STANDARD=<--code>,STANDARD_IA=clay-6-3")
	}
	o.Size(&f.chunk, "chunk-size", "REGEN_CHUNK_SIZE", def.ChunkSize, "shard chunk per stripe, rounded up to 64-byte sub-chunks")
	o.Size(&f.writeMemory, "write-memory", "REGEN_WRITE_MEMORY", def.WriteMemory, "stripe buffers of all uploads at once; past it uploads wait (at least one stripe always fits)")
	o.Size(&f.readMemory, "read-memory", "REGEN_READ_MEMORY", def.ReadMemory, "shard buffers of all GETs at once; past it reads wait for their stripes to reach clients (a larger stripe is read alone)")
	o.Size(&f.bodyMemory, "body-memory", "REGEN_BODY_MEMORY", def.BodyMemory, "request bodies held whole by all requests at once (XML and policy documents, inline objects); past it they wait, then get 503 SlowDown")
	o.Size(&f.memoryLimit, "memory-limit", "REGEN_MEMORY_LIMIT", 192<<20, "soft limit of the gateway process's Go memory (runtime/debug.SetMemoryLimit): garbage is collected before the heap passes it; 0 = none; GOMEMLIMIT, if set, wins")
	profile := "lan"
	if dev {
		profile = "local" // one machine: detect failures in seconds
	}
	f.logOptions.register(o, profile)
	o.String(&f.tlsCert, "tls-cert", "REGEN_TLS_CERT", "", "PEM certificate (chain) to serve S3 over HTTPS; needs --tls-key")
	o.String(&f.tlsKey, "tls-key", "REGEN_TLS_KEY", "", "PEM private key of --tls-cert")
	o.String(&f.domain, "domain", "REGEN_DOMAIN", "", "domain for virtual-hosted-style requests (BUCKET.DOMAIN); empty: path style only")
	o.Duration(&f.opTimeout, "op-timeout", "REGEN_OP_TIMEOUT", def.OpTimeout, "time limit of one request's metadata work, per key in DeleteObjects")
	o.Duration(&f.lifecycleDay, "lifecycle-day", "REGEN_LIFECYCLE_DAY", def.LifecycleDay, "length of a lifecycle rule's day (24h as in S3; shorter only to try rules out)")
	o.Duration(&f.lifecycleInterval, "lifecycle-interval", "REGEN_LIFECYCLE_INTERVAL", def.LifecycleInterval, "how often buckets' lifecycle rules are applied")
	o.Int(&f.lifecycleRate, "lifecycle-rate", "REGEN_LIFECYCLE_RATE", def.LifecycleRate, "lifecycle deletes and upload aborts per second, at most")
	o.Duration(&f.clockOffset, "clock-offset", "REGEN_CLOCK_OFFSET", 0, "testing only: shift this gateway's clock (e.g. -10m) to check that clock skew cannot reorder acknowledged writes")
	allow := o.Bool(&f.allowDefaultCreds, "allow-default-credentials", "REGEN_ALLOW_DEFAULT_CREDENTIALS", dev, "start even with the built-in default access key ("+defaultAccessKey+"): only for a throwaway cluster no one else can reach")
	if dev {
		allow.usage = "keep the built-in default access key when none is given (a dev cluster is a throwaway one; it prints them)"
	}
	keys := o.String(&f.sseKeys, "sse-keys", "REGEN_SSE_KEYS", "", "file of SSE-S3 cluster keys, one 'ID BASE64KEY' line each (32 random bytes): the last encrypts, all decrypt; to rotate, add a line and restart the gateways. Empty: SSE-S3 is refused")
	if dev {
		keys.showDefault("DATA/sse-keys, made if missing")
	}
	overHTTP := o.Bool(&f.sseCOverHTTP, "sse-c-over-http", "REGEN_SSE_C_OVER_HTTP", dev, "accept SSE-C keys over plain HTTP, which S3 refuses (the key crosses the network in clear): for a gateway on loopback or behind a TLS-terminating proxy")
	if dev {
		overHTTP.usage = "accept SSE-C keys over plain HTTP (dev serves HTTP on loopback)"
	}
	f.limits.register(o, gatewayLimitDefaults())
	f.shardTLS.register(o)
}

// Validate checks the gateway options (the cluster secret is checked by
// the commands that need it given).
func (f *gatewayFlags) Validate() error {
	if err := f.logOptions.Validate(); err != nil {
		return err
	}
	for _, c := range []struct{ name, v string }{{"addr", f.addr}, {"gossip", f.gossip}} {
		if err := checkHostPort(c.name, c.v); err != nil {
			return err
		}
	}
	if f.advertise != "" {
		if err := checkHostPort("advertise", f.advertise); err != nil {
			return err
		}
	}
	if _, err := codec.Parse(f.code); err != nil {
		return badOption("code", "%v", err)
	}
	for _, kv := range f.classes {
		class, code, ok := strings.Cut(kv, "=")
		if !ok || class == "" || code == "" {
			return badOption("storage-class", "%q: want CLASS=CODE, e.g. STANDARD_IA=clay-6-3", kv)
		}
		if _, err := codec.Parse(code); err != nil {
			return badOption("storage-class", "%s: %v", class, err)
		}
	}
	if f.chunk < 4<<10 || f.chunk > 64<<20 {
		return badOption("chunk-size", "want 4KiB..64MiB")
	}
	if f.writeMemory <= 0 {
		return badOption("write-memory", "must be positive")
	}
	if f.readMemory <= 0 {
		return badOption("read-memory", "must be positive")
	}
	if f.bodyMemory < gateway.MinBodyMemory {
		return badOption("body-memory", "want at least %d bytes (two of the largest XML body)", gateway.MinBodyMemory)
	}
	if f.memoryLimit < 0 {
		return badOption("memory-limit", "must not be negative")
	}
	if f.opTimeout <= 0 {
		return badOption("op-timeout", "must be positive")
	}
	if f.lifecycleDay <= 0 {
		return badOption("lifecycle-day", "must be positive")
	}
	if f.lifecycleInterval <= 0 {
		return badOption("lifecycle-interval", "must be positive")
	}
	if f.lifecycleRate <= 0 {
		return badOption("lifecycle-rate", "must be positive")
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return badOption("tls-cert", "--tls-cert and --tls-key go together")
	}
	if f.accessKey == "" {
		return badOption("access-key", "must not be empty")
	}
	if f.secretKey == "" {
		return badOption("secret-key", "must not be empty")
	}
	if err := f.limits.Validate(); err != nil {
		return err
	}
	return f.shardTLS.Validate()
}

// scheme is the S3 endpoint's URL scheme.
func (f *gatewayFlags) scheme() string {
	if f.tlsCert != "" {
		return "https"
	}
	return "http"
}

// tlsListener wraps ln in TLS when a certificate is configured.
func (f *gatewayFlags) tlsListener(ln net.Listener) (net.Listener, error) {
	if f.tlsCert == "" && f.tlsKey == "" {
		return ln, nil
	}
	if f.tlsCert == "" || f.tlsKey == "" {
		return nil, usageErrorf("--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}

// config turns the flags into a gateway config.
func (f *gatewayFlags) config() (gateway.Config, error) {
	cfg := gateway.DefaultConfig()
	cfg.Addr = f.addr
	cfg.Region = f.region
	cfg.Domain = f.domain
	cfg.DefaultCode = f.code
	cfg.Credentials = map[string]string{f.accessKey: f.secretKey}
	cfg.ClusterSecret = f.secret
	if f.credFile != "" {
		if err := readCredentials(f.credFile, cfg.Credentials); err != nil {
			return cfg, err
		}
	}
	for _, kv := range f.classes {
		class, code, _ := strings.Cut(kv, "=") // checked by Validate
		cfg.StorageClasses[strings.ToUpper(class)] = code
	}
	cfg.ChunkSize, cfg.WriteMemory, cfg.ReadMemory, cfg.BodyMemory = f.chunk, f.writeMemory, f.readMemory, f.bodyMemory
	cfg.OpTimeout = f.opTimeout
	cfg.LifecycleDay, cfg.LifecycleInterval, cfg.LifecycleRate = f.lifecycleDay, f.lifecycleInterval, f.lifecycleRate
	cfg.ClockOffset = f.clockOffset
	cfg.SSECOverHTTP = f.sseCOverHTTP
	if f.sseKeys != "" {
		b, err := os.ReadFile(f.sseKeys)
		if err != nil {
			return cfg, fmt.Errorf("SSE key file: %w", err)
		}
		if cfg.SSEKeys, err = sse.ParseKeyring(b); err != nil {
			return cfg, usageError{fmt.Errorf("SSE key file %s: %w", f.sseKeys, err)}
		}
	}
	if err := checkCredentials(cfg.Credentials, f.allowDefaultCreds, "credentials-file"); err != nil {
		return cfg, usageError{err}
	}
	cfg.Limits = gateway.Limits{
		ReadHeaderTimeout: f.limits.readHeader, ReadTimeout: f.limits.read, WriteTimeout: f.limits.write, IdleTimeout: f.limits.idle,
		MaxConns: f.limits.maxConns, MaxConnsPerIP: f.limits.maxConnsPerIP, MaxHeaderBytes: int(f.limits.maxHeader),
	}
	var b [6]byte
	rand.Read(b[:])
	cfg.NodeID = "gw-" + hex.EncodeToString(b[:])
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}

func readCredentials(path string, into map[string]string) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("credentials file: %w", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return fmt.Errorf("credentials file %s line %d: want 'ACCESS_KEY SECRET_KEY'", path, n)
		}
		into[f[0]] = f[1]
	}
	return sc.Err()
}

func runGateway(ctx context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("gateway", "Run an S3 gateway: it joins the cluster by gossip and stores objects on its shard servers.")
	var f gatewayFlags
	f.register(o, false)
	err := o.Parse(args, func() error {
		if err := checkClusterSecret(f.secret); err != nil {
			return err
		}
		if err := checkCredentials(map[string]string{f.accessKey: f.secretKey}, f.allowDefaultCreds, ""); err != nil {
			return err
		}
		return f.Validate()
	})
	if err != nil {
		return err
	}
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	cfg.Logger = log
	if err := servePprof(ctx, f.pprof, log); err != nil {
		return err
	}
	g, err := startGateway(ctx, cfg, &f)
	if err != nil {
		return err
	}
	log.Info("gateway serving S3", "addr", g.addr, "gossip", f.gossip, "node", cfg.NodeID)
	return g.wait()
}

// runningGateway is a gateway with its listener and cluster membership.
type runningGateway struct {
	addr string
	node *cluster.Node
	errc chan error
}

func (r *runningGateway) wait() error {
	err := <-r.errc
	r.node.Leave(2e9)
	return err
}

// startGateway listens, joins the cluster and serves until ctx ends.
// setMemoryLimit applies --memory-limit (bytes, 0: none) to this process
// unless GOMEMLIMIT is set. Without a limit the heap grows to twice what
// is live before a collection (GOGC=100): a gateway's write budget bounds
// its live stripe buffers, yet one with 100 MiB live reached 207 MiB RSS
// under four concurrent 1 GiB PUTs.
func setMemoryLimit(limit int64) {
	if limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit)
	}
}

func startGateway(ctx context.Context, cfg gateway.Config, f *gatewayFlags) (*runningGateway, error) {
	setMemoryLimit(f.memoryLimit)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for S3 on %s: %w (is another regen running? choose another with --addr)", cfg.Addr, err)
	}
	tln, err := f.tlsListener(ln)
	if err != nil {
		ln.Close()
		return nil, err
	}
	ln = tln
	host, port, err := splitHostPort("gossip", f.gossip)
	if err != nil {
		ln.Close()
		return nil, err
	}
	httpAddr := advertisedHTTP(ln.Addr().String(), f.advertiseHTTP)
	ccfg := cluster.Config{
		NodeID: cfg.NodeID, BindAddr: host, BindPort: port, Join: f.join, Secret: f.secret,
		Meta: cluster.Meta{Role: cluster.RoleGateway, HTTP: httpAddr}, Profile: f.profile, Logger: cfg.Logger,
	}
	if f.advertise != "" {
		ah, ap, err := splitHostPort("advertise", f.advertise)
		if err != nil {
			ln.Close()
			return nil, err
		}
		ccfg.AdvertiseAddr, ccfg.AdvertisePort = ah, ap
	}
	node, err := cluster.Start(ctx, ccfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), node.Collector())
	cfg.Registerer, cfg.Gatherer = reg, reg
	shardTLS, err := f.shardTLS.clientConfig()
	if err != nil {
		ln.Close()
		node.Shutdown()
		return nil, err
	}
	g, err := gateway.New(cfg, shardrpc.New(f.secret, shardrpc.WithTLS(nil, shardTLS)), node)
	if err != nil {
		ln.Close()
		node.Shutdown()
		return nil, err
	}
	r := &runningGateway{addr: ln.Addr().String(), node: node, errc: make(chan error, 1)}
	go g.WatchMembership(ctx, node.Events())
	go func() { r.errc <- g.Serve(ctx, ln) }()
	return r, nil
}
