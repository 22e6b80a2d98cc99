package repair

import (
	"fmt"
	"testing"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/metadata"
)

// Benchmarks of the repair worker's own CPU per job (issue 18): the
// queue, the enqueue path and the planner. Each reports cpu-ns per job
// (process CPU time, from cpuMeter) besides ns/op, since wall time means
// little on a machine shared with builds.

// BenchmarkPlanClay2 plans one part of a clay-10-4 group with two lost
// shards (two servers dead), what the worker does per part when it queues
// (estimate) and runs (repair) a job. "parsed" gets a fresh Code each time
// (the worker before codec.Cache: the CORE plan for the failure set was
// built on every call); "cached" gets it from one codec.Cache, as the
// worker does now, so the plan comes from the code's per-failure-set cache.
func BenchmarkPlanClay2(b *testing.B) {
	nodes := clusterN(16) // two to rebuild onto
	dead(nodes, "n03", "n07")
	in := func(c codec.Code) PlanInput {
		return PlanInput{Group: groupOf(c), Lost: []int{3, 7}, Nodes: nodes, Model: DefaultCostModel()}
	}
	plan := func(b *testing.B, get func() (codec.Code, error)) {
		c, err := get()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Plan(in(c)); err != nil {
			b.Fatal(err)
		}
	}
	run := func(b *testing.B, get func() (codec.Code, error)) {
		plan(b, get) // NB: the cache's first plan is not steady state
		m := startMeter()
		for b.Loop() {
			plan(b, get)
		}
		b.ReportMetric(m.seconds()*1e9/float64(b.N), "cpu-ns/op")
	}
	b.Run("parsed", func(b *testing.B) { run(b, func() (codec.Code, error) { return codec.Parse("clay-10-4") }) })
	var cache codec.Cache
	b.Run("cached", func(b *testing.B) { run(b, func() (codec.Code, error) { return cache.Get("clay-10-4") }) })
}

// BenchmarkEnqueuePop queues n repair jobs through the worker (each
// estimated with the planner, as a scan queues them) and pops them all.
// The cost per job must not grow with n.
func BenchmarkEnqueuePop(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			f := newFakeCluster(16)
			f.setState(3, cluster.StateDead)
			f.setState(7, cluster.StateDead)
			pl := make([]string, 14)
			for i := range pl {
				pl[i] = fmt.Sprintf("n%d", i)
			}
			f.local = &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: 1, Writer: "w"},
				Code: "clay-10-4", ChunkSize: 1 << 20, Placement: pl, Size: 64 << 20,
				Parts: []metadata.Part{{Number: 1, ID: "f1", Size: 64 << 20, ShardCRC: make([]uint32, 14)}}}
			var cpu float64
			for b.Loop() {
				b.StopTimer()
				w := newTestWorker(b, f, "n0")
				// NB: the code's first plan for the failure set (a long
				// lived worker has it) is not what a job costs.
				w.estimate(&job{bucket: "b", key: "warm", lost: []int{3, 7}})
				b.StartTimer()
				m := startMeter()
				for i := range n {
					w.enqueue(&job{bucket: "b", key: fmt.Sprint(i), lost: []int{3, 7}, prio: 2 + i%2})
				}
				for range n {
					if w.sched.pop() == nil {
						b.Fatal("queue ran dry")
					}
				}
				cpu += m.seconds()
			}
			b.ReportMetric(cpu*1e9/float64(b.N*n), "cpu-ns/job")
		})
	}
}
