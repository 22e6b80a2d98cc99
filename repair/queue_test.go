package repair

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestJobQueueOrder: the queue pops what the linear scan it replaced
// popped (the highest prio among due jobs, the earliest pushed among
// equals, nothing not yet due), over random pushes, pops and clock steps.
func TestJobQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	t0 := time.Unix(1000, 0)
	for round := range 200 {
		var q jobQueue
		var ref []*job // the old queue: a slice in push order
		now := t0
		refPop := func() *job {
			best := -1
			for i, j := range ref {
				if j.notBefore.After(now) {
					continue
				}
				if best < 0 || j.prio > ref[best].prio {
					best = i
				}
			}
			if best < 0 {
				return nil
			}
			j := ref[best]
			ref = append(ref[:best:best], ref[best+1:]...)
			return j
		}
		for step := range 300 {
			switch r := rng.IntN(10); {
			case r < 5:
				j := &job{key: "k", prio: rng.IntN(4)}
				if rng.IntN(3) == 0 {
					j.notBefore = now.Add(time.Duration(rng.IntN(5)) * time.Second)
				}
				q.push(j, now)
				ref = append(ref, j)
			case r < 9:
				want, got := refPop(), q.pop(now)
				if want != got {
					t.Fatalf("round %d step %d: popped %+v, want %+v", round, step, got, want)
				}
			default:
				now = now.Add(time.Duration(rng.IntN(3)) * time.Second)
			}
			if q.len() != len(ref) || len(q.jobs()) != len(ref) {
				t.Fatalf("round %d step %d: %d queued, want %d", round, step, q.len(), len(ref))
			}
		}
	}
}

// BenchmarkJobQueue: push then pop n jobs; the cost per job grows with
// log n, not n.
func BenchmarkJobQueue(b *testing.B) {
	now := time.Unix(1000, 0)
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			m := startMeter()
			for b.Loop() {
				var q jobQueue
				for i := range n {
					q.push(&job{prio: i % 4}, now)
				}
				for q.pop(now) != nil {
				}
			}
			b.ReportMetric(m.seconds()*1e9/float64(b.N*n), "cpu-ns/job")
		})
	}
}
