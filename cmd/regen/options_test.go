package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/regen-s3/regen/repair"
)

// parseRepair parses args as regen shard's repair options would be.
func parseRepair(t *testing.T, def repair.Config, args ...string) (repairFlags, error) {
	t.Helper()
	o := newOptionSet("shard", "")
	var f repairFlags
	f.register(o, def)
	return f, o.Parse(args, f.Validate)
}

// A variable that does not parse is an error naming the variable and its
// flag, not silently the default (REGEN_REPAIR_GRACE=30 used to keep 10m).
func TestOptionsBadEnvIsAnError(t *testing.T) {
	for _, tc := range []struct{ env, val, flag string }{
		{"REGEN_REPAIR_GRACE", "30", "--repair-grace"},
		{"REGEN_REPAIR_WORKERS", "four", "--repair-workers"},
		{"REGEN_REPAIR_WORKERS", "0", "--repair-workers"}, // parses, fails Validate
		{"REGEN_SCRUB_RATE", "fast", "--scrub-rate"},
		{"REGEN_SCRUB_RATE", "NaN", "--scrub-rate"}, // ParseFloat takes it
		{"REGEN_REPAIR_RATE", "99999999999Gbit", "--repair-rate"},
		{"REGEN_REPAIR_RATE", "-8MiB", "--repair-rate"},
		{"REGEN_REPAIR", "magic", "--repair"},
	} {
		t.Run(tc.env+"="+tc.val, func(t *testing.T) {
			t.Setenv(tc.env, tc.val)
			_, err := parseRepair(t, repair.DefaultConfig())
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("got %v, want a usage error", err)
			}
			for _, want := range []string{tc.env, tc.flag, `"` + tc.val + `"`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
		})
	}
}

func TestOptionsBadFlagNamesItsVariable(t *testing.T) {
	_, err := parseRepair(t, repair.DefaultConfig(), "--repair-grace", "30")
	if err == nil || !strings.Contains(err.Error(), "--repair-grace") || !strings.Contains(err.Error(), "REGEN_REPAIR_GRACE") {
		t.Fatalf("error %v, want one naming --repair-grace and REGEN_REPAIR_GRACE", err)
	}
	_, err = parseRepair(t, repair.DefaultConfig(), "--no-such-flag")
	if err == nil || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("error %v, want one naming the unknown flag", err)
	}
}

func TestOptionsFlagWinsOverEnv(t *testing.T) {
	t.Setenv("REGEN_REPAIR_GRACE", "1m")
	t.Setenv("REGEN_REPAIR_SCAN", "7s")
	f, err := parseRepair(t, repair.DefaultConfig(), "--repair-grace", "2h")
	if err != nil {
		t.Fatal(err)
	}
	if f.grace != 2*time.Hour || f.scan != 7*time.Second {
		t.Fatalf("grace %v scan %v, want 2h from the flag and 7s from the variable", f.grace, f.scan)
	}
	// An empty variable is unset, as before.
	t.Setenv("REGEN_REPAIR_SCAN", "")
	if f, err = parseRepair(t, repair.DefaultConfig()); err != nil || f.scan != repair.DefaultConfig().ScanInterval {
		t.Fatalf("scan %v err %v with REGEN_REPAIR_SCAN empty, want the default", f.scan, err)
	}
}

func TestOptionsUnits(t *testing.T) {
	for _, tc := range []struct {
		val  string
		want int64
	}{
		{"8388608", 8 << 20}, {"8MiB", 8 << 20}, {"8MiB/s", 8 << 20}, {"125MB", 125e6},
		{"125MB/s", 125e6}, {"1Gbit", 125e6}, {"64KiB", 64 << 10}, {"0", 0},
	} {
		f, err := parseRepair(t, repair.DefaultConfig(), "--scrub-rate", tc.val, "--repair-rate", tc.val)
		if err != nil || f.scrubRate != tc.want || f.rate != tc.want {
			t.Errorf("--scrub-rate/--repair-rate %s: %d, %d, %v; want %d", tc.val, f.scrubRate, f.rate, err, tc.want)
		}
	}
	// A rate's String is what dev passes on to its shard servers: it
	// must parse back to the same value.
	for _, n := range []int64{0, 1, 1000, 8 << 20, 125e6, 12_500_000, 3<<30 + 1} {
		v := rateValue(n)
		var back rateValue
		if err := back.Set(v.String()); err != nil || back != v {
			t.Errorf("rate %d prints as %q, which reads back as %d (%v)", n, v.String(), back, err)
		}
		s := sizeValue(n)
		var sback sizeValue
		if err := sback.Set(s.String()); err != nil || sback != s {
			t.Errorf("size %d prints as %q, which reads back as %d (%v)", n, s.String(), sback, err)
		}
	}
	o := newOptionSet("gateway", "")
	var g gatewayFlags
	g.register(o, false)
	if err := o.Parse([]string{"--chunk-size", "256KiB"}, g.Validate); err != nil || g.chunk != 256<<10 {
		t.Fatalf("--chunk-size 256KiB: %d, %v", g.chunk, err)
	}
}

