package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/gateway"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// admin runs `regen admin ARGS` against d and returns its output.
func (d *devCluster) admin(t testing.TB, args ...string) (string, error) {
	t.Helper()
	args = append([]string{"admin"}, args...)
	args = append(args, "--endpoint", d.info.Endpoint, "--access-key", d.info.AccessKey, "--secret-key", d.info.SecretKey)
	out, err := exec.Command(regenBin, args...).CombinedOutput()
	return string(out), err
}

// status is the gateway's admin status.
func (d *devCluster) status(t testing.TB) gateway.Status {
	t.Helper()
	out, err := exec.Command(regenBin, "admin", "status", "--json", "--endpoint", d.info.Endpoint,
		"--access-key", d.info.AccessKey, "--secret-key", d.info.SecretKey).Output()
	if err != nil {
		t.Fatalf("regen admin status: %v", err)
	}
	var st gateway.Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("regen admin status --json: %v\n%s", err, out)
	}
	return st
}

func nodeOf(st gateway.Status, id string) gateway.NodeStatus {
	for _, n := range st.Nodes {
		if n.ID == id {
			return n
		}
	}
	return gateway.NodeStatus{}
}

// Drain a shard server of a cluster holding rs and clay objects (inline,
// striped, multipart) while clients read: every read succeeds, new
// objects avoid it, shards move by copy (one that fails, because the
// drained server's file is corrupt, is rebuilt from the others instead),
// and once the admin API says it holds nothing it is killed -9 and every
// object still reads back byte-exact with nothing degraded.
func TestDrain(t *testing.T) {
	e2e(t)
	// NB: no scrubbing, so the corrupt shard below is found by the drain.
	d := startDev(t, "--gc-delay", "2s", "--scrub-rate", "0")
	c := d.client(t)
	type obj struct {
		bucket, key string
		data        []byte
	}
	var objs []obj
	for _, b := range []struct{ name, class string }{{"drain-rs", "STANDARD"}, {"drain-clay", "STANDARD_IA"}} {
		mustMakeBucket(t, c, b.name)
		for i := range 12 {
			size := []int64{1000, 200 << 10, 1 << 20, 3<<20 + 17}[i%4]
			data := randomData(size, uint64(i*13+len(b.name)))
			key := fmt.Sprintf("obj-%02d", i)
			put(t, c, b.name, key, data, minio.PutObjectOptions{StorageClass: b.class, DisableMultipart: true})
			objs = append(objs, obj{b.name, key, data})
		}
		data := randomData(11<<20+5, uint64(len(b.name)))
		put(t, c, b.name, "multipart", data, minio.PutObjectOptions{StorageClass: b.class, PartSize: 5 << 20})
		objs = append(objs, obj{b.name, "multipart", data})
	}
	check := func(when string) error {
		for _, o := range objs {
			rc, err := c.GetObject(context.Background(), o.bucket, o.key, minio.GetObjectOptions{})
			if err != nil {
				return fmt.Errorf("%s: GET %s/%s: %w", when, o.bucket, o.key, err)
			}
			var buf bytes.Buffer
			_, err = buf.ReadFrom(rc)
			rc.Close()
			if err != nil || !bytes.Equal(buf.Bytes(), o.data) {
				return fmt.Errorf("%s: GET %s/%s: wrong bytes or error %v", when, o.bucket, o.key, err)
			}
		}
		return nil
	}

	// Drain the server holding the most.
	st := d.status(t)
	victim, held := -1, int64(0)
	for i, s := range d.info.Shards {
		if n := nodeOf(st, s.ID); n.Stats != nil && n.Stats.Shards+n.Stats.Inline > held {
			victim, held = i, n.Stats.Shards+n.Stats.Inline
		}
	}
	id := d.info.Shards[victim].ID
	t.Logf("draining shard %d (%s), holding %d", victim, id, held)
	// Its largest shard file rots: the copy of that one fails on the
	// checksum and the worker falls back to rebuilding it.
	var rotten string
	var size int64
	filepath.Walk(filepath.Join(d.info.Shards[victim].Data, "shards"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && fi.Size() > size {
			rotten, size = p, fi.Size()
		}
		return nil
	})
	f, err := os.OpenFile(rotten, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, 1000)
	b[0] ^= 0xff
	f.WriteAt(b, 1000)
	f.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := check("during the drain"); err != nil {
				readErr = err
				return
			}
		}
	})
	if out, err := d.admin(t, "drain", id, "--no-wait"); err != nil {
		t.Fatalf("regen admin drain --no-wait: %v\n%s", err, out)
	}
	if n := nodeOf(d.status(t), id); !n.Draining {
		t.Fatalf("the status does not show %s draining: %+v", id, n)
	}
	// A new object goes elsewhere.
	fresh := randomData(2<<20, 99)
	put(t, c, "drain-rs", "written-during-drain", fresh, minio.PutObjectOptions{DisableMultipart: true})
	objs = append(objs, obj{"drain-rs", "written-during-drain", fresh})
	sc := shardrpc.New(d.info.Secret, nil)
	for i, s := range d.info.Shards {
		if i == victim {
			continue
		}
		m, err := sc.GetManifest(ctx(t), s.Addr, "drain-rs", "written-during-drain")
		if err != nil {
			continue
		}
		if slices.Contains(m.Placement, id) {
			t.Fatalf("an object written while %s drains was placed on it: %v", id, m.Placement)
		}
		break
	}

	// The CLI watches until the node holds nothing.
	out, err := d.admin(t, "drain", id, "--watch", "--timeout", "4m")
	close(stop)
	wg.Wait()
	t.Logf("regen admin drain --watch:\n%s", strings.ReplaceAll(out, "\r", "\n"))
	if err != nil || !strings.Contains(out, "holds no shards") || !strings.Contains(out, "100%") {
		t.Fatalf("regen admin drain --watch: %v", err)
	}
	if readErr != nil {
		t.Fatal(readErr)
	}
	st = d.status(t)
	if n := nodeOf(st, id); n.Stats == nil || n.Stats.Shards != 0 || n.Stats.Inline != 0 {
		t.Fatalf("after the drain the status shows %s with %+v", id, n.Stats)
	}
	if st.Repair == nil || st.Repair.Methods["copy"] == 0 {
		t.Fatalf("no shard was moved by copy: %+v", st.Repair)
	}
	// The workers' counts follow at their next scans. A stripe counts as
	// degraded only while a server of its placement is down or suspect in
	// gossip: on a starved machine gossip wrongly calls live servers dead
	// for a while (TestDrain's old flake: 176 such verdicts in one run
	// under load average 190, and the count asserted at once), so the
	// degraded count must reach zero, not be zero at one instant.
	waitFor(t, 90*time.Second, "the workers to count no stripe to move and none degraded", func() bool {
		st = d.status(t)
		return st.Stripes != nil && st.Stripes.Draining == 0 && st.Stripes.Degraded == 0
	})
	logs, _ := filepath.Glob(filepath.Join(d.dir, "*", "shard.log"))
	fellBack := false
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		fellBack = fellBack || strings.Contains(string(b), "drain: copy failed, rebuilding the shards instead")
	}
	if !fellBack {
		t.Fatalf("no worker rebuilt the corrupt shard %s instead of copying it", rotten)
	}

	d.killShard(victim)
	if err := check("right after kill -9 of the drained server"); err != nil {
		t.Fatal(err)
	}
	// Once every repair worker has seen it dead, nothing counts as
	// degraded: it held no shard. (Reaching zero rather than being zero
	// at once, as above: another server may be wrongly suspected for a
	// while on a starved machine.)
	waitFor(t, 90*time.Second, "the workers to count the killed server, and nothing degraded", func() bool {
		st = d.status(t)
		return st.Stripes != nil && slices.Contains(st.Stripes.DownSeen, id) && st.Stripes.Degraded == 0 && st.Stripes.LostShards == 0
	})
	if err := check("after the workers counted the drained server dead"); err != nil {
		t.Fatal(err)
	}
}

