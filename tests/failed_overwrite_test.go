package tests

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// A write that reaches only some of an object's servers (its gateway died)
// must never cost the version acknowledged before it. The failed write is
// simulated by storing a manifest straight on 4 of the 9 placement servers,
// as a gateway crashing after its fourth manifest write would leave it.
func TestAcknowledgedSurvivesFailedOverwrite(t *testing.T) {
	const gcDelay, rollbackAfter = 2 * time.Second, 10 * time.Second
	d := startDev(t, "--shards", "9", "--gc-delay", gcDelay.String(), "--rollback-after", rollbackAfter.String())
	c := d.client(t)
	rpc := shardrpc.New(d.info.Secret, nil)
	addrOf := map[string]string{}
	for _, s := range d.info.Shards {
		addrOf[s.ID] = s.Addr
	}
	mustMakeBucket(t, c, "acked")
	// The repair worker's manifest anti-entropy (repair/worker_sync.go)
	// hands on only versions a write quorum holds, so it leaves the
	// simulated failed writes below (4 of 9 holders, quorum 7) where they
	// are: only the rollback this test is about may remove them.

	// manifestOf reads the current manifest of key from any server holding it.
	manifestOf := func(key string) *metadata.Manifest {
		t.Helper()
		for _, s := range d.info.Shards {
			if m, err := rpc.GetManifest(ctx(t), s.Addr, "acked", key); err == nil {
				return m
			}
		}
		t.Fatalf("no server holds a manifest of %s", key)
		return nil
	}
	// failedWrite stores a newer version of m, with shards that were never
	// written, on the first four servers of its placement.
	failedWrite := func(m *metadata.Manifest, ts int64) *metadata.Manifest {
		t.Helper()
		f := *m
		f.Version = metadata.Version{TS: ts, Writer: "crashed-gateway"}
		f.ETag = "failed"
		f.Parts = []metadata.Part{m.Parts[0]}
		f.Parts[0].ID = fmt.Sprintf("failed%d", ts)
		for _, id := range f.Placement[:4] {
			if _, _, err := rpc.PutManifest(ctx(t), addrOf[id], &f); err != nil {
				t.Fatal(err)
			}
		}
		return &f
	}
	// intact checks that key reads back byte-exact, is listed with its
	// ETag, and that every server of m's placement still has its shard.
	intact := func(phase, key string, data []byte, m *metadata.Manifest) {
		t.Helper()
		if got := get(t, c, "acked", key, minio.GetObjectOptions{}); sha(got) != sha(data) {
			t.Fatalf("%s: %s differs", phase, key)
		}
		listed := false
		for o := range c.ListObjects(ctx(t), "acked", minio.ListObjectsOptions{Prefix: key}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			listed = listed || (o.Key == key && o.ETag == m.ETag && o.Size == m.Size)
		}
		if !listed {
			t.Fatalf("%s: %s not listed as the acknowledged version", phase, key)
		}
		for idx, id := range m.Placement {
			if _, err := rpc.StatShard(ctx(t), addrOf[id], m.Parts[0].ID, idx); err != nil {
				t.Fatalf("%s: shard %d of %s on %s: %v", phase, idx, key, id, err)
			}
		}
	}
	// rolledBack reports whether no server holds v any more.
	rolledBack := func(key string, v metadata.Version) bool {
		for _, s := range d.info.Shards {
			cur, prev, err := rpc.GetManifestVersions(ctx(t), s.Addr, "acked", key)
			if errors.Is(err, shardrpc.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range append(prev, cur) {
				if m.Version == v {
					return false
				}
			}
		}
		return true
	}

	// Scenario 1: v1 acknowledged on all nine; an overwrite reaches four.
	v1 := randomData(2<<20+17, 1)
	put(t, c, "acked", "overwritten", v1, minio.PutObjectOptions{DisableMultipart: true})
	m1 := manifestOf("overwritten")
	f1 := failedWrite(m1, m1.Version.TS+1)

	// Scenario 2: a newer write B reaches four servers first, then the
	// older write A (a concurrent PUT) reaches all nine and is acknowledged:
	// the four already holding B answer "not stored", which counts.
	put(t, c, "acked", "raced", randomData(1<<20, 2), minio.PutObjectOptions{DisableMultipart: true})
	fB := failedWrite(manifestOf("raced"), time.Now().Add(time.Hour).UnixNano())
	a := randomData(3<<20+5, 3)
	put(t, c, "acked", "raced", a, minio.PutObjectOptions{DisableMultipart: true})
	mA := manifestOf("raced")
	if mA.ETag == "failed" {
		mA = nil
		for _, id := range fB.Placement[4:] {
			if mA, _ = rpc.GetManifest(ctx(t), addrOf[id], "acked", "raced"); mA != nil {
				break
			}
		}
	}

	intact("right after the failed writes", "overwritten", v1, m1)
	intact("right after the failed writes", "raced", a, mA)
	// Past the GC delay and a few GC rounds (every 5 s), but before the
	// rollback: the replaced versions are unconfirmed, so nothing is
	// collected.
	time.Sleep(gcDelay + 6*time.Second)
	intact("after the GC delay", "overwritten", v1, m1)
	intact("after the GC delay", "raced", a, mA)

	// After RollbackAfter the failed versions are undone everywhere.
	waitFor(t, 45*time.Second, "the failed writes to be rolled back", func() bool {
		return rolledBack("overwritten", f1.Version) && rolledBack("raced", fB.Version)
	})
	intact("after the rollback", "overwritten", v1, m1)
	intact("after the rollback", "raced", a, mA)
}
