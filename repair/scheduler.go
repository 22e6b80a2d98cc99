package repair

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// scheduler is the repair queue: the jobs waiting (an O(log n) heap,
// queue.go) and running, the batch they form with its predicted end, and
// the counts of their outcomes. It owns all of that under its lock and
// does no I/O: the worker estimates a job before it adds it, runs the job
// it pops and reports the outcome (finish); the status reads it.
type scheduler struct {
	// workers is Config.Workers, retries Config.Retries and backoff
	// Config.Backoff.
	workers int
	retries int
	backoff time.Duration
	now     func() time.Time
	m       *metrics

	mu       sync.Mutex
	queue    jobQueue
	inflight map[string]bool // refs queued or running
	// held: refs whose jobs took their groups off a walk's counts while
	// that walk queues what it found (holdEnded); not queued again
	// meanwhile. Nil outside such a window.
	held map[string]struct{}
	// waiting: refs whose last try found no server to rebuild onto.
	waiting map[string]bool
	counts  shardrpc.RepairCounts
	batch   *shardrpc.RepairBatch
	batchT0 time.Time
	last    *shardrpc.RepairBatch
	recent  []shardrpc.RepairEvent
	// batchCosts are the predicted costs of the current batch's jobs.
	batchCosts []Cost
	// costBuf is status's buffer for the queued jobs' costs.
	costBuf []Cost
	// remaining and remainingAt are status's last estimate of the queue's
	// time and when it was made (reused for a large queue: see status).
	remaining   float64
	remainingAt time.Time
	// batchStale: batch.Predicted misses jobs or peer reports since it
	// was made (predictBatch).
	batchStale bool
	// lastShare is the worker's share of its host as of the last add.
	lastShare float64
	// peerCPU: the largest batch CPU each server of this host reported
	// during the current batch (notePeers); nil when it has none.
	peerCPU map[string]float64
	// wake tells an idle job runner that a job was added.
	wake chan struct{}
}

func newScheduler(cfg Config, now func() time.Time, m *metrics) *scheduler {
	return &scheduler{workers: cfg.Workers, retries: cfg.Retries, backoff: cfg.Backoff, now: now, m: m,
		inflight: map[string]bool{}, waiting: map[string]bool{}, wake: make(chan struct{}, 1),
		counts: shardrpc.RepairCounts{ByMethod: map[string]int64{}}}
}

// busy reports whether the object version ref names is queued or running
// (or held).
func (s *scheduler) busy(ref string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busyLocked(ref)
}

func (s *scheduler) busyLocked(ref string) bool {
	_, held := s.held[ref]
	return s.inflight[ref] || held
}

// holdEnded starts keeping the refs keepEnded names out of the queue;
// releaseEnded stops it and forgets them (scanJobs).
func (s *scheduler) holdEnded() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = map[string]struct{}{}
}

func (s *scheduler) releaseEnded() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = nil
}

// keepEnded holds ref, whose job took its group off the walk's counts,
// while a hold is on. Called before finish lets go of the job's ref, so
// that the ref is never free to be queued again during the hold.
func (s *scheduler) keepEnded(ref string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil {
		s.held[ref] = struct{}{}
	}
}

