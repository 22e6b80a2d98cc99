package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// TestDeleteManyThenDeleteBucket is what `s3cmd del --recursive` and
// `mc rm --recursive` followed by rb do: one DeleteObjects request of 1000
// keys, then DeleteBucket. Every key must be deleted and the bucket must
// then delete without BucketNotEmpty.
//
// The gateway runs with a short per-operation limit (--op-timeout), shorter
// than 1000 deletes take: each key of DeleteObjects has its own limit, not
// one shared by the whole request (with a shared one the keys past it
// failed with SlowDown, which s3cmd ignores, and its rb then found the
// bucket not empty).
func TestDeleteManyThenDeleteBucket(t *testing.T) {
	parallel(t)
	d := startDev(t, "--op-timeout", "5s")
	c := d.client(t)
	const bucket, n = "delete-many", 1000
	mustMakeBucket(t, c, bucket)

	keys := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for k := range keys {
				if _, err := c.PutObject(ctx(t), bucket, k, strings.NewReader(k), int64(len(k)), minio.PutObjectOptions{}); err != nil {
					t.Errorf("put %s: %v", k, err)
				}
			}
		})
	}
	for i := range n {
		keys <- fmt.Sprintf("tree/d%02d/file %04d+x.bin", i%20, i)
	}
	close(keys)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	objs := make(chan minio.ObjectInfo, n)
	listed := 0
	for o := range c.ListObjects(ctx(t), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list: %v", o.Err)
		}
		objs <- o
		listed++
	}
	close(objs)
	if listed != n {
		t.Fatalf("listed %d keys, want %d", listed, n)
	}
	// minio-go sends the keys in one DeleteObjects request (it batches
	// 1000) and reports every per-key error.
	failed, start := 0, time.Now()
	for e := range c.RemoveObjects(ctx(t), bucket, objs, minio.RemoveObjectsOptions{}) {
		if failed++; failed <= 5 {
			t.Errorf("delete %s: %v", e.ObjectName, e.Err)
		}
	}
	t.Logf("DeleteObjects of %d keys: %v", n, time.Since(start).Round(time.Millisecond))
	if failed > 0 {
		t.Fatalf("%d of %d keys not deleted", failed, n)
	}
	for o := range c.ListObjects(ctx(t), bucket, minio.ListObjectsOptions{Recursive: true}) {
		t.Fatalf("listed after delete: %s %v", o.Key, o.Err)
	}
	if err := c.RemoveBucket(ctx(t), bucket); err != nil {
		d.logLiveEntries(t, bucket)
		t.Fatalf("delete bucket after deleting its %d keys: %v", n, err)
	}
	if ok, err := c.BucketExists(ctx(t), bucket); err != nil || ok {
		t.Fatalf("bucket exists after delete: %v %v", ok, err)
	}
}

// logLiveEntries logs, per shard server, the keys of bucket whose current
// version there is not a tombstone, with every version the server holds.
func (d *devCluster) logLiveEntries(t *testing.T, bucket string) {
	t.Helper()
	sc := shardrpc.New(d.info.Secret, nil)
	for _, s := range d.info.Shards {
		es, _, err := sc.List(ctx(t), s.Addr, metadata.ListQuery{Bucket: bucket, Limit: metadata.MaxListLimit})
		if err != nil {
			t.Logf("shard %s: list: %v", s.ID, err)
			continue
		}
		live := 0
		for _, e := range es {
			if e.Deleted {
				continue
			}
			if live++; live <= 5 {
				prev := ""
				for _, p := range e.Previous {
					prev += fmt.Sprintf(" %s(deleted=%v)", p.Version, p.Deleted)
				}
				t.Logf("shard %s: live %q version %s previous:%s", s.ID, e.Key, e.Version, prev)
			}
		}
		t.Logf("shard %s: %d entries, %d live", s.ID, len(es), live)
	}
	t.Logf("gateway log, last lines but requests:\n%s", tail(filepath.Join(d.dir, "gateway.log"), 40, "msg=request "))
}

// tail returns the last n lines of the file at path that do not contain
// skip.
func tail(path string, n int, skip string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.Contains(l, skip) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
