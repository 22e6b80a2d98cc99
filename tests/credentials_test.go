package tests

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGatewayRefusesDefaultCredentials: `regen gateway` will not start
// with the built-in key pair (in the README, and a full administrator)
// unless told the cluster is a throwaway one, nor with a guessable
// cluster secret.
func TestGatewayRefusesDefaultCredentials(t *testing.T) {
	e2e(t)
	secret := "0123456789abcdef0123456789abcdef"
	credFile := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(credFile, []byte("regenadmin regenadmin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(regenBin, append([]string{"gateway", "--addr", freeAddr(t), "--gossip", freeAddr(t)}, args...)...)
		cmd.Env = append(cleanEnv(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"defaults", []string{"REGEN_CLUSTER_SECRET=" + secret}, "--access-key (REGEN_ACCESS_KEY) default \"regenadmin\": refusing to start with the built-in default access key"},
		{"default secret key", []string{"REGEN_CLUSTER_SECRET=" + secret, "REGEN_ACCESS_KEY=mine", "REGEN_SECRET_KEY=regenadmin-secret"}, "(the variable of --secret-key): refusing to start with the built-in default secret key"},
		{"default pair in a credentials file", []string{"REGEN_CLUSTER_SECRET=" + secret, "REGEN_ACCESS_KEY=mine", "REGEN_SECRET_KEY=my-own-secret-key", "REGEN_CREDENTIALS_FILE=" + credFile}, "--credentials-file: refusing to start with the built-in default access key"},
		{"short cluster secret", []string{"REGEN_CLUSTER_SECRET=short", "REGEN_ACCESS_KEY=mine", "REGEN_SECRET_KEY=my-own-secret-key"}, "at least 16"},
	} {
		out, err := run(tc.env)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %v, output %q; want a usage error about %q", tc.name, err, out, tc.want)
		}
	}

	// Told explicitly, it starts (and serves S3 on its port).
	addr := freeAddr(t)
	cmd := exec.Command(regenBin, "gateway", "--addr", addr, "--gossip", freeAddr(t), "--allow-default-credentials")
	cmd.Env = append(cleanEnv(), "REGEN_CLUSTER_SECRET="+secret)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	}()
	waitFor(t, 30*time.Second, "the gateway with --allow-default-credentials to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// cleanEnv is the test's environment without REGEN_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REGEN_") {
			env = append(env, kv)
		}
	}
	return env
}
