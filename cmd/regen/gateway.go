package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/regen-s3/regen/gateway"
	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// Default credentials of a fresh install; regen dev prints them. Anything
// reachable from outside should set REGEN_ACCESS_KEY / REGEN_SECRET_KEY.
const (
	defaultAccessKey = "regenadmin"
	defaultSecretKey = "regenadmin-secret"
)

// gatewayFlags are the flags of `regen gateway` (and the gateway part of
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
	chunk                   string
	logFormat, logLevel     string
	profile                 string
	tlsCert, tlsKey         string
	domain                  string
	opTimeout               time.Duration
}

func (f *gatewayFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "addr", env("REGEN_ADDR", "127.0.0.1:9000"), "S3 listen address host:port (REGEN_ADDR)")
	fs.StringVar(&f.gossip, "gossip", env("REGEN_GOSSIP", "127.0.0.1:7946"), "gossip listen address host:port (REGEN_GOSSIP)")
	fs.StringVar(&f.advertise, "advertise", env("REGEN_ADVERTISE", ""), "gossip address told to peers, if different (REGEN_ADVERTISE)")
	fs.StringVar(&f.advertiseHTTP, "advertise-http", env("REGEN_ADVERTISE_HTTP", ""), "S3 address told to peers and shown in status, if different (REGEN_ADVERTISE_HTTP)")
	f.join = envList("REGEN_JOIN")
	fs.Var(&f.join, "join", "gossip address of a cluster member, repeatable (REGEN_JOIN, comma-separated)")
	fs.StringVar(&f.secret, "secret", env("REGEN_CLUSTER_SECRET", ""), "cluster secret shared by all nodes (REGEN_CLUSTER_SECRET)")
	fs.StringVar(&f.accessKey, "access-key", env("REGEN_ACCESS_KEY", defaultAccessKey), "S3 access key (REGEN_ACCESS_KEY)")
	fs.StringVar(&f.secretKey, "secret-key", env("REGEN_SECRET_KEY", defaultSecretKey), "S3 secret key (REGEN_SECRET_KEY)")
	fs.StringVar(&f.credFile, "credentials-file", env("REGEN_CREDENTIALS_FILE", ""), "file of 'ACCESS_KEY SECRET_KEY' lines, added to --access-key (REGEN_CREDENTIALS_FILE)")
	fs.StringVar(&f.region, "region", env("REGEN_REGION", "us-east-1"), "S3 region (REGEN_REGION)")
	fs.StringVar(&f.code, "code", env("REGEN_CODE", "rs-6-3"), "default erasure code: rs-K-M, clay-K-M or pm-K-M (REGEN_CODE)")
	f.classes = envList("REGEN_STORAGE_CLASSES")
	fs.Var(&f.classes, "storage-class", "CLASS=CODE: code for an S3 storage class, repeatable (REGEN_STORAGE_CLASSES)")
	fs.StringVar(&f.chunk, "chunk-size", env("REGEN_CHUNK_SIZE", "1MiB"), "shard chunk per stripe, rounded up to 64-byte sub-chunks (REGEN_CHUNK_SIZE)")
	fs.StringVar(&f.logFormat, "log-format", env("REGEN_LOG_FORMAT", "text"), "log format: text or json (REGEN_LOG_FORMAT)")
	fs.StringVar(&f.logLevel, "log-level", env("REGEN_LOG_LEVEL", "info"), "log level: debug, info, warn, error (REGEN_LOG_LEVEL)")
	fs.StringVar(&f.profile, "gossip-profile", env("REGEN_GOSSIP_PROFILE", "lan"), "gossip timing: lan, or local for one machine (REGEN_GOSSIP_PROFILE)")
	fs.StringVar(&f.tlsCert, "tls-cert", env("REGEN_TLS_CERT", ""), "PEM certificate (chain) to serve S3 over HTTPS; needs --tls-key (REGEN_TLS_CERT)")
	fs.StringVar(&f.tlsKey, "tls-key", env("REGEN_TLS_KEY", ""), "PEM private key of --tls-cert (REGEN_TLS_KEY)")
	fs.StringVar(&f.domain, "domain", env("REGEN_DOMAIN", ""), "domain for virtual-hosted-style requests (BUCKET.DOMAIN); empty: path style only (REGEN_DOMAIN)")
	fs.DurationVar(&f.opTimeout, "op-timeout", envDuration("REGEN_OP_TIMEOUT", gateway.DefaultConfig().OpTimeout), "time limit of one request's metadata work, per key in DeleteObjects (REGEN_OP_TIMEOUT)")
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
	if f.credFile != "" {
		if err := readCredentials(f.credFile, cfg.Credentials); err != nil {
			return cfg, err
		}
	}
	for _, kv := range f.classes {
		class, code, ok := strings.Cut(kv, "=")
		if !ok || class == "" || code == "" {
			return cfg, usageErrorf("--storage-class %q: want CLASS=CODE, e.g. STANDARD_IA=clay-6-3", kv)
		}
		cfg.StorageClasses[strings.ToUpper(class)] = code
	}
	chunk, err := parseSize(f.chunk)
	if err != nil {
		return cfg, usageErrorf("--chunk-size: %v", err)
	}
	cfg.ChunkSize = chunk
	cfg.OpTimeout = f.opTimeout
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
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	var f gatewayFlags
	f.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.secret == "" {
		return usageErrorf("--secret (or REGEN_CLUSTER_SECRET) is required: the cluster secret shared by all nodes")
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
func startGateway(ctx context.Context, cfg gateway.Config, f *gatewayFlags) (*runningGateway, error) {
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
	g, err := gateway.New(cfg, shardrpc.New(f.secret, nil), node)
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