// With nine servers and a 6+3 code every server holds a shard of every
// stripe: a drained one has nowhere to send them. Its stripes are shown
// waiting for capacity, it keeps its shards, and cancelling ends it.
func TestDrainWaitsForCapacity(t *testing.T) {
	e2e(t)
	d := startDev(t, "--shards", "9")
	c := d.client(t)
	mustMakeBucket(t, c, "full")
	for i := range 4 {
		put(t, c, "full", fmt.Sprintf("o%d", i), randomData(300<<10, uint64(i)), minio.PutObjectOptions{DisableMultipart: true})
	}
	id := d.info.Shards[0].ID
	if out, err := d.admin(t, "drain", id, "--no-wait"); err != nil {
		t.Fatalf("regen admin drain --no-wait: %v\n%s", err, out)
	}
	waitFor(t, 60*time.Second, "the drain's stripes to wait for capacity", func() bool {
		st := d.status(t)
		return st.Stripes != nil && st.Stripes.DrainWaiting >= 4
	})
	st := d.status(t)
	if n := nodeOf(st, id); n.Stats == nil || n.Stats.Shards != 4 {
		t.Fatalf("the drained server should keep its 4 shards, status shows %+v", n.Stats)
	}
	out, err := d.admin(t, "drain", id, "--watch", "--timeout", "3s")
	if err == nil || !strings.Contains(out, "wait for capacity") {
		t.Fatalf("drain --watch with nowhere to go: %v\n%s", err, out)
	}
	if out, err := d.admin(t, "drain", id, "--cancel"); err != nil {
		t.Fatalf("regen admin drain --cancel: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "the cancelled drain to clear", func() bool {
		st := d.status(t)
		return !nodeOf(st, id).Draining && st.Stripes != nil && st.Stripes.Draining == 0
	})
	for i := range 4 {
		if got := get(t, c, "full", fmt.Sprintf("o%d", i), minio.GetObjectOptions{}); !bytes.Equal(got, randomData(300<<10, uint64(i))) {
			t.Fatalf("o%d differs", i)
		}
	}
}
