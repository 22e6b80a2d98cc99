package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// returnBuckets are the buckets of the return tests: one per code family.
var returnBuckets = []struct{ name, class string }{{"ret-rs", "STANDARD"}, {"ret-clay", "STANDARD_IA"}}

// newLifecycle starts the shared helpers of the repair tests over d.
func newLifecycle(t *testing.T, d *devCluster) *lifecycle {
	return &lifecycle{d: d, c: d.client(t), sc: shardrpc.New(d.info.Secret, nil), dead: map[int]bool{}}
}

// putObj writes o (its bytes from its seed) and records it, replacing an
// earlier object of the same key.
func (l *lifecycle) putObj(t *testing.T, o lifeObj, class string) {
	t.Helper()
	if _, err := l.c.PutObject(context.Background(), o.bucket, o.key, bytes.NewReader(o.data()), o.size,
		minio.PutObjectOptions{StorageClass: class, DisableMultipart: true}); err != nil {
		t.Fatalf("PUT %s/%s: %v", o.bucket, o.key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.objs {
		if l.objs[i].bucket == o.bucket && l.objs[i].key == o.key {
			l.objs[i] = o
			return
		}
	}
	l.objs = append(l.objs, o)
}

// fill writes per objects of each size into every return bucket.
func (l *lifecycle) fill(t *testing.T, per int, sizes []int64) {
	t.Helper()
	for bi, b := range returnBuckets {
		mustMakeBucket(t, l.c, b.name)
		for i := range per * len(sizes) {
			l.putObj(t, lifeObj{b.name, fmt.Sprintf("obj-%02d", i), sizes[i%len(sizes)], uint64(1000*bi + i)}, b.class)
		}
	}
}

// movedRepairs sums, over the live servers, the repair jobs that moved
// shards to other servers (done, not in place) and those that failed.
func (l *lifecycle) movedRepairs(t *testing.T) (moved, failed int64) {
	t.Helper()
	for i, s := range l.d.info.Shards {
		if l.dead[i] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := l.sc.RepairStatus(ctx, s.Addr)
		cancel()
		if err != nil {
			t.Fatalf("repair status of shard %d: %v", i, err)
		}
		moved += st.Repair.Done - st.Repair.InPlace
		failed += st.Repair.Failed
	}
	return moved, failed
}

// waitWhole waits until every object has all its shards, verified, and
// its manifest on the servers its newest manifest names.
func (l *lifecycle) waitWhole(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := l.placementErr(true)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, not every object is whole: %v", timeout, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// serverIndex maps node IDs to dev.json's shard indexes.
func (l *lifecycle) serverIndex() map[string]int {
	out := map[string]int{}
	for i, s := range l.d.info.Shards {
		out[s.ID] = i
	}
	return out
}

// A shard server that is gone for less than the repair grace keeps its
// shards: nothing is rebuilt elsewhere and no manifest is switched. What
// it missed meanwhile is healed once it is back: objects written while the
// gateway still counted it alive (placed on it, but its shard and manifest
// never written), overwrites and deletes. In the end every object has all
// n shards, verified, on the servers its manifest names, and each of those
// servers holds that manifest.
func TestRepairServerBackWithinGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	const grace = 30 * time.Second
	d := startDev(t, "--repair-grace", grace.String(), "--gc-delay", "2s")
	l := newLifecycle(t, d)
	sizes := []int64{1000, 200 << 10, 1<<20 + 7}
	l.fill(t, 3, sizes)
	l.waitRepaired(t, 30*time.Second)

	const x = 3
	xID := d.info.Shards[x].ID
	before := map[string]*metadata.Manifest{}
	for _, o := range l.objects() {
		before[o.bucket+"/"+o.key] = l.manifest(t, o)
	}
	args := d.shardArgs(x)
	l.kill(t, x)
	killed := time.Now()

	// Writes while x is gone: at once (the gateway still counts x alive
	// and places shards on it), and after the cluster noticed.
	touched := map[string]bool{}
	write := func(i int) {
		b := returnBuckets[i%2]
		key := fmt.Sprintf("new-%02d", i)
		if i%3 == 0 {
			key = fmt.Sprintf("obj-%02d", i%(3*len(sizes))) // an overwrite
		}
		l.putObj(t, lifeObj{b.name, key, sizes[i%len(sizes)], uint64(50000 + i)}, b.class)
		touched[b.name+"/"+key] = true
	}
	i := 0
	for ; i < 12; i++ {
		write(i)
	}
	waitFor(t, 20*time.Second, "the gateway to see the server dead", func() bool { return d.deadShards(t) == 1 })
	for ; i < 18; i++ {
		write(i)
	}
	// A delete while x is gone.
	gone := l.objects()[1]
	if gone.key != "obj-01" || touched[gone.bucket+"/"+gone.key] {
		t.Fatalf("object 1 is %s/%s", gone.bucket, gone.key)
	}
	if err := l.c.RemoveObject(context.Background(), gone.bucket, gone.key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.objs = slices.DeleteFunc(l.objs, func(o lifeObj) bool { return o == gone })
	l.mu.Unlock()

	// Objects placed on x whose write x missed.
	missed := 0
	for _, o := range l.objects() {
		if m := l.manifest(t, o); touched[o.bucket+"/"+o.key] && slices.Contains(m.Placement, xID) {
			missed++
		}
	}
	t.Logf("%d writes while server %d was gone placed a shard on it", missed, x)

	d.restartShard(x, args)
	delete(l.dead, x)
	if away := time.Since(killed); away > grace-8*time.Second {
		t.Fatalf("server %d was away %s, too close to the %s grace for this test to mean anything", x, away.Round(time.Second), grace)
	}
	waitFor(t, 20*time.Second, "the gateway to see the server back", func() bool { return d.deadShards(t) == 0 })
	t.Logf("server %d back after %s", x, time.Since(killed).Round(100*time.Millisecond))

	l.waitWhole(t, 45*time.Second)
	t.Logf("healed %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	if time.Since(killed) >= grace {
		t.Errorf("healing took past the grace (%s): a repair may have run", grace)
	}

	// Nothing was rebuilt elsewhere: no repair switched a manifest, and
	// every object not written meanwhile keeps its placement.
	for _, o := range l.objects() {
		ref := o.bucket + "/" + o.key
		m := l.manifest(t, o)
		if strings.HasPrefix(m.Version.Writer, "repair-") {
			t.Errorf("%s: switched by a repair (version %s)", ref, m.Version)
		}
		if b := before[ref]; b != nil && !touched[ref] && !slices.Equal(b.Placement, m.Placement) {
			t.Errorf("%s: placement %v, was %v", ref, m.Placement, b.Placement)
		}
	}
	if moved, failed := l.movedRepairs(t); moved+failed > 0 {
		t.Errorf("%d repairs moved shards and %d failed; none was due", moved, failed)
	}
	if _, err := l.c.StatObject(context.Background(), gone.bucket, gone.key, minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
		t.Errorf("deleted %s/%s: %v", gone.bucket, gone.key, err)
	}
	m, err := l.sc.GetManifest(context.Background(), d.info.Shards[x].Addr, gone.bucket, gone.key)
	if errors.Is(err, shardrpc.ErrNotFound) || err == nil && m.Deleted {
		err = nil
	} else if err == nil {
		err = fmt.Errorf("version %s is not deleted", m.Version)
	}
	if err != nil && before[gone.bucket+"/"+gone.key] != nil && slices.Contains(before[gone.bucket+"/"+gone.key].Placement, xID) {
		t.Errorf("server %d still has deleted %s/%s: %v", x, gone.bucket, gone.key, err)
	}
	l.readAll(t, "after the server came back", 1)
}
