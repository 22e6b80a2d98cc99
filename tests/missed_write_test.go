package tests

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// A write that missed one server which never went away (a transient error
// there: no death, no return, so no peer ever asks for a full sync) must
// still be healed: the periodic sync of recent writes gives that server
// the manifest and rebuilds its shard in place. The miss is simulated on
// a finished PUT by taking back the manifest and deleting the shard on one
// server of the placement, through its own shard API.
func TestWriteMissedByLiveServerIsHealed(t *testing.T) {
	e2e(t)
	d := startDev(t, "--sync-interval", "2s")
	l := newLifecycle(t, d)
	mustMakeBucket(t, l.c, "missed")
	// Gossip converging at start looks like peers coming back, and each
	// such return asks for a full sync, which would heal the miss too. Let
	// those rounds end, so only the periodic sync is left to find it.
	l.waitSyncsSettled(t)
	// A striped object, and a small one stored inline in its manifest
	// (the sync's walk reads manifests without their inline data, and
	// must still give the whole object).
	objs := []lifeObj{
		{bucket: "missed", key: "obj", size: 300<<10 + 11, seed: 41},
		{bucket: "missed", key: "small", size: 5<<10 + 3, seed: 42},
	}
	for _, o := range objs {
		l.putObj(t, o, "")
	}

	// Both misses are made at once, within the sync interval of the
	// writes: the periodic sync looks at a write once, an interval after
	// it was made.
	type miss struct {
		o    lifeObj
		m    *metadata.Manifest
		idx  int
		addr string
	}
	var misses []miss
	for _, o := range objs {
		m := l.manifest(t, o)
		if inline := len(m.Parts) == 0; inline != (o.key == "small") {
			t.Fatalf("%s: stored inline %v, the test needs one of each", o.key, inline)
		}
		idx := len(m.Placement) - 1 // not the first holder, which does the healing
		x := d.info.Shards[l.serverIndex()[m.Placement[idx]]].Addr
		if err := l.sc.AbortManifest(ctx(t), x, o.bucket, o.key, m.Version); err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Parts {
			if err := l.sc.DeleteShard(ctx(t), x, p.ID, idx); err != nil {
				t.Fatal(err)
			}
		}
		misses = append(misses, miss{o, m, idx, x})
	}
	for _, ms := range misses {
		if _, err := l.sc.GetManifest(ctx(t), ms.addr, ms.o.bucket, ms.o.key); !errors.Is(err, shardrpc.ErrNotFound) {
			t.Fatalf("%s: the simulated miss left server %s a manifest (err %v)", ms.o.key, ms.m.Placement[ms.idx], err)
		}
	}

	for _, ms := range misses {
		o, m, idx, x := ms.o, ms.m, ms.idx, ms.addr
		waitFor(t, 60*time.Second, o.key+": the server that missed the write to hold its manifest and shard again", func() bool {
			cur, err := l.sc.GetManifest(ctx(t), x, o.bucket, o.key)
			if err != nil || cur.Version != m.Version || !bytes.Equal(cur.Inline, m.Inline) {
				return false
			}
			for _, p := range m.Parts {
				info, err := l.sc.StatShard(ctx(t), x, p.ID, idx)
				if err != nil || info.CRC != p.ShardCRC[idx] {
					return false
				}
			}
			return true
		})
		if got := get(t, l.c, o.bucket, o.key, minio.GetObjectOptions{}); sha(got) != sha(o.data()) {
			t.Fatalf("%s differs after the heal", o.key)
		}
	}
}
