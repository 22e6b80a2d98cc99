package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/regen-s3/regen/internal/connguard"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// logOptions are the logging, profiling and gossip options of every
// server command.
type logOptions struct {
	logFormat, logLevel string
	profile             string // gossip timing
	pprof               string // net/http/pprof listen address, "" for none
}

func (f *logOptions) register(o *optionSet, profile string) {
	o.String(&f.logFormat, "log-format", "REGEN_LOG_FORMAT", "text", "log format: text or json")
	o.String(&f.logLevel, "log-level", "REGEN_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	o.String(&f.profile, "gossip-profile", "REGEN_GOSSIP_PROFILE", profile, "gossip timing: lan, or local for one machine (failures seen in seconds)")
	o.String(&f.pprof, "pprof", "REGEN_PPROF", "", "serve Go's profiles (net/http/pprof, no auth) on this host:port, e.g. 127.0.0.1:6060; keep it on loopback. "+
		"regen dev: the gateway there, shard server i on the port + i")
}

// Validate checks the log and gossip options.
func (f *logOptions) Validate() error {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(f.logLevel)); err != nil {
		return badOption("log-level", "want debug, info, warn or error")
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		return badOption("log-format", "want text or json")
	}
	if f.profile != "lan" && f.profile != "local" {
		return badOption("gossip-profile", "want lan or local")
	}
	if f.pprof != "" {
		return checkHostPort("pprof", f.pprof)
	}
	return nil
}

// servePprof serves net/http/pprof on addr until ctx ends (nothing for an
// empty addr). It has its own listener and mux, so profiles never share a
// port, or an auth scheme, with S3 or the shard API.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("pprof listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// NB: bounded like every listener: a few connections, header and idle
	// timeouts, and an accept loop that survives running out of
	// descriptors. A CPU profile or trace answers after its ?seconds.
	gl, err := connguard.Listen(ln, connguard.Config{MaxConns: 16, WriteIdle: time.Minute, Logger: log})
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
	go srv.Serve(gl)
	go func() { <-ctx.Done(); srv.Close() }()
	log.Info("serving profiles", "addr", ln.Addr().String())
	return nil
}

// offsetPort returns host:port+i (regen dev's shard servers' --pprof).
func offsetPort(addr string, i int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(p+i)), nil
}

// checkHostPort is a Validate helper for host:port options.
func checkHostPort(name, v string) error {
	if _, _, err := splitHostPort(name, v); err != nil {
		return badOption(name, "want host:port, e.g. 127.0.0.1:9000")
	}
	return nil
}

// newLogger builds the process logger from --log-format and --log-level.
func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, usageErrorf("--log-format %q: want text or json", format)
}

// splitHostPort parses host:port with a clear error.
func splitHostPort(flagName, v string) (string, int, error) {
	i := strings.LastIndex(v, ":")
	if i < 0 {
		return "", 0, usageErrorf("--%s %q: want host:port", flagName, v)
	}
	port, err := strconv.Atoi(v[i+1:])
	if err != nil || port < 0 || port > 65535 {
		return "", 0, usageErrorf("--%s %q: bad port", flagName, v)
	}
	return strings.Trim(v[:i], "[]"), port, nil
}

// newFileLogger logs to w in the given format, at the level of like.
func newFileLogger(w io.Writer, format string, like *slog.Logger) *slog.Logger {
	lv := slog.LevelInfo
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if like.Enabled(context.Background(), l) {
			lv = l
			break
		}
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
