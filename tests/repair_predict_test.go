package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// TestRepairPrediction is the acceptance run, too slow for every
// `go test` (set REGEN_REPAIR_DEMO=1; REGEN_REPAIR_DEMO_MIB sets the data
// volume, default 1024; REGEN_REPAIR_DEMO_READERS and _READ_PAUSE the GET
// load): a dev cluster with default settings holding
// mixed-size objects in rs and clay buckets loses two shard servers to
// kill -9. It reports the planner's prediction against the time the
// repair took, and fails if the cluster is not fully redundant within the
// prediction +25% or if any GET fails meanwhile.
func TestRepairPrediction(t *testing.T) {
	if os.Getenv("REGEN_REPAIR_DEMO") == "" {
		t.Skip("set REGEN_REPAIR_DEMO=1")
	}
	mib := int64(1024)
	fmt.Sscan(os.Getenv("REGEN_REPAIR_DEMO_MIB"), &mib)
	d := startDev(t)
	c := d.client(t)
	type obj struct {
		bucket, key string
		size        int64
		seed        uint64
	}
	var objs []obj
	sizes := []int64{100 << 10, 1 << 20, 4<<20 + 3, 16 << 20, 40 << 20}
	var total int64
	for i := 0; total < mib<<20; i++ {
		b := []string{"pred-rs", "pred-clay"}[i%2]
		objs = append(objs, obj{b, fmt.Sprintf("o-%04d", i), sizes[(i/2)%len(sizes)], uint64(i + 1)})
		total += sizes[(i/2)%len(sizes)]
	}
	mustMakeBucket(t, c, "pred-rs")
	mustMakeBucket(t, c, "pred-clay")
	t0 := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, o := range objs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			class := map[string]string{"pred-rs": "STANDARD", "pred-clay": "STANDARD_IA"}[o.bucket]
			data := randomData(o.size, o.seed)
			if _, err := c.PutObject(context.Background(), o.bucket, o.key, bytes.NewReader(data), o.size,
				minio.PutObjectOptions{StorageClass: class}); err != nil {
				t.Errorf("put %s/%s: %v", o.bucket, o.key, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("uploaded %d objects, %d MiB in %s", len(objs), total>>20, time.Since(t0).Round(time.Second))

	// Readers run through the whole repair: no GET may fail.
	var gets, getErrs atomic.Int64
	stop := make(chan struct{})
	var readers sync.WaitGroup
	nreaders := 2
	fmt.Sscan(os.Getenv("REGEN_REPAIR_DEMO_READERS"), &nreaders)
	// Each reader pauses between GETs (REGEN_REPAIR_DEMO_READ_PAUSE,
	// default 250ms: about 100 MB/s of verified reads in all). The
	// planner does not model foreground load; readers running flat out
	// take over half of this 2-core host and make it optimistic.
	readPause := 250 * time.Millisecond
	if p, err := time.ParseDuration(os.Getenv("REGEN_REPAIR_DEMO_READ_PAUSE")); err == nil {
		readPause = p
	}
	for r := range nreaders {
		readers.Go(func() {
			for i := r; ; i += 2 {
				select {
				case <-stop:
					return
				case <-time.After(readPause):
				}
				o := objs[(i*7)%len(objs)]
				rc, err := c.GetObject(context.Background(), o.bucket, o.key, minio.GetObjectOptions{})
				var got []byte
				if err == nil {
					got, err = io.ReadAll(rc)
					rc.Close()
				}
				gets.Add(1)
				if err != nil || !bytes.Equal(got, randomData(o.size, o.seed)) {
					getErrs.Add(1)
					t.Errorf("GET %s/%s during repair: %v", o.bucket, o.key, err)
				}
			}
		})
	}
	dead := map[int]bool{3: true, 8: true}
	sc0 := shardrpc.New(d.info.Secret, nil)
	var before int64 // repairs done before the kill (uploads under load leave some)
	for _, s := range d.info.Shards {
		if st, err := sc0.RepairStatus(context.Background(), s.Addr); err == nil {
			before += st.Repair.Done
		}
	}
	kill := time.Now()
	for i := range dead {
		d.killShard(i)
	}
	sc := shardrpc.New(d.info.Secret, nil)
	var started time.Time
	var busy0 float64
	// Every server predicts its own batch (from its first queued job to
	// its last one done); the cluster is redundant when the last batch
	// ends, so its predicted finish is the latest start + prediction.
	batches := map[string]time.Time{} // server/batch start -> predicted end
	var lastEnd time.Time             // the latest batch end seen
	var firstBatch time.Time
	noteBatch := func(id string, b *shardrpc.RepairBatch) {
		start, err := time.Parse(time.RFC3339Nano, b.Start)
		if err != nil || start.Before(kill) {
			return
		}
		batches[id+"/"+b.Start] = start.Add(time.Duration(b.Predicted * float64(time.Second)))
		if end := start.Add(time.Duration(b.Elapsed * float64(time.Second))); end.After(lastEnd) {
			lastEnd = end
		}
		if firstBatch.IsZero() || start.Before(firstBatch) {
			firstBatch = start
		}
	}
	stuck := false // the state of a slow repair was logged
	for {
		time.Sleep(500 * time.Millisecond)
		slow := !stuck && time.Since(kill) > 2*time.Minute
		var degraded, queued, running, done, failed int64
		seen := map[string]int{}
		var behind []string // workers that have not counted every dead server
		for i, s := range d.info.Shards {
			if dead[i] {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := sc.RepairStatus(ctx, s.Addr)
			cancel()
			if err != nil {
				t.Fatalf("status of shard %d: %v", i, err)
			}
			for _, id := range st.Stripes.DownSeen {
				seen[id]++
			}
			for j := range dead {
				if !slices.Contains(st.Stripes.DownSeen, d.info.Shards[j].ID) {
					behind = append(behind, fmt.Sprintf("shard %d: down_seen %v, last scan %s %s",
						i, st.Stripes.DownSeen, st.Stripes.Scanned, st.Stripes.ScanError))
					break
				}
			}
			for _, b := range []*shardrpc.RepairBatch{st.Batch, st.Last} {
				if b != nil {
					noteBatch(s.ID, b)
				}
			}
			if slow && (st.Stripes.Degraded > 0 || st.Repair.Queued+st.Repair.Running > 0) {
				t.Logf("still repairing after 2 minutes: shard %d: stripes %+v repair queued %d running %d done %d failed %d",
					i, st.Stripes, st.Repair.Queued, st.Repair.Running, st.Repair.Done, st.Repair.Failed)
				for _, e := range st.Recent[max(0, len(st.Recent)-4):] {
					t.Logf("   %s %s lost %v took %.2fs: %s", e.Object, e.Method, e.Lost, e.Seconds, e.Err)
				}
			}
			degraded += st.Stripes.Degraded
			queued += st.Repair.Queued
			running += st.Repair.Running
			done += st.Repair.Done
			failed += st.Repair.Failed
		}
		stuck = stuck || slow
		if started.IsZero() && queued+running+done-before > 0 {
			started = time.Now()
			busy0 = hostBusy()
		}
		counted := true // every live worker counted both dead servers
		for i := range dead {
			if seen[d.info.Shards[i].ID] < len(d.info.Shards)-len(dead) {
				counted = false
			}
		}
		if counted && degraded == 0 && done > before && queued+running == 0 {
			break
		}
		if time.Since(kill) > 15*time.Minute {
			t.Fatalf("not redundant after 15 minutes: %d degraded, %d queued, %d running, done %d (before %d); workers that counted each dead server: %v; behind: %v",
				degraded, queued, running, done, before, seen, behind)
		}
	}
	redundant := time.Now()
	busy := hostBusy() - busy0
	close(stop)
	readers.Wait()

	// The cluster's batch is the slowest server's: prediction and time
	// taken, from each server's first queued job to its last one done.
	var moved int64
	mix := map[string]int64{}
	for i, s := range d.info.Shards {
		if dead[i] {
			continue
		}
		st, err := sc.RepairStatus(context.Background(), s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if b := st.Last; b != nil {
			t.Logf("shard %d: %d jobs, predicted %.1fs, took %.1fs, %d MiB", i, b.Jobs, b.Predicted, b.Elapsed, b.Bytes>>20)
			if os.Getenv("REGEN_REPAIR_DEMO_V") != "" {
				for _, e := range st.Recent {
					t.Logf("   %s %s lost %v predicted %.2fs took %.2fs %d KiB", e.Object, e.Method, e.Lost, e.Predicted, e.Seconds, e.Bytes>>10)
				}
			}
		}
		moved += st.Repair.BytesMoved
		for m, n := range st.Repair.ByMethod {
			mix[m] += n
		}
		if st.Repair.Failed > 0 {
			t.Errorf("shard %d: %d repairs failed", i, st.Repair.Failed)
		}
	}
	if os.Getenv("REGEN_REPAIR_DEMO_V") != "" {
		logs, _ := filepath.Glob(filepath.Join(d.dir, "*", "shard.log"))
		for _, f := range logs[:min(2, len(logs))] {
			b, _ := os.ReadFile(f)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "calibrated") {
					t.Log(l)
				}
			}
		}
		if getErrs.Load() > 0 {
			b, _ := os.ReadFile(filepath.Join(d.dir, "gateway.log"))
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
					t.Log(l)
				}
			}
		}
	}
	// From the first batch's start to the last batch's end (the workers
	// clock them; the poll above only confirms it, up to a second late
	// under load), against the latest predicted batch end.
	var predictedEnd time.Time
	for _, end := range batches {
		if end.After(predictedEnd) {
			predictedEnd = end
		}
	}
	for _, s := range d.info.Shards { // the final Last batches
		if st, err := sc.RepairStatus(context.Background(), s.Addr); err == nil && st.Last != nil {
			noteBatch(s.ID, st.Last)
		}
	}
	elapsed := lastEnd.Sub(firstBatch).Seconds()
	predicted := predictedEnd.Sub(firstBatch).Seconds()
	t.Logf("kill -> fully redundant %.1fs (repair started %.1fs after the kill); repair took %.1fs, planner predicted %.1fs (ratio %.2f); moved %d MiB; methods %v; %d GETs, %d failed",
		redundant.Sub(kill).Seconds(), firstBatch.Sub(kill).Seconds(), elapsed, predicted, elapsed/predicted, moved>>20, mix, gets.Load(), getErrs.Load())
	t.Logf("host CPU busy %.1f core-seconds while repairing (%.0f%% of the host)", busy, 100*busy/elapsed/float64(runtime.NumCPU()))
	if elapsed > 1.25*predicted {
		t.Errorf("repair took %.1fs, more than the predicted %.1fs +25%%", elapsed, predicted)
	}
}

// hostBusy returns the host's busy CPU time in core-seconds (Linux;
// 0 elsewhere): what every process of the test used, repairs and reads.
func hostBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var busy float64
	for i, f := range strings.Fields(line)[1:] {
		var v float64
		fmt.Sscan(f, &v)
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy / 100 // USER_HZ
}
