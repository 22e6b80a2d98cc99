package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// buildRegen builds the regen binary under test into dir and returns its
// path.
//
// It builds into a cache directory first (the user's cache, one per
// checkout and per -race), where go build finds the binary up to date and
// skips the link when nothing changed since the last run: the link is
// about 8 s of CPU, a good part of the quick tier's budget
// (`go test -short ./...` on 2 cores). A file lock serialises test
// processes of the same checkout building at once, and each run takes its
// own copy, so a later build never changes a binary a running cluster
// executes. Without a cache directory it builds straight into dir.
func buildRegen(dir string) (string, error) {
	out := filepath.Join(dir, "regen")
	src, err := filepath.Abs("../cmd/regen")
	if err != nil {
		return "", err
	}
	flags := []string{}
	if raceBuild {
		flags = append(flags, "-race")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return out, goBuild(out, src, flags)
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s %v", src, flags))
	cdir := filepath.Join(cache, "regen-tests", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(cdir, 0o700); err != nil {
		return out, goBuild(out, src, flags)
	}
	lock, err := os.OpenFile(filepath.Join(cdir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	cached := filepath.Join(cdir, "regen")
	if err := goBuild(cached, src, flags); err != nil {
		return "", err
	}
	return out, copyFile(out, cached)
}

func goBuild(out, src string, flags []string) error {
	args := append([]string{"build", "-o", out}, flags...)
	build := exec.Command("go", append(args, src)...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building regen: %w", err)
	}
	return nil
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o700)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}