// regen dev's help shows the timings dev really uses, not the production
// ones.
func TestDevHelpShowsDevDefaults(t *testing.T) {
	o := newOptionSet("dev", "")
	var f devFlags
	f.register(o)
	var help strings.Builder
	o.help = &help
	if err := o.Parse([]string{"--help"}, f.Validate); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"REGEN_REPAIR_GRACE; default 5s]", "REGEN_REPAIR_SCAN; default 1s]", "REGEN_SYNC_INTERVAL; default 10s]", "REGEN_GOSSIP_PROFILE; default local]"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("dev help lacks %q:\n%s", want, help.String())
		}
	}
	// And the values are those.
	o = newOptionSet("dev", "")
	f = devFlags{}
	f.register(o)
	if err := o.Parse(nil, f.Validate); err != nil {
		t.Fatal(err)
	}
	if f.repair.grace != 5*time.Second || f.repair.scan != time.Second || f.repair.sync != 10*time.Second || f.gateway.profile != "local" {
		t.Fatalf("dev defaults: grace %v scan %v sync %v profile %s", f.repair.grace, f.repair.scan, f.repair.sync, f.gateway.profile)
	}
	// A scrub pass steps over every manifest (750k per server at a
	// million objects): no more than hourly on an idle dev cluster.
	if f.repair.scrubInterval < time.Hour {
		t.Fatalf("dev scrubs every %v", f.repair.scrubInterval)
	}
	// regen shard keeps the production ones.
	s := newOptionSet("shard", "")
	var sf shardFlags
	sf.register(s)
	if err := s.Parse([]string{"--secret", "0123456789abcdef"}, sf.Validate); err != nil {
		t.Fatal(err)
	}
	if def := repair.DefaultConfig(); sf.repair.grace != def.Grace || sf.repair.scan != def.ScanInterval || sf.profile != "lan" {
		t.Fatalf("shard defaults: grace %v scan %v profile %s", sf.repair.grace, sf.repair.scan, sf.profile)
	}
}

func TestOptionsListFromEnvReplacesDefault(t *testing.T) {
	t.Setenv("REGEN_JOIN", "a:1, b:2")
	o := newOptionSet("gateway", "")
	var g gatewayFlags
	g.register(o, false)
	if err := o.Parse(nil, g.Validate); err != nil {
		t.Fatal(err)
	}
	if strings.Join(g.join, " ") != "a:1 b:2" || !o.Given("join") || o.Given("addr") {
		t.Fatalf("join %q given %v/%v", g.join, o.Given("join"), o.Given("addr"))
	}
	o = newOptionSet("gateway", "")
	g = gatewayFlags{}
	g.register(o, false)
	if err := o.Parse([]string{"--join", "c:3", "--join", "d:4"}, g.Validate); err != nil {
		t.Fatal(err)
	}
	if strings.Join(g.join, " ") != "c:3 d:4" {
		t.Fatalf("join %q, want the flags' c:3 d:4 only", g.join)
	}
}

// regen --help lists every admin command, not just the first two.
func TestUsageListsAdminCommands(t *testing.T) {
	var b strings.Builder
	usage(&b)
	for _, c := range adminCommands() {
		if !strings.Contains(b.String(), c.name) {
			t.Errorf("regen --help lacks admin %s:\n%s", c.name, b.String())
		}
	}
	if !strings.Contains(b.String(), "version") {
		t.Errorf("regen --help lacks version")
	}
}

func TestVersion(t *testing.T) {
	v := versionText()
	if !strings.HasPrefix(v, "regen ") || !strings.Contains(v, "commit ") || !strings.Contains(v, runtime.Version()) {
		t.Fatalf("version text %q lacks the version, commit or Go version", v)
	}
}

