package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// returnBuckets are the buckets of the return tests: one per code family.
var returnBuckets = []struct{ name, class string }{{"ret-rs", "STANDARD"}, {"ret-clay", "STANDARD_IA"}}

// newLifecycle returns the shared helpers of the repair tests over d.
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

// waitDownSeen waits until every live repair worker has counted node id
// down in a scan, so that "nothing degraded" includes its shards.
func (l *lifecycle) waitDownSeen(t *testing.T, id string) {
	t.Helper()
	// NB: 90 s, not the scan interval: a scan that takes d waits at least
	// 4d before the next (repair's walkPace), and on a starved machine a
	// scan takes seconds (TestRepairSecondFailureDuringRepair's old flake:
	// 30 s ran out under load average 190 although gossip had declared
	// the server dead everywhere).
	waitFor(t, 90*time.Second, "every worker to count server "+id+" down", func() bool {
		for i, s := range l.d.info.Shards {
			if l.dead[i] {
				continue
			}
			st, err := l.sc.RepairStatus(context.Background(), s.Addr)
			if err != nil || !slices.Contains(st.Stripes.DownSeen, id) {
				return false
			}
		}
		return true
	})
}

// waitSyncsSettled waits until every live shard server took every other
// for live at its last scan and has no full manifest sync asked for and
// not yet done, and has done its start-up one. Gossip converging at start
// looks like peers coming back, and each such return asks for a full sync;
// once this holds those syncs are over (a scan's return asks, local and
// remote, are made before the scan's counts are published).
func (l *lifecycle) waitSyncsSettled(t *testing.T) {
	t.Helper()
	live := 0
	for i := range l.d.info.Shards {
		if !l.dead[i] {
			live++
		}
	}
	var last string
	waitFor(t, 90*time.Second, "the full manifest syncs of a start or a return to end", func() bool {
		for i, s := range l.d.info.Shards {
			if l.dead[i] {
				continue
			}
			st, err := l.sc.RepairStatus(context.Background(), s.Addr)
			if err != nil {
				last = fmt.Sprintf("server %d: %v", i, err)
				return false
			}
			if len(st.Stripes.UpSeen) != live || len(st.Stripes.DownSeen) != 0 || st.Sync.Full == 0 || st.Sync.Pending {
				last = fmt.Sprintf("server %d: %d up, %d down, sync %+v", i, len(st.Stripes.UpSeen), len(st.Stripes.DownSeen), st.Sync)
				return false
			}
		}
		return true
	})
	t.Logf("manifest syncs settled (last wait: %s)", last)
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
	e2e(t)
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
	if slices.Contains(before[gone.bucket+"/"+gone.key].Placement, xID) {
		m, err := l.sc.GetManifest(context.Background(), d.info.Shards[x].Addr, gone.bucket, gone.key)
		if err == nil && !m.Deleted {
			t.Errorf("server %d still holds deleted %s/%s at version %s", x, gone.bucket, gone.key, m.Version)
		}
	}
	l.readAll(t, "after the server came back", 1)

	// Again, back so quickly that the cluster may not even have seen it
	// die: its new boot time tells the others.
	args = d.shardArgs(x)
	l.kill(t, x)
	for i := 100; i < 106; i++ {
		write(i)
	}
	d.restartShard(x, args)
	delete(l.dead, x)
	l.waitWhole(t, 45*time.Second)
	if moved, failed := l.movedRepairs(t); moved+failed > 0 {
		t.Errorf("%d repairs moved shards and %d failed; none was due", moved, failed)
	}
	l.readAll(t, "after a quick restart", 1)
}

// A shard server that comes back after the repair grace finds its shards
// rebuilt elsewhere. It learns which (the newer manifests that no longer
// place it) and drops exactly those, and only once the new copies are
// durable: at every moment each object has all n verified shards on the
// servers its manifest names.
func TestRepairServerBackAfterGrace(t *testing.T) {
	e2e(t)
	d, l := startReturnCluster(t, 3)
	const x = 5
	held := l.shardsOn(t, x)
	args := d.shardArgs(x)
	l.kill(t, x)
	l.waitRebuiltElsewhere(t, x)

	d.restartShard(x, args)
	delete(l.dead, x)
	waitFor(t, 20*time.Second, "the gateway to see the server back", func() bool { return d.deadShards(t) == 0 })
	l.waitDropped(t, x, held)
}

