package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/metadata"
)

// A shard server that was stopped while keys were overwritten and deleted
// is back in step after its restart, and the sync that brings it there
// costs calls in proportion to the keys that changed, not to the objects
// held (issue 18: every server's sync asked every peer about every
// object, a 20-45 s storm at each restart over 1,000 objects). The range
// digests (metadata/digest.go) let the servers find the few keys that
// differ.
func TestRestartSyncIsProportionalToChanges(t *testing.T) {
	e2e(t)
	const objects, overwrites, deletes = 2000, 20, 20
	// The grace outlasts the test: the stopped server's shards are not
	// rebuilt elsewhere, so only the sync changes its manifests.
	d := startDev(t, "--repair-grace", "30m")
	l := newLifecycle(t, d)
	const bucket = "antientropy"
	mustMakeBucket(t, l.c, bucket)
	key := func(i int) string { return fmt.Sprintf("p%02d/obj-%05d", i%50, i) }
	body := func(i, gen int) []byte { return bytes.Repeat([]byte{byte(i), byte(gen)}, 512) }
	var g errgroup.Group
	g.SetLimit(16)
	for i := range objects {
		g.Go(func() error {
			_, err := l.c.PutObject(context.Background(), bucket, key(i), bytes.NewReader(body(i, 0)), 1024, minio.PutObjectOptions{DisableMultipart: true})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	// NB: not waitSyncsSettled: on a loaded machine gossip flaps, and
	// every flap asks for a sync; a sync of servers in step makes no
	// calls, which is the point of this test.
	l.waitSyncedSince(t, nil, "")

	// Server x goes; the keys to change are among those it holds.
	const x = 0
	xs := d.info.Shards[x]
	var changed []int
	for i := 0; len(changed) < overwrites+deletes && i < objects; i++ {
		if m, err := l.sc.GetManifest(ctx(t), xs.Addr, bucket, key(i)); err == nil && slices.Contains(m.Placement, xs.ID) {
			changed = append(changed, i)
		}
	}
	if len(changed) < overwrites+deletes {
		t.Fatalf("server %s holds %d of the first keys, want %d", xs.ID, len(changed), overwrites+deletes)
	}
	before := l.syncCalls(t, x)
	args := d.shardArgs(x)
	d.killShard(x)
	l.dead[x] = true
	waitFor(t, 60*time.Second, "the gateway to see the server dead", func() bool { return d.deadShards(t) == 1 })
	for _, i := range changed[:overwrites] {
		if _, err := l.c.PutObject(ctx(t), bucket, key(i), bytes.NewReader(body(i, 1)), 1024, minio.PutObjectOptions{DisableMultipart: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range changed[overwrites:] {
		if err := l.c.RemoveObject(ctx(t), bucket, key(i), minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What x must hold once in step: the newest version the others hold.
	want := map[string]metadata.Version{}
	for _, i := range changed {
		var newest metadata.Version
		for j, s := range d.info.Shards {
			if j == x {
				continue
			}
			if m, err := l.sc.GetManifest(ctx(t), s.Addr, bucket, key(i)); err == nil && newest.Less(m.Version) {
				newest = m.Version
			}
		}
		want[key(i)] = newest
	}

	full := l.syncsDone(t)
	d.restartShard(x, args)
	l.dead[x] = false
	var last string
	waitFor(t, 180*time.Second, "the restarted server to hold the newest version of every changed key", func() bool {
		for _, i := range changed {
			m, err := l.sc.GetManifest(ctx(t), xs.Addr, bucket, key(i))
			if err != nil || m.Version != want[key(i)] {
				last = fmt.Sprintf("%s: err %v, want %v", key(i), err, want[key(i)])
				if err == nil {
					last = fmt.Sprintf("%s: %v, want %v", key(i), m.Version, want[key(i)])
				}
				return false
			}
		}
		return true
	})
	t.Logf("in step (last wait: %s)", last)
	l.waitSyncedSince(t, full, xs.ID)

	// (a) Correct: the overwrites read back, the deletes stay deleted, and
	// x holds a tombstone for each delete.
	for _, i := range changed[:overwrites] {
		if got := get(t, l.c, bucket, key(i), minio.GetObjectOptions{}); !bytes.Equal(got, body(i, 1)) {
			t.Errorf("%s: read back the old value after the restart", key(i))
		}
	}
	for _, i := range changed[overwrites:] {
		if m, err := l.sc.GetManifest(ctx(t), xs.Addr, bucket, key(i)); err != nil || !m.Deleted {
			t.Errorf("%s: server %s holds %+v (err %v), want its tombstone", key(i), xs.ID, m, err)
		}
		if _, err := l.c.StatObject(ctx(t), bucket, key(i), minio.StatObjectOptions{}); httpStatus(err) != 404 {
			t.Errorf("%s: HEAD after the restart: %v, want 404", key(i), err)
		}
	}
	// (b) Proportional: the calls every server's sync made to its peers,
	// since before the stop (the restarted server counts from zero).
	calls := l.syncCalls(t, -1) - before
	t.Logf("manifest calls by the syncs of the restart: %d, for %d changed keys of %d objects", calls, len(changed), objects)
	if limit := int64(30 * len(changed)); calls > limit {
		t.Errorf("the syncs made %d manifest calls for %d changed keys of %d objects; want at most %d", calls, len(changed), objects, limit)
	}
}

// syncsDone returns each live shard server's count of syncs done.
func (l *lifecycle) syncsDone(t *testing.T) map[int]int64 {
	t.Helper()
	out := map[int]int64{}
	for i, s := range l.d.info.Shards {
		if l.dead[i] {
			continue
		}
		st, err := l.sc.RepairStatus(ctx(t), s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = st.Sync.Full
	}
	return out
}

// waitSyncedSince waits until every live shard server has been seen with
// more syncs done than since gives it (nil: none), none asked for and not
// done, and server up (unless empty) live at its last scan; not
// necessarily all at the same moment.
func (l *lifecycle) waitSyncedSince(t *testing.T, since map[int]int64, up string) {
	t.Helper()
	done := map[int]bool{}
	var last string
	waitFor(t, 10*time.Minute, "every server to finish a sync", func() bool {
		for i, s := range l.d.info.Shards {
			if l.dead[i] || done[i] {
				continue
			}
			st, err := l.sc.RepairStatus(context.Background(), s.Addr)
			if err != nil {
				last = fmt.Sprintf("server %d: %v", i, err)
				return false
			}
			if st.Sync.Full <= since[i] || st.Sync.Pending || up != "" && !slices.Contains(st.Stripes.UpSeen, up) {
				last = fmt.Sprintf("server %d: sync %+v", i, st.Sync)
				return false
			}
			done[i] = true
		}
		return true
	})
	t.Logf("syncs done (last wait: %.300s)", last)
}

// syncCalls sums the manifest calls the sync rules made (repair status)
// over the shard servers, leaving out server skip (-1: none).
func (l *lifecycle) syncCalls(t *testing.T, skip int) int64 {
	t.Helper()
	var mu sync.Mutex
	var sum int64
	var g errgroup.Group
	for i, s := range l.d.info.Shards {
		if i == skip || l.dead[i] {
			continue
		}
		g.Go(func() error {
			st, err := l.sc.RepairStatus(ctx(t), s.Addr)
			if err != nil {
				return fmt.Errorf("repair status of shard %d: %w", i, err)
			}
			mu.Lock()
			sum += st.Sync.ManifestCalls
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestMeasureRestartSync measures how long a restarted shard server takes
// to be back in step with N objects in the cluster, and the manifest
// calls the servers answered meanwhile. It is a measurement, not a check:
// it runs only when REGEN_MEASURE_SYNC gives N, and REGEN_MEASURE_BIN may
// name another regen binary to measure (an older build, for comparison):
//
//	REGEN_MEASURE_SYNC=5000 go test -count=1 -v -run TestMeasureRestartSync ./tests
func TestMeasureRestartSync(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("REGEN_MEASURE_SYNC"))
	if n <= 0 {
		t.Skip("a measurement: set REGEN_MEASURE_SYNC to the number of objects")
	}
	e2e(t)
	if b := os.Getenv("REGEN_MEASURE_BIN"); b != "" {
		prev := regenBin
		regenBin = b
		t.Cleanup(func() { regenBin = prev })
	}
	d := startDev(t, "--repair-grace", "30m")
	l := newLifecycle(t, d)
	mustMakeBucket(t, l.c, "measure")
	t0 := time.Now()
	var g errgroup.Group
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			_, err := l.c.PutObject(context.Background(), "measure", fmt.Sprintf("p%03d/obj-%07d", i%100, i),
				bytes.NewReader(bytes.Repeat([]byte{byte(i)}, 1024)), 1024, minio.PutObjectOptions{DisableMultipart: true})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d objects written in %s", n, time.Since(t0).Round(time.Millisecond))
	l.waitSyncedSince(t, nil, "")

	const x = 0
	args := d.shardArgs(x)
	d.killShard(x)
	l.dead[x] = true
	waitFor(t, 60*time.Second, "the gateway to see the server dead", func() bool { return d.deadShards(t) == 1 })
	full := l.syncsDone(t)
	calls0 := l.servedManifestCalls(t)
	start := time.Now()
	d.restartShard(x, args)
	l.dead[x] = false
	// In step: every server has done a sync since it saw the return (the
	// restarted one: its first), and has none asked for and not done.
	l.waitSyncedSince(t, full, d.info.Shards[x].ID)
	took := time.Since(start)
	t.Logf("RESULT objects=%d restart_to_in_step=%s manifest_calls_served=%d", n, took.Round(time.Millisecond), l.servedManifestCalls(t)-calls0)
}

// servedManifestCalls sums, over the live shard servers' metrics, the
// manifest reads and writes and shard stats they answered.
func (l *lifecycle) servedManifestCalls(t *testing.T) int64 {
	t.Helper()
	var sum int64
	for i, s := range l.d.info.Shards {
		if l.dead[i] {
			continue
		}
		resp, err := http.Get("http://" + s.Addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "regen_shardserver_request_duration_seconds_count{") {
				continue
			}
			if !strings.Contains(line, `route="get_manifest"`) && !strings.Contains(line, `route="put_manifest"`) && !strings.Contains(line, `route="stat_shard"`) {
				continue
			}
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			sum += int64(v)
		}
	}
	return sum
}
