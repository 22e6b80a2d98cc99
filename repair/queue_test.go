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

// TestJobQueuePopWith: popWith takes the jobs it accepts from the front
// of the queue, most endangered first, up to its limits, and the jobs it
// passes over are popped afterwards in the order they had.
func TestJobQueuePopWith(t *testing.T) {
	now := time.Unix(1000, 0)
	var q jobQueue
	for i := range 10 {
		j := &job{key: fmt.Sprintf("k%d", i), prio: 1, inline: i%3 != 0}
		if i == 9 {
			j.prio = 2 // most endangered: first
		}
		q.push(j, now)
	}
	inline := func(j *job) bool { return j.inline }
	got := q.popWith(now, 3, 100, inline)
	// NB: k9 (prio 2) is not inline; then k1, k2, k4 in push order.
	if keys := jobKeys(got); keys != "k1 k2 k4" {
		t.Fatalf("took %s, want k1 k2 k4", keys)
	}
	if got := q.popWith(now, 10, 4, inline); jobKeys(got) != "k5" {
		t.Fatalf("looking at 4 jobs took %s, want k5 (k9, k0 and k3 are passed over)", jobKeys(got))
	}
	var rest []*job
	for j := q.pop(now); j != nil; j = q.pop(now) {
		rest = append(rest, j)
	}
	if keys := jobKeys(rest); keys != "k9 k0 k3 k6 k7 k8" {
		t.Fatalf("then popped %s, want k9 k0 k3 k6 k7 k8", keys)
	}
}

func jobKeys(js []*job) string {
	s := ""
	for i, j := range js {
		if i > 0 {
			s += " "
		}
		s += j.key
	}
	return s
}
