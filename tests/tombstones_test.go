package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// tombStatus is the tombstone part of `regen admin status --json`, summed
// over the live shard servers.
type tombStatus struct {
	Tombstones int64 `json:"tombstones"`
	Jobs       int64 `json:"tombstone_jobs"`
	Collected  int64 `json:"tombstones_collected"`
	Blocked    int64 `json:"tombstone_checks_blocked"`
}

func (d *devCluster) tombStatus(t *testing.T) tombStatus {
	t.Helper()
	return d.adminStatus(t).tombStatus
}

// TestTombstoneCollection deletes keys and waits until their tombstones
// are collected (docs/CONSISTENCY.md, "Tombstone collection"), first with
// every shard server up, then with one stopped during the DELETE that
// held the deleted versions: it blocks collection while it is down, and
// once it is back and collection has run, nothing it held comes back
// through GET, HEAD, the listing or ListObjectVersions.
func TestTombstoneCollection(t *testing.T) {
	e2e(t)
	// NB: a settle of seconds, not the minute a server otherwise waits
	// after its start before it checks tombstones: dev writes dev.json
	// only once gossip shows the gateway every shard server, and 15 s
	// outlasts a full state exchange of dev's gossip (every 10 s), so
	// each server's view is whole before its first check (a restarted
	// server learns it in its join).
	d := startDev(t, "--tombstone-grace", "2s", "--tombstone-settle", "15s", "--gc-delay", "1s")
	c := d.client(t)
	sc := shardrpc.New(d.info.Secret, nil)
	const bucket = "tombs"
	mustMakeBucket(t, c, bucket)

	value := func(key string, i int) []byte {
		size := 1<<10 + i // inline in its manifest
		if i%2 == 1 {
			size = 200<<10 + i // striped: shard files to collect too
		}
		return bytes.Repeat([]byte(key[:1]), size)
	}
	var first, second []string
	for i := range 6 {
		first = append(first, fmt.Sprintf("a/%d", i))
		second = append(second, fmt.Sprintf("b/%d", i))
	}
	for i, k := range append(append([]string{"keep"}, first...), second...) {
		put(t, c, bucket, k, value(k, i), minio.PutObjectOptions{})
	}

	// gone checks that keys are absent everywhere and that the listings
	// show exactly listed.
	gone := func(when string, keys, listed []string) {
		t.Helper()
		for _, k := range keys {
			_, err := c.StatObject(ctx(t), bucket, k, minio.StatObjectOptions{})
			if code := minio.ToErrorResponse(err).Code; code != "NoSuchKey" {
				t.Fatalf("%s: HEAD %s: %v (code %q), want NoSuchKey", when, k, err, code)
			}
			o, err := c.GetObject(ctx(t), bucket, k, minio.GetObjectOptions{})
			if err == nil {
				_, err = io.ReadAll(o)
				o.Close()
			}
			if code := minio.ToErrorResponse(err).Code; code != "NoSuchKey" {
				t.Fatalf("%s: GET %s: %v (code %q), want NoSuchKey", when, k, err, code)
			}
		}
		for _, versions := range []bool{false, true} {
			var got []string
			for o := range c.ListObjects(ctx(t), bucket, minio.ListObjectsOptions{Recursive: true, WithVersions: versions}) {
				if o.Err != nil {
					t.Fatalf("%s: list (versions %v): %v", when, versions, o.Err)
				}
				got = append(got, o.Key)
			}
			if !slices.Equal(got, listed) {
				t.Fatalf("%s: list (versions %v) = %q, want %q", when, versions, got, listed)
			}
		}
	}

	// Every server up: the tombstones go.
	for _, k := range first {
		if err := c.RemoveObject(ctx(t), bucket, k, minio.RemoveObjectOptions{}); err != nil {
			t.Fatalf("DELETE %s: %v", k, err)
		}
	}
	gone("after the deletes", first, slices.Concat(second, []string{"keep"}))
	start := time.Now()
	waitFor(t, 3*time.Minute, "the tombstones to be collected", func() bool {
		st := d.tombStatus(t)
		return st.Tombstones == 0 && st.Jobs == 0 && st.Collected >= int64(len(first))
	})
	t.Logf("collected %s after the deletes", time.Since(start).Round(time.Second))
	gone("after collection", first, slices.Concat(second, []string{"keep"}))

	// One server down during the DELETE, holding the deleted versions.
	const x = 0
	xAddr := d.info.Shards[x].Addr
	held := 0
	for _, k := range second {
		if _, err := sc.GetManifest(ctx(t), xAddr, bucket, k); err == nil {
			held++
		} else if !errors.Is(err, shardrpc.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if held == 0 {
		t.Fatalf("shard %d holds none of %v; the test needs it to hold some", x, second)
	}
	args := d.shardArgs(x)
	blockedBefore := d.tombStatus(t).Blocked
	d.killShard(x)
	waitFor(t, time.Minute, "the gateway to see the shard server dead", func() bool { return d.deadShards(t) == 1 })
	for o := range c.RemoveObjects(ctx(t), bucket, func() <-chan minio.ObjectInfo {
		ch := make(chan minio.ObjectInfo, len(second))
		for _, k := range second {
			ch <- minio.ObjectInfo{Key: k}
		}
		close(ch)
		return ch
	}(), minio.RemoveObjectsOptions{}) {
		t.Fatalf("DeleteObjects %s: %v", o.ObjectName, o.Err)
	}
	gone("after the deletes, one server down", second, []string{"keep"})
	waitFor(t, 2*time.Minute, "a collection check blocked by the stopped server", func() bool {
		return d.tombStatus(t).Blocked > blockedBefore
	})
	if st := d.tombStatus(t); st.Tombstones < int64(len(second)) || st.Jobs == 0 {
		t.Fatalf("status %+v: want the tombstones kept while a server that held the keys is down", st)
	}

	d.restartShard(x, args)
	start = time.Now()
	waitFor(t, time.Minute, "the shard server to be back", func() bool { return d.deadShards(t) == 0 })
	waitFor(t, 3*time.Minute, "the tombstones to be collected after the return", func() bool {
		st := d.tombStatus(t)
		return st.Tombstones == 0 && st.Jobs == 0
	})
	t.Logf("collected %s after the restart", time.Since(start).Round(time.Second))
	gone("after the return and collection", slices.Concat(first, second), []string{"keep"})
	for _, k := range second {
		if _, _, err := sc.GetManifestVersions(ctx(t), xAddr, bucket, k); !errors.Is(err, shardrpc.ErrNotFound) {
			t.Fatalf("the returned server still holds a version of %s: %v", k, err)
		}
	}
	o, err := c.GetObject(ctx(t), bucket, "keep", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(o)
	o.Close()
	if err != nil || !bytes.Equal(got, value("keep", 0)) {
		t.Fatalf("GET keep: %d bytes, %v", len(got), err)
	}
}