// add queues j, estimated already, unless its object is queued or running;
// share is the worker's share of its host (Batch).
func (s *scheduler) add(j *job, share float64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busyLocked(j.ref()) {
		return false
	}
	s.inflight[j.ref()] = true
	s.queue.push(j, s.now())
	s.counts.Queued++
	if s.batch == nil {
		s.batchT0 = s.now()
		s.batch = &shardrpc.RepairBatch{Start: s.batchT0.UTC().Format(time.RFC3339Nano)}
	}
	s.batch.Jobs++
	s.lastShare = share
	s.batchCosts = append(s.batchCosts, j.cost)
	s.batch.CPU += j.cost.CPU
	// NB: predicted when read (predictBatch), not per add: the model
	// walks every job of the batch.
	s.batchStale = true
	s.m.queued.Set(float64(s.counts.Queued))
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

// pop takes the most endangered ready job.
func (s *scheduler) pop() *job {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.queue.pop(s.now())
	if j == nil {
		return nil
	}
	s.counts.Queued--
	s.counts.Running++
	s.m.queued.Set(float64(s.counts.Queued))
	s.m.running.Set(float64(s.counts.Running))
	if s.queue.len() > 0 {
		// add wakes one idle runner per job at most (wake holds one
		// signal): pass it on, so that a burst of jobs wakes them all.
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return j
}

// popBatch takes the most endangered ready job and, when it may lead a
// batch (with(nil, first)), up to n-1 more ready jobs that may join it
// (with(first, j)), from the front of the queue (batchLook of it).
func (s *scheduler) popBatch(n int, with func(first, j *job) bool) []*job {
	first := s.pop()
	if first == nil || n <= 1 || !with(nil, first) {
		if first == nil {
			return nil
		}
		return []*job{first}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	more := s.queue.popWith(s.now(), n-1, batchLook, func(j *job) bool { return with(first, j) })
	s.counts.Queued -= int64(len(more))
	s.counts.Running += int64(len(more))
	s.m.queued.Set(float64(s.counts.Queued))
	s.m.running.Set(float64(s.counts.Running))
	return append([]*job{first}, more...)
}

// idlePoll is the longest an idle job runner sleeps without a signal: a
// safety net, since add and pop signal every job (a 200 ms poll of four
// runners on every shard server was a steady part of an idle cluster's
// wake-ups, and at 2 s it still was: every wake-up of an idle process
// costs ~0.1 ms of CPU on a virtual machine, times 13 processes in regen
// dev). A held-back job wakes its runner when it falls due (idleWait).
const idlePoll = 10 * time.Second

// idleWait is how long a runner that found no job due may sleep: until
// the first held-back job falls due, at most idlePoll.
func (s *scheduler) idleWait() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	due, ok := s.queue.nextDue()
	if !ok {
		return idlePoll
	}
	return min(max(due.Sub(s.now()), time.Millisecond), idlePoll)
}

// idle reports whether no job is queued or running.
func (s *scheduler) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts.Running == 0 && s.queue.len() == 0
}

// isWaiting reports whether ref's last try found no server to rebuild
// onto; setWaiting notes that it did and reports whether it was already.
func (s *scheduler) isWaiting(ref string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting[ref]
}

func (s *scheduler) setWaiting(ref string) (already bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	already = s.waiting[ref]
	s.waiting[ref] = true
	return already
}

// retry reports whether a job that ended with err is tried again after a
// backoff: a failure, not a change of the object (the next scan looks at
// it afresh) nor the server stopping, while it has tries left.
func (s *scheduler) retry(ctx context.Context, j *job, err error) bool {
	return err != nil && !errors.Is(err, errRetryLater) && !errors.Is(err, ErrSuperseded) && ctx.Err() == nil &&
		j.attempt < s.retries
}

// finish records the outcome of j, popped and run for secs seconds, and
// queues it again after its backoff when retry says so (requeued). When
// nothing is queued or running any more the batch ends: ended is a copy
// of it, predicted with cm, the cost model of the moment.
func (s *scheduler) finish(ctx context.Context, j *job, res Result, err error, secs float64, cm CostModel) (requeued bool, ended *shardrpc.RepairBatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Running--
	s.m.running.Set(float64(s.counts.Running))
	switch {
	case err == nil:
		s.counts.Done++
		if j.inPlace {
			s.counts.InPlace++
		}
		s.counts.BytesMoved += res.BytesMoved
		s.counts.ByMethod[string(res.Method)]++
		delete(s.waiting, j.ref())
		if s.batch != nil {
			s.batch.Bytes += res.BytesMoved
		}
		s.m.done(res)
	case errors.Is(err, errRetryLater) || errors.Is(err, ErrSuperseded) || ctx.Err() != nil:
		// The object changed (or its repair moved on): the next scan
		// looks at it afresh, with its new manifest.
	case s.retry(ctx, j, err):
		j.attempt++
		j.notBefore = s.now().Add(s.backoff << (j.attempt - 1))
		requeued = true
	default:
		s.counts.Failed++
		s.m.failed.Inc()
	}
	ev := shardrpc.RepairEvent{Object: j.ref(), Method: string(res.Method), Lost: j.lost, Predicted: j.predicted, Seconds: secs, Bytes: res.BytesMoved}
	if err != nil {
		ev.Err = err.Error()
	}
	s.recent = append(s.recent, ev)
	if len(s.recent) > 20 {
		s.recent = s.recent[len(s.recent)-20:]
	}
	if requeued {
		s.queue.push(j, s.now())
		s.counts.Queued++
	} else {
		delete(s.inflight, j.ref())
	}
	if s.queue.len() == 0 && s.counts.Running == 0 && s.batch != nil {
		s.predictBatch(cm)
		s.batch.Elapsed = s.now().Sub(s.batchT0).Seconds()
		s.last, s.batch, s.batchCosts, s.peerCPU = s.batch, nil, nil, nil
		b := *s.last
		ended = &b
	}
	return requeued, ended
}

// openBatch returns when the open batch began; ok is false when none is
// open.
func (s *scheduler) openBatch() (t0 time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batchT0, s.batch != nil
}

// notePeers folds the batch CPU the servers of this host reported into
// the open batch (hostPeers): each one's largest figure is kept.
func (s *scheduler) notePeers(got map[string]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.batch == nil {
		return
	}
	if s.peerCPU == nil {
		s.peerCPU = map[string]float64{}
	}
	for id, c := range got {
		s.peerCPU[id] = max(s.peerCPU[id], c)
	}
	s.batchStale = true
}

// predictBatch brings the open batch's prediction up to date with the
// jobs queued and the peers' CPU reported since it was last made; s.mu is
// held.
func (s *scheduler) predictBatch(cm CostModel) {
	if s.batch == nil || !s.batchStale {
		return
	}
	s.batch.Predicted = cm.Batch(s.batchCosts, s.workers, s.lastShare, s.peerList())
	s.batchStale = false
}

// peerList returns the host peers' batch CPU for Batch (nil: unknown, so
// Batch assumes equal shares); s.mu is held.
func (s *scheduler) peerList() []float64 {
	if s.peerCPU == nil {
		return nil
	}
	out := make([]float64, 0, len(s.peerCPU))
	for _, c := range s.peerCPU {
		out = append(out, c)
	}
	return out
}

// status fills in st's repair counts, batches and recent events; cm is
// the cost model of the moment.
func (s *scheduler) status(st *shardrpc.RepairStatus, cm CostModel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Repair = s.counts
	st.Repair.ByMethod = map[string]int64{}
	for k, v := range s.counts.ByMethod {
		st.Repair.ByMethod[k] = v
	}
	// NB: the buffer is kept: a status is asked for every second or more
	// (admin repair watch, the host peers of every scan) while a dead
	// server's tens of thousands of jobs are queued, and two fresh copies
	// of the queue per call were megabytes of garbage each time.
	// NB: the estimate goes over every queued job; for a dead server's
	// tens of thousands it was 8% of a server's CPU mid-repair with
	// `admin repair watch` asking every second (BENCHMARKS.md, eleventh
	// run). A large queue's estimate is kept for remainingFor: its time
	// moves by seconds a second.
	now := s.now()
	if s.queue.len() < remainingCached || now.Sub(s.remainingAt) >= remainingFor || now.Before(s.remainingAt) {
		s.costBuf = s.queue.costs(s.costBuf[:0])
		s.remaining, s.remainingAt = cm.Batch(s.costBuf, s.workers, s.lastShare, s.peerList()), now
		if cap(s.costBuf) > 4*len(s.costBuf)+1024 {
			s.costBuf = nil // the queue shrank: let the big buffer go
		}
	}
	st.Repair.Remaining = s.remaining
	if s.batch != nil {
		s.predictBatch(cm)
		b := *s.batch
		b.Elapsed = s.now().Sub(s.batchT0).Seconds()
		st.Batch = &b
	}
	if s.last != nil {
		b := *s.last
		st.Last = &b
	}
	st.Recent = append(st.Recent, s.recent...)
}

// A queue of remainingCached jobs or more has its time estimated at most
// once per remainingFor (scheduler.status).
const (
	remainingCached = 4096
	remainingFor    = 5 * time.Second
)

// jobs returns the queued jobs (tests).
func (s *scheduler) jobs() []*job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue.jobs()
}