// A shard server paused (SIGSTOP: a VM stall, a process starved of CPU)
// for longer than the grace is called dead; its shards are rebuilt
// elsewhere. When it runs again it has not restarted, and it may not have
// seen anyone die: it must still learn of the switches it missed (the
// peers that see it back ask it to sync), take the switched manifests and
// drop the shard files no longer placed on it.
func TestRepairServerPausedPastGrace(t *testing.T) {
	e2e(t)
	d, l := startReturnCluster(t, 2)
	const x = 7
	held := l.shardsOn(t, x)
	pid := d.info.Shards[x].PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	l.dead[x] = true
	l.waitRebuiltElsewhere(t, x)

	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	delete(l.dead, x)
	waitFor(t, 30*time.Second, "the gateway to see the server back", func() bool { return d.deadShards(t) == 0 })
	l.waitDropped(t, x, held)
}

// startReturnCluster starts a dev cluster with a short grace and GC delay,
// fills the return buckets with per objects of each of three sizes and
// waits until they are whole.
func startReturnCluster(t *testing.T, per int) (*devCluster, *lifecycle) {
	t.Helper()
	d := startDev(t, "--repair-grace", "3s", "--gc-delay", "2s")
	l := newLifecycle(t, d)
	l.fill(t, per, []int64{1000, 200 << 10, 1<<20 + 7})
	l.waitRepaired(t, 30*time.Second)
	return d, l
}

// waitRebuiltElsewhere waits, server x being gone, until every worker has
// counted it down and its shards are rebuilt: nothing is placed on it.
func (l *lifecycle) waitRebuiltElsewhere(t *testing.T, x int) {
	t.Helper()
	l.waitDownSeen(t, l.d.info.Shards[x].ID)
	l.waitRepaired(t, 60*time.Second)
	l.checkPlacement(t)
}

// shardRef names one shard file of a server.
type shardRef struct {
	file string
	idx  int
}

// shardsOn lists the shard files the objects' manifests place on server x.
func (l *lifecycle) shardsOn(t *testing.T, x int) []shardRef {
	t.Helper()
	var held []shardRef
	for _, o := range l.objects() {
		m := l.manifest(t, o)
		if idx := slices.Index(m.Placement, l.d.info.Shards[x].ID); idx >= 0 {
			for _, p := range m.Parts {
				held = append(held, shardRef{p.ID, idx})
			}
		}
	}
	if len(held) == 0 {
		t.Fatalf("server %d holds no shards", x)
	}
	return held
}

