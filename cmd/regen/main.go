// Command regen is the one binary of regen: S3 gateway, shard server, the
// embedded dev cluster, the operator CLI and the tools.
//
// It is the only place that reads flags and environment variables; every
// package below takes its configuration as values.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"dev":     {"run a gateway and N shard servers on this machine (the embedded cluster)", runDev},
		"gateway": {"run an S3 gateway", runGateway},
		"shard":   {"run a shard server", runShard},
		"admin":   {"operator commands against a running cluster (below)", runAdmin},
		"codes":   {"survey the repair bandwidth of erasure codes", runCodes},
		"chaos":   {"start a dev cluster, run clients under a seeded nemesis (kill -9, SIGSTOP, clock skew) and check linearizability and durability", runChaos},
		"bench":   {"benchmarks: 'bench repair' times repair methods on a local cluster, 'bench s3' an S3 endpoint, 'bench fill' loads many small objects and 'bench probe' measures HEAD, listing and DeleteObjects on them", runBench},
		"health":  {"probe a server's /healthz (for container healthchecks)", runHealth},
		"version": {"print the version, commit and Go version of this binary", runVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: regen <command> [flags]\n\ncommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nadmin commands (regen admin COMMAND):")
	adminList(w, "  ")
	fmt.Fprintln(w, "\nrun 'regen <command> -h' for its flags; every flag also has a REGEN_* environment variable")
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	name := os.Args[1]
	switch name {
	case "-h", "--help", "help":
		usage(os.Stdout)
		return
	case "--version", "-version":
		name = "version"
	}
	cmd, ok := commands()[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "regen: unknown command %q\n\n", name)
		usage(os.Stderr)
		os.Exit(2)
	}
	privateFiles()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, os.Args[2:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "regen %s: %v\n", name, err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError marks bad command-line input (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }
