package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at link time by release builds
// (-ldflags "-X main.version=v1.2.3"); otherwise the module version from
// the build info is shown ("(devel)" for a build from a checkout).
var version = ""

func runVersion(ctx context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("version", "Print the version, commit and Go version of this binary.")
	if err := o.Parse(args, nil); err != nil {
		return err
	}
	fmt.Fprint(stdout, versionText())
	return nil
}

// versionText describes this binary from its build info: what it was
// built from (the VCS commit, its time, and whether the tree had local
// changes) and with which Go.
func versionText() string {
	v, commit, when, modified := version, "unknown (built without VCS stamping: -buildvcs=false, outside a git checkout, or in a git worktree)", "", false
	bi, ok := debug.ReadBuildInfo()
	goVersion := runtime.Version()
	if ok {
		if v == "" {
			v = bi.Main.Version
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	out := fmt.Sprintf("regen %s\ncommit %s", v, commit)
	if when != "" {
		out += " (" + when + ")"
	}
	if modified {
		out += " with local changes"
	}
	return out + fmt.Sprintf("\ngo %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
}