// regen dev's shard servers inherit its environment, and some variables
// only they read (REGEN_NET_LIMIT, REGEN_UPLOAD_MAX_AGE): a bad one stops
// dev before it starts anything, with the shard server's own error naming
// flag and variable, not after its children died and dev waited for them.
func TestDevRefusesABadShardServerVariable(t *testing.T) {
	for _, tc := range []struct{ env, val, flag string }{
		{"REGEN_NET_LIMIT", "fast", "--net-limit"},
		{"REGEN_UPLOAD_MAX_AGE", "30", "--upload-max-age"},
		{"REGEN_MAX_CONNS", "many", "--max-conns"}, // the gateway's too: dev's own parse finds it
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(tc.env, tc.val)
			data := filepath.Join(t.TempDir(), "data")
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // should dev start anyway, it stops at once
			err := runDev(ctx, []string{"--data", data, "--addr", "127.0.0.1:0"}, io.Discard)
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("regen dev with %s=%s: %v, want a usage error", tc.env, tc.val, err)
			}
			for _, want := range []string{tc.env, tc.flag, `"` + tc.val + `"`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("dev made its data directory before refusing its options (%v)", err)
			}
		})
	}
	// And what dev really gives its shard servers passes the check.
	if err := checkShardOptions([]string{"--data", t.TempDir(), "--net-limit", "125MB"}, "0123456789abcdef0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
}

// Every size option takes units, regen codes' --chunk included.
func TestCodesChunkTakesUnits(t *testing.T) {
	var out strings.Builder
	if err := runCodes(context.Background(), []string{"--code", "rs-4-2", "--failures", "1", "--chunk", "4KiB", "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	if err := runCodes(context.Background(), []string{"--chunk", "lots"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--chunk") {
		t.Fatalf("--chunk lots: %v, want an error naming --chunk", err)
	}
}

// regen dev gives each shard server the machine's cores shared among
// them: on two cores, twelve servers run one P each (an idle server's
// timers then wake one thread, not a second spinning one too).
func TestDevShardProcs(t *testing.T) {
	lastProcs := func(env []string) string {
		v := ""
		for _, kv := range env {
			if p, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
				v = p
			}
		}
		return v
	}
	base := []string{"PATH=/bin"}
	if got := lastProcs(devShardEnv(base, "s", 0, false, 2, 12)); got != "1" {
		t.Errorf("2 cores, 12 servers: GOMAXPROCS=%q, want 1", got)
	}
	if got := lastProcs(devShardEnv(base, "s", 0, false, 32, 12)); got != "2" {
		t.Errorf("32 cores, 12 servers: GOMAXPROCS=%q, want 2", got)
	}
	if got := lastProcs(devShardEnv(base, "s", 3, true, 2, 12)); got != "3" {
		t.Errorf("--shard-procs 3: GOMAXPROCS=%q, want 3", got)
	}
	// The user's GOMAXPROCS wins over the default, the flag over both.
	own := append(base, "GOMAXPROCS=4")
	if got := lastProcs(devShardEnv(own, "s", 0, false, 2, 12)); got != "4" {
		t.Errorf("GOMAXPROCS=4 inherited: got %q", got)
	}
	if got := lastProcs(devShardEnv(own, "s", 2, true, 2, 12)); got != "2" {
		t.Errorf("GOMAXPROCS=4 and --shard-procs 2: got %q", got)
	}
	if env := devShardEnv(base, "s", 0, false, 2, 12); !slices.Contains(env, "REGEN_CLUSTER_SECRET=s") {
		t.Errorf("no cluster secret in %v", env)
	}
	o := newOptionSet("dev", "")
	var f devFlags
	f.register(o)
	if err := o.Parse([]string{"--shard-procs", "-1"}, f.Validate); err == nil {
		t.Error("--shard-procs -1 accepted")
	}
}

// A shard server's Go memory has a soft limit by default, set in units,
// and a negative one is refused naming the flag.
func TestShardMemoryLimit(t *testing.T) {
	parse := func(args ...string) (shardFlags, error) {
		o := newOptionSet("shard", "test")
		var f shardFlags
		f.register(o)
		err := o.Parse(append([]string{"--secret", strings.Repeat("s", 32)}, args...), f.Validate)
		return f, err
	}
	f, err := parse()
	if err != nil || f.memoryLimit != shardMemoryLimit {
		t.Fatalf("default: %d, %v; want %d", f.memoryLimit, err, shardMemoryLimit)
	}
	if f, err = parse("--memory-limit", "96MiB"); err != nil || f.memoryLimit != 96<<20 {
		t.Fatalf("--memory-limit 96MiB: %d, %v", f.memoryLimit, err)
	}
	if _, err = parse("--memory-limit=-1"); err == nil || !strings.Contains(err.Error(), "memory-limit") {
		t.Fatalf("--memory-limit=-1: %v, want an error naming it", err)
	}
}
