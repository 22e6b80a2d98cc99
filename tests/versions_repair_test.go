package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// TestNoncurrentVersionsRepaired: a versioned bucket's old versions are
// rebuilt like current ones (issue 19). Three versions of some keys (one
// under a delete marker) are written; two servers of the first key's
// placement are killed; once admin status shows the repair done, two
// more servers of that placement are killed. Four servers of the old
// versions' placement are then gone, one more than rs-6-3 survives: every
// old version of that key reads back by version ID only from the shards
// the repair rebuilt elsewhere. Without their repair it answers 503.
func TestNoncurrentVersionsRepaired(t *testing.T) {
	e2e(t)
	d := startDev(t, "--repair-grace", "2s")
	c := d.client(t)
	const bucket = "history"
	mustMakeBucket(t, c, bucket)
	if err := c.EnableVersioning(ctx(t), bucket); err != nil {
		t.Fatal(err)
	}
	type version struct {
		key, id string
		data    []byte
	}
	var old []version // noncurrent versions
	keys := []string{"doc-0", "doc-1", "doc-2"}
	for ki, key := range keys {
		for v := range 3 {
			data := randomData(300<<10+int64(17*v+ki), uint64(100*ki+v)) // striped, not inline
			info := put(t, c, bucket, key, data, minio.PutObjectOptions{DisableMultipart: true})
			if info.VersionID == "" || info.VersionID == "null" {
				t.Fatalf("PUT %s answered version %q", key, info.VersionID)
			}
			if v < 2 || ki == 0 {
				old = append(old, version{key, info.VersionID, data})
			}
		}
	}
	// The first key's versions are all noncurrent, under a delete marker.
	if err := c.RemoveObject(ctx(t), bucket, keys[0], minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatObject(ctx(t), bucket, keys[0], minio.StatObjectOptions{}); err == nil {
		t.Fatalf("%s still has a current version after its delete marker", keys[0])
	}

	// Every version of the first key has the same placement (the key's
	// order, all servers up): its servers are the ones to kill.
	rpc := shardrpc.New(d.info.Secret, nil)
	index := map[string]int{}
	for i, s := range d.info.Shards {
		index[s.ID] = i
	}
	placement := func(server int, v version) []string {
		cx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cur, prev, err := rpc.GetManifestVersions(cx, d.info.Shards[server].Addr, bucket, v.key)
		if errors.Is(err, shardrpc.ErrNotFound) {
			return nil // not one of the key's servers
		}
		if err != nil {
			t.Fatalf("versions of %s on shard %d: %v", v.key, server, err)
		}
		for _, m := range append(prev, cur) {
			if m.VersionID == v.id && len(m.Parts) > 0 {
				return m.Placement
			}
		}
		return nil
	}
	var pl []string
	for i := range d.info.Shards {
		if pl = placement(i, old[0]); pl != nil {
			break
		}
	}
	if len(pl) != 9 {
		t.Fatalf("placement of %s's first version: %v, want 9 servers (rs-6-3)", keys[0], pl)
	}
	first := []int{index[pl[1]], index[pl[4]]}
	second := []int{index[pl[6]], index[pl[7]]}
	alive := func(i int) bool { return !slices.Contains(first, i) && !slices.Contains(second, i) }
	for _, v := range old[:3] {
		for i := range d.info.Shards {
			if !alive(i) {
				continue
			}
			if p := placement(i, v); p != nil && !slices.Equal(p, pl) {
				t.Fatalf("%s version %s is placed on %v, not %v", v.key, v.id, p, pl)
			}
		}
	}

	for _, i := range first {
		d.killShard(i)
	}
	waitFor(t, 60*time.Second, "the two killed servers to be dead", func() bool { return d.deadShards(t) == 2 })
	waitFor(t, 120*time.Second, "admin status to show the repair done", func() bool {
		st := d.status(t)
		s, r := st.Stripes, st.Repair
		if s == nil || r == nil {
			return false
		}
		for _, i := range first {
			if !slices.Contains(s.DownSeen, d.info.Shards[i].ID) {
				return false
			}
		}
		if r.Failed > 0 {
			t.Fatalf("%d repairs failed", r.Failed)
		}
		if s.Degraded == 0 && r.Done > 0 && r.Queued == 0 && r.Running == 0 {
			if s.Noncurrent == 0 {
				t.Errorf("admin status counts no stripe group of a noncurrent version: %+v", s)
			}
			return true
		}
		return false
	})
	// The old versions of the first key moved their two lost shards off
	// the killed servers. (Not fatal: the reads below say what it costs.)
	for _, v := range old[:3] {
		p := placement(index[pl[0]], v)
		if p == nil || slices.Contains(p, pl[1]) || slices.Contains(p, pl[4]) {
			t.Errorf("%s version %s is placed on %v after the repair; want the killed servers replaced", v.key, v.id, p)
		}
	}

	for _, i := range second {
		d.killShard(i)
	}
	for _, v := range old {
		got, err := getVersion(c, bucket, v.key, v.id)
		if err != nil {
			t.Errorf("GET %s version %s with four servers of its first placement down: %v", v.key, v.id, err)
			continue
		}
		if !bytes.Equal(got, v.data) {
			t.Errorf("GET %s version %s: %d bytes differ from the %d written", v.key, v.id, len(got), len(v.data))
		}
	}
	if t.Failed() {
		t.Logf("killed %v, then %v; placement %v", first, second, pl)
	}
}

// getVersion reads one version of a key whole.
func getVersion(c *minio.Client, bucket, key, id string) ([]byte, error) {
	cx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	obj, err := c.GetObject(cx, bucket, key, minio.GetObjectOptions{VersionID: id})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(obj); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return buf.Bytes(), nil
}
