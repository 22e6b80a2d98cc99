package repair

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// The scheduler's bookkeeping of one job's outcomes: done, deferred
// (the object changed), retried after a doubling backoff, then failed;
// the job stays in flight (not queued twice) until it is over, and the
// batch ends with the last job, predicted.
func TestSchedulerOutcomes(t *testing.T) {
	errFail := errors.New("helper gone")
	for _, tc := range []struct {
		name    string
		errs    []error // the outcome of each run
		retries int
		want    shardrpc.RepairCounts
	}{
		{"done", []error{nil}, 2, shardrpc.RepairCounts{Done: 1}},
		{"deferred", []error{errRetryLater}, 2, shardrpc.RepairCounts{}},
		{"superseded", []error{ErrSuperseded}, 2, shardrpc.RepairCounts{}},
		{"retried then done", []error{errFail, errFail, nil}, 2, shardrpc.RepairCounts{Done: 1}},
		{"retried then failed", []error{errFail, errFail, errFail}, 2, shardrpc.RepairCounts{Failed: 1}},
		{"no retries", []error{errFail}, 0, shardrpc.RepairCounts{Failed: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			m, err := newMetrics(nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.Retries, cfg.Backoff = tc.retries, time.Second
			s := newScheduler(cfg, func() time.Time { return now }, m)
			j := &job{bucket: "b", key: "k", lost: []int{1}, cost: Cost{Seconds: 1, CPU: 1}}
			if !s.add(j, 1) || s.add(&job{bucket: "b", key: "k"}, 1) {
				t.Fatal("add: the first must be queued, the second (same object) not")
			}
			for run, e := range tc.errs {
				got := s.pop()
				if got != j {
					t.Fatalf("run %d: popped %v", run, got)
				}
				if s.idle() {
					t.Fatal("idle while a job runs")
				}
				requeued, ended := s.finish(context.Background(), j, Result{Method: PullRep, BytesMoved: 10}, e, 0.5, DefaultCostModel())
				last := run == len(tc.errs)-1
				if requeued == last {
					t.Fatalf("run %d: requeued %v", run, requeued)
				}
				if (ended != nil) != last || last && (ended.Jobs != 1 || ended.Predicted <= 0) {
					t.Fatalf("run %d: ended batch %+v", run, ended)
				}
				if !requeued {
					continue
				}
				backoff := time.Second << (j.attempt - 1)
				if j.attempt != run+1 || !j.notBefore.Equal(now.Add(backoff)) {
					t.Fatalf("run %d: attempt %d, not before %s", run, j.attempt, j.notBefore.Sub(now))
				}
				if s.pop() != nil {
					t.Fatalf("run %d: popped before its backoff", run)
				}
				now = now.Add(backoff)
			}
			if !s.idle() || s.busy(j.ref()) {
				t.Fatal("the job is still queued or in flight")
			}
			var st shardrpc.RepairStatus
			s.status(&st, DefaultCostModel())
			got := st.Repair
			if got.Done != tc.want.Done || got.Failed != tc.want.Failed || got.Queued != 0 || got.Running != 0 {
				t.Fatalf("counts %+v, want %+v", got, tc.want)
			}
			if st.Last == nil || st.Batch != nil || len(st.Recent) != len(tc.errs) {
				t.Fatalf("status: batch %+v, last %+v, %d recent", st.Batch, st.Last, len(st.Recent))
			}
			if !s.add(j, 1) {
				t.Fatal("a job over can be queued again")
			}
		})
	}
}

// Services and the status run concurrently without deadlock or data race
// (go test -race): jobs added, popped and finished while the status is
// read and host peers reported.
func TestSchedulerConcurrent(t *testing.T) {
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newScheduler(DefaultConfig(), time.Now, m)
	const n = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			s.add(&job{bucket: "b", key: fmt.Sprint(i)}, 0.5)
		}
	}()
	finished := 0
	for finished < n {
		j := s.pop()
		if j == nil {
			var st shardrpc.RepairStatus
			s.status(&st, DefaultCostModel())
			s.notePeers(map[string]float64{"n1": 1})
			continue
		}
		s.finish(context.Background(), j, Result{}, nil, 0, DefaultCostModel())
		finished++
	}
	<-done
	var st shardrpc.RepairStatus
	s.status(&st, DefaultCostModel())
	if st.Repair.Done != n || !s.idle() {
		t.Fatalf("done %d of %d, idle %v", st.Repair.Done, n, s.idle())
	}
}

// TestSchedulerWakesRunners: idle runners sleep until the first held-back
// job is due (idlePoll at most), and a burst of jobs wakes every runner,
// not one: pop passes the single wake signal on while jobs remain.
func TestSchedulerWakesRunners(t *testing.T) {
	now := time.Unix(1000, 0)
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newScheduler(DefaultConfig(), func() time.Time { return now }, m)
	if got := s.idleWait(); got != idlePoll {
		t.Errorf("empty queue: idle wait %s, want %s", got, idlePoll)
	}
	held := &job{bucket: "b", key: "later", lost: []int{1}, notBefore: now.Add(300 * time.Millisecond)}
	s.add(held, 1)
	<-s.wake
	if got := s.idleWait(); got != 300*time.Millisecond {
		t.Errorf("a job due in 300ms: idle wait %s", got)
	}
	now = now.Add(time.Second)
	if got := s.idleWait(); got != time.Millisecond {
		t.Errorf("a job overdue: idle wait %s, want 1ms", got)
	}
	if s.pop() != held {
		t.Fatal("the due job was not popped")
	}
	for i := range 3 {
		s.add(&job{bucket: "b", key: fmt.Sprint(i), lost: []int{1}}, 1)
	}
	for i := range 3 {
		select {
		case <-s.wake:
		default:
			t.Fatalf("job %d queued, no runner woken", i)
		}
		if s.pop() == nil {
			t.Fatalf("woken for job %d, none due", i)
		}
	}
	select {
	case <-s.wake:
		t.Error("a wake signal left with nothing queued")
	default:
	}
}

// The status's time estimate goes over every queued job: a large queue's
// is made at most once per remainingFor (the status is asked for every
// second while a dead server's tens of thousands of jobs wait), a small
// queue's at every call.
func TestStatusEstimateOfALargeQueueKept(t *testing.T) {
	now := time.Unix(1000, 0)
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newScheduler(DefaultConfig(), func() time.Time { return now }, m)
	add := func(from, n int) {
		for i := from; i < from+n; i++ {
			if !s.add(&job{bucket: "b", key: fmt.Sprintf("k%06d", i), lost: []int{1}, cost: Cost{Seconds: 1, CPU: 1}}, 1) {
				t.Fatalf("job %d not queued", i)
			}
		}
	}
	remaining := func() float64 {
		var st shardrpc.RepairStatus
		s.status(&st, DefaultCostModel())
		return st.Repair.Remaining
	}
	add(0, 10)
	small := remaining()
	add(10, 10)
	if r := remaining(); r <= small {
		t.Fatalf("a small queue's estimate went from %v to %v as it doubled, want it made afresh", small, r)
	}
	add(20, remainingCached)
	large := remaining()
	add(20+remainingCached, 1000)
	if r := remaining(); r != large {
		t.Fatalf("a large queue's estimate was made again within %v: %v, then %v", remainingFor, large, r)
	}
	now = now.Add(remainingFor)
	if r := remaining(); r <= large {
		t.Fatalf("%v later the estimate is %v, want more than %v (1,000 jobs more)", remainingFor, r, large)
	}
}
