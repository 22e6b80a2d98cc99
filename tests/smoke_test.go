package tests

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/minio/minio-go/v7"
)

// TestSmoke is the one end-to-end test of `go test -short ./...`: a whole
// regen dev cluster (real processes on loopback) takes a small object and
// a two-stripe object, lists and reads them back byte-exact, keeps reading
// the large one with a shard server killed (degraded), and deletes. The
// full suite (`go test ./...`) covers each of these in depth.
func TestSmoke(t *testing.T) {
	d := startDev(t, "--shards", "9") // rs-6-3: every object on all nine
	c := d.client(t)
	mustMakeBucket(t, c, "smoke")
	small := randomData(1000, 1)
	large := randomData(2*stripeBytes+12345, 2)
	put(t, c, "smoke", "small", small, minio.PutObjectOptions{})
	put(t, c, "smoke", "dir/large", large, minio.PutObjectOptions{DisableMultipart: true})

	var keys []string
	for obj := range c.ListObjects(ctx(t), "smoke", minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		keys = append(keys, fmt.Sprintf("%s:%d", obj.Key, obj.Size))
	}
	if want := fmt.Sprintf("[dir/large:%d small:1000]", len(large)); fmt.Sprint(keys) != want {
		t.Fatalf("listing %v, want %s", keys, want)
	}
	if got := get(t, c, "smoke", "small", minio.GetObjectOptions{}); !bytes.Equal(got, small) {
		t.Fatal("small object read back wrong")
	}
	if got := get(t, c, "smoke", "dir/large", minio.GetObjectOptions{}); !bytes.Equal(got, large) {
		t.Fatal("large object read back wrong")
	}

	d.killShard(0) // holds a shard of every object (n = 9 servers)
	if got := get(t, c, "smoke", "dir/large", minio.GetObjectOptions{}); !bytes.Equal(got, large) {
		t.Fatal("large object read back wrong with a shard server dead")
	}

	if err := c.RemoveObject(ctx(t), "smoke", "dir/large", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatObject(ctx(t), "smoke", "dir/large", minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
		t.Fatalf("stat after delete: want NoSuchKey, got %v", err)
	}
}
