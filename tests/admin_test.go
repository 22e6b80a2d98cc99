package tests

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

// TestAdminBucketSetCode changes a bucket's code with `regen admin bucket
// set-code` and checks that new objects are written with it: an rs-4-2
// object leaves 6 shard files where the default rs-6-3 leaves 9.
func TestAdminBucketSetCode(t *testing.T) {
	parallel(t)
	d := startDev(t)
	cl := d.client(t)
	c := ctx(t)
	admin := func(args ...string) (string, error) {
		all := append(args, "--endpoint", d.info.Endpoint, "--access-key", d.info.AccessKey, "--secret-key", d.info.SecretKey)
		out, err := exec.Command(regenBin, append([]string{"admin"}, all...)...).CombinedOutput()
		return string(out), err
	}
	shardFiles := func() int64 {
		out, err := admin("status", "--json")
		if err != nil {
			t.Fatalf("admin status: %v\n%s", err, out)
		}
		var st struct {
			Shards int64 `json:"shards"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		return st.Shards
	}
	put := func(key string) {
		data := make([]byte, 1<<20)
		rand.Read(data)
		if _, err := cl.PutObject(c, "coded", key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{DisableMultipart: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.MakeBucket(c, "coded", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}

	before := shardFiles()
	put("default")
	if got := shardFiles() - before; got != 9 {
		t.Fatalf("an rs-6-3 object left %d shard files, want 9", got)
	}

	out, err := admin("bucket", "set-code", "coded", "rs-4-2")
	if err != nil || !strings.Contains(out, "new objects use rs-4-2 (was the cluster default)") {
		t.Fatalf("set-code: %v\n%s", err, out)
	}
	before = shardFiles()
	put("narrow")
	if got := shardFiles() - before; got != 6 {
		t.Fatalf("after set-code rs-4-2 an object left %d shard files, want 6", got)
	}
	for _, key := range []string{"default", "narrow"} {
		if _, err := cl.StatObject(c, "coded", key, minio.StatObjectOptions{}); err != nil {
			t.Fatalf("stat %s: %v", key, err)
		}
	}

	if out, err := admin("bucket", "set-code", "coded", "rs-20-10"); err == nil || !strings.Contains(out, "InvalidArgument") {
		t.Errorf("an impossible code was accepted: %v\n%s", err, out)
	}
	if out, err := admin("bucket", "set-code", "nosuch", "rs-4-2"); err == nil || !strings.Contains(out, "NoSuchBucket") {
		t.Errorf("set-code on a missing bucket: %v\n%s", err, out)
	}
	out, err = admin("bucket", "set-code", "coded", "")
	if err != nil || !strings.Contains(out, "(was rs-4-2)") {
		t.Errorf("set-code back to the default: %v\n%s", err, out)
	}
}
