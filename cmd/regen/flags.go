package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
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

// env returns the REGEN_* variable or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// envList splits a comma-separated REGEN_* variable.
func envList(name string) listFlag {
	var l listFlag
	if v := os.Getenv(name); v != "" {
		l.Set(v)
	}
	return l
}

// parseSize reads sizes like 1048576, 64KiB, 1MiB, 125MB, 2G.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q (examples: 1048576, 64KiB, 1MiB, 125MB)", s)
	}
	return int64(n * float64(mult)), nil
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
