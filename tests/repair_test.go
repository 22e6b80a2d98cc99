package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// repairTotals sums the repair status of the shard servers still alive.
func repairTotals(t *testing.T, d *devCluster, dead map[int]bool) (degraded, done, failed int64) {
	t.Helper()
	c := shardrpc.New(d.info.Secret, nil)
	for i, s := range d.info.Shards {
		if dead[i] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := c.RepairStatus(ctx, s.Addr)
		cancel()
		if err != nil {
			t.Fatalf("repair status of shard %d: %v", i, err)
		}
		degraded += st.Stripes.Degraded
		done += st.Repair.Done
		failed += st.Repair.Failed
	}
	return degraded, done, failed
}

// Kill two shard servers of a dev cluster holding rs and clay objects:
// every object reads back byte-exact while the worker rebuilds, and the
// cluster ends fully redundant on the live servers.
func TestRepairAfterTwoKills(t *testing.T) {
	e2e(t)
	d := startDev(t, "--repair-grace", "2s")
	c := d.client(t)
	type obj struct {
		bucket, key string
		data        []byte
	}
	var objs []obj
	for _, b := range []struct{ name, class string }{{"repair-rs", "STANDARD"}, {"repair-clay", "STANDARD_IA"}} {
		mustMakeBucket(t, c, b.name)
		for i := range 15 {
			size := []int64{1000, 200 << 10, 1 << 20, 3<<20 + 17}[i%4]
			data := randomData(size, uint64(i*7+len(b.name)))
			key := fmt.Sprintf("obj-%02d", i)
			put(t, c, b.name, key, data, minio.PutObjectOptions{StorageClass: b.class, DisableMultipart: true})
			objs = append(objs, obj{b.name, key, data})
		}
	}
	check := func(when string) {
		for _, o := range objs {
			if got := get(t, c, o.bucket, o.key, minio.GetObjectOptions{}); sha(got) != sha(o.data) {
				t.Fatalf("%s: %s/%s differs", when, o.bucket, o.key)
			}
		}
	}
	dead := map[int]bool{2: true, 7: true}
	for i := range dead {
		d.killShard(i)
	}
	check("right after the kills")
	deadline := time.Now().Add(90 * time.Second)
	for {
		time.Sleep(time.Second)
		check("during repair")
		degraded, done, failed := repairTotals(t, d, dead)
		if failed > 0 {
			t.Fatalf("%d repairs failed", failed)
		}
		if degraded == 0 && done > 0 {
			t.Logf("repaired: %d jobs", done)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d degraded stripes after 90s (%d repairs done)", degraded, done)
		}
	}
	check("after repair")
}
