package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

// TestBenchS3 runs `regen bench s3` against a dev cluster with small
// counts: every workload reports ops and no errors (every GET was
// verified by SHA-256), a bucket holding someone's object is refused and
// left as it was, and the run leaves no bucket or object of its own.
func TestBenchS3(t *testing.T) {
	parallel(t)
	d := startDev(t)
	c := d.client(t)
	mustMakeBucket(t, c, "theirs")
	put(t, c, "theirs", "keep-me", []byte("data"), minio.PutObjectOptions{})
	bench := func(args ...string) (string, string, error) {
		all := append([]string{"bench", "s3", "--endpoint", d.info.Endpoint, "--access", d.info.AccessKey, "--secret", d.info.SecretKey}, args...)
		cmd := exec.Command(regenBin, all...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}

	_, stderr, err := bench("--bucket", "theirs", "--count", "2", "--duration", "0")
	if err == nil || !strings.Contains(stderr, "not empty") {
		t.Fatalf("bench against a non-empty bucket: err %v, stderr %q; want a refusal", err, stderr)
	}
	if _, err := c.StatObject(ctx(t), "theirs", "keep-me", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("the refused bucket's object: %v", err)
	}

	out, stderr, err := bench("--json", "--count", "3", "--duration", "0", "--sizes", "4KiB,1MiB,7MiB",
		"--meta-objects", "60", "--meta-prefixes", "6")
	if err != nil {
		t.Fatalf("bench s3: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	want := map[string]bool{"put-4KiB": true, "get-4KiB": true, "head": true, "put-1MiB": true, "get-1MiB": true,
		"put-7MiB": true, "get-7MiB": true, "list-recursive": true, "list-delimiter": true, "list-prefix": true, "delete-objects": true}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r struct {
			Workload string  `json:"workload"`
			Ops      int64   `json:"ops"`
			Errors   int64   `json:"errors"`
			Items    int64   `json:"items"`
			Bytes    int64   `json:"bytes"`
			P50      float64 `json:"p50_ms"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		if !want[r.Workload] {
			t.Errorf("unexpected or repeated workload %q", r.Workload)
		}
		delete(want, r.Workload)
		if r.Ops == 0 || r.Errors != 0 || r.P50 <= 0 {
			t.Errorf("%s: %d ops, %d errors, p50 %v ms", r.Workload, r.Ops, r.Errors, r.P50)
		}
		switch {
		case strings.HasPrefix(r.Workload, "get-7MiB"):
			if r.Bytes != 3*7<<20 {
				t.Errorf("%s moved %d bytes, want %d", r.Workload, r.Bytes, 3*7<<20)
			}
		case r.Workload == "list-recursive":
			if r.Items != 3*60 {
				t.Errorf("list-recursive listed %d entries in 3 listings, want 180", r.Items)
			}
		case r.Workload == "delete-objects":
			if r.Items != 60 {
				t.Errorf("delete-objects removed %d keys, want 60", r.Items)
			}
		}
	}
	for w := range want {
		t.Errorf("no result for %s", w)
	}
	buckets, err := c.ListBuckets(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(buckets) != 1 || buckets[0].Name != "theirs" {
		t.Errorf("buckets after the bench: %v; want only theirs", buckets)
	}
}