// waitDropped waits until server x, back after its shards were rebuilt
// elsewhere, has dropped every one of them (held) while the rebuilt
// copies stay whole, and holds the repaired manifest versions.
func (l *lifecycle) waitDropped(t *testing.T, x int, held []shardRef) {
	t.Helper()
	xAddr := l.d.info.Shards[x].Addr
	back := time.Now()
	deadline := time.Now().Add(45 * time.Second)
	for {
		// The rebuilt copies stay whole whatever x has dropped so far.
		if err := l.placementErr(true); err != nil {
			t.Fatalf("with server %d back: %v", x, err)
		}
		var kept []shardRef
		for _, r := range held {
			_, err := l.sc.StatShard(context.Background(), xAddr, r.file, r.idx)
			switch {
			case errors.Is(err, shardrpc.ErrNotFound):
			case err != nil:
				t.Fatalf("stat %s.%d on server %d: %v", r.file, r.idx, x, err)
			default:
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %d still holds %d of its %d shards that were rebuilt elsewhere, e.g. %v", x, len(kept), len(held), kept[0])
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("server %d dropped its %d rebuilt shards %s after it came back", x, len(held), time.Since(back).Round(100*time.Millisecond))

	st, err := l.sc.Stats(context.Background(), xAddr)
	if err != nil {
		t.Fatal(err)
	}
	if st.Shards != 0 {
		t.Errorf("server %d holds %d shard files, want none", x, st.Shards)
	}
	// It knows why: its manifests are the repaired versions.
	for _, o := range l.objects() {
		m := l.manifest(t, o)
		mx, err := l.sc.GetManifest(context.Background(), xAddr, o.bucket, o.key)
		if errors.Is(err, shardrpc.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if mx.Version != m.Version {
			t.Errorf("%s/%s: server %d holds version %s, the cluster %s", o.bucket, o.key, x, mx.Version, m.Version)
		}
	}
	l.readAll(t, "after the server came back", 1)
}

// A second server dies while the repair of a first one runs (slowed by
// --repair-rate): one that already took rebuilt shards and serves as
// helper and destination of the rest. The groups it touches are planned
// again, with the membership of the moment: those rebuilt onto it are
// repaired a second time, the others lose both shards at once. The
// repair completes without a failed job, and every object reads
// byte-exact with all n shards verified on live servers.
func TestRepairSecondFailureDuringRepair(t *testing.T) {
	e2e(t)
	d := startDev(t, "--repair-grace", "2s", "--repair-rate", "2000000", "--gc-delay", "2s")
	l := newLifecycle(t, d)
	l.fill(t, 6, []int64{1<<20 + 7, 600 << 10, 2000})
	l.waitRepaired(t, 30*time.Second)
	index := l.serverIndex()
	before := map[string]*metadata.Manifest{}
	for _, o := range l.objects() {
		before[o.bucket+"/"+o.key] = l.manifest(t, o)
	}

	const a = 2
	aID := d.info.Shards[a].ID
	l.kill(t, a)
	killed := time.Now()

	// The moment a first repair lands, kill a server it rebuilt onto: the
	// other servers' first repairs are running then, with it as helper or
	// destination.
	b := -1
	waitFor(t, 60*time.Second, "a first repair", func() bool {
		for i, s := range d.info.Shards {
			if l.dead[i] {
				continue
			}
			st, err := l.sc.RepairStatus(context.Background(), s.Addr)
			if err != nil {
				continue
			}
			for _, e := range st.Recent {
				bucket, key, _ := strings.Cut(e.Object, "/")
				m, err := l.sc.GetManifest(context.Background(), s.Addr, bucket, key)
				if e.Err != "" || err != nil {
					continue
				}
				for _, id := range m.Placement {
					// NB: a live server only: an event from before the
					// kill (membership flapped while filling) can come
					// with an older placement, even one naming server a.
					j, ok := index[id]
					if ok && !l.dead[j] && !slices.Contains(before[e.Object].Placement, id) {
						b = j
						return true
					}
				}
			}
		}
		return false
	})
	bID := d.info.Shards[b].ID
	degraded, _, _ := repairTotals(t, d, l.dead)
	if degraded == 0 {
		t.Fatalf("the repair of server %d finished in %s, before a second failure could hit it; slow it down", a, time.Since(killed))
	}
	l.kill(t, b)
	t.Logf("killed server %d %s after server %d, with %d groups still degraded", b, time.Since(killed).Round(100*time.Millisecond), a, degraded)
	switched := map[string]metadata.Version{} // rebuilt onto b: object -> version
	for _, o := range l.objects() {
		if m := l.manifest(t, o); slices.Contains(m.Placement, bID) && !slices.Contains(before[o.bucket+"/"+o.key].Placement, bID) {
			switched[o.bucket+"/"+o.key] = m.Version
		}
	}
	t.Logf("%d objects had shards rebuilt on it", len(switched))
	both := 0
	for _, o := range l.objects() {
		if m := l.manifest(t, o); slices.Contains(m.Placement, aID) && slices.Contains(m.Placement, bID) {
			both++
		}
	}
	t.Logf("%d objects lost shards on both servers", both)
	l.readAll(t, "with both servers dead", 2)

	l.waitDownSeen(t, bID)
	l.waitRepaired(t, 80*time.Second)
	t.Logf("repaired %s after the first kill", time.Since(killed).Round(100*time.Millisecond))
	// Repairs in flight when b died failed on it and ran again, planned
	// with the membership of the moment.
	hit := 0
	for i, s := range d.info.Shards {
		if l.dead[i] {
			continue
		}
		st, err := l.sc.RepairStatus(context.Background(), s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range st.Recent {
			if strings.Contains(e.Err, bID) {
				hit++
			}
		}
	}
	t.Logf("%d repair attempts failed on server %d and were planned again", hit, b)
	if hit == 0 {
		t.Errorf("no repair attempt involved server %d when it died: the test did not exercise a failure during repair", b)
	}
	l.checkPlacement(t)
	for ref, v := range switched {
		bucket, key, _ := strings.Cut(ref, "/")
		m := l.manifest(t, lifeObj{bucket: bucket, key: key})
		if !v.Less(m.Version) || slices.Contains(m.Placement, bID) {
			t.Errorf("%s: repaired onto server %d at %s, not again after it died (now %s on %v)", ref, b, v, m.Version, m.Placement)
		}
	}
	l.readAll(t, "after the repair", 1)
}
