package repair

import (
	"container/heap"
	"time"
)

// jobQueue holds the repairs waiting for a worker: the most endangered
// first (job.prio: missing shards), first come first served among equals,
// and jobs told to wait (job.notBefore) held back until their time. Push
// and pop cost O(log n): a failure that queues a million stripes must not
// spend its time choosing the next one (a linear scan per pop made a
// batch O(n²)).
//
// Not safe for concurrent use: the Worker's mu guards it.
type jobQueue struct {
	ready readyHeap // due now, by prio then seq
	later laterHeap // waiting, by notBefore
	seq   uint64
}

type queued struct {
	j   *job
	seq uint64
}

func (q *jobQueue) push(j *job, now time.Time) {
	q.seq++
	e := queued{j, q.seq}
	if j.notBefore.After(now) {
		heap.Push(&q.later, e)
		return
	}
	heap.Push(&q.ready, e)
}

// pop removes and returns the most endangered job that is due at now;
// nil when none is.
func (q *jobQueue) pop(now time.Time) *job {
	for len(q.later) > 0 && !q.later[0].j.notBefore.After(now) {
		heap.Push(&q.ready, heap.Pop(&q.later))
	}
	if len(q.ready) == 0 {
		return nil
	}
	return heap.Pop(&q.ready).(queued).j
}

// popWith removes and returns up to n due jobs that with accepts, from
// the front of the ready jobs (most endangered first), looking at no more
// than look of them: the jobs it passes over stay, in their order. It
// costs O(look log n), not a walk of the queue.
func (q *jobQueue) popWith(now time.Time, n, look int, with func(*job) bool) []*job {
	for len(q.later) > 0 && !q.later[0].j.notBefore.After(now) {
		heap.Push(&q.ready, heap.Pop(&q.later))
	}
	var out []*job
	var passed []queued
	for ; len(out) < n && look > 0 && len(q.ready) > 0; look-- {
		e := heap.Pop(&q.ready).(queued)
		if with(e.j) {
			out = append(out, e.j)
		} else {
			passed = append(passed, e)
		}
	}
	for _, e := range passed {
		heap.Push(&q.ready, e) // NB: with its seq: its place is kept
	}
	return out
}

func (q *jobQueue) len() int { return len(q.ready) + len(q.later) }

// nextDue is when the first held-back job falls due; false when none is
// held back.
func (q *jobQueue) nextDue() (time.Time, bool) {
	if len(q.later) == 0 {
		return time.Time{}, false
	}
	return q.later[0].j.notBefore, true
}

// jobs returns every queued job, in no particular order (for status and
// tests).
func (q *jobQueue) jobs() []*job {
	out := make([]*job, 0, q.len())
	for _, e := range q.ready {
		out = append(out, e.j)
	}
	for _, e := range q.later {
		out = append(out, e.j)
	}
	return out
}

// costs appends every queued job's cost to dst: what the status's
// estimate of the remaining time needs, without a copy of the jobs.
func (q *jobQueue) costs(dst []Cost) []Cost {
	for _, e := range q.ready {
		dst = append(dst, e.j.cost)
	}
	for _, e := range q.later {
		dst = append(dst, e.j.cost)
	}
	return dst
}

type readyHeap []queued

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(a, b int) bool {
	if h[a].j.prio != h[b].j.prio {
		return h[a].j.prio > h[b].j.prio
	}
	return h[a].seq < h[b].seq
}
func (h readyHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *readyHeap) Push(x any)   { *h = append(*h, x.(queued)) }
func (h *readyHeap) Pop() any     { return popLast((*[]queued)(h)) }

type laterHeap []queued

func (h laterHeap) Len() int { return len(h) }
func (h laterHeap) Less(a, b int) bool {
	if !h[a].j.notBefore.Equal(h[b].j.notBefore) {
		return h[a].j.notBefore.Before(h[b].j.notBefore)
	}
	return h[a].seq < h[b].seq
}
func (h laterHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *laterHeap) Push(x any)   { *h = append(*h, x.(queued)) }
func (h *laterHeap) Pop() any     { return popLast((*[]queued)(h)) }

func popLast(s *[]queued) any {
	old := *s
	e := old[len(old)-1]
	old[len(old)-1] = queued{}
	*s = old[:len(old)-1]
	return e
}
