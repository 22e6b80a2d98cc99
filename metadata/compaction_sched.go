package metadata

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// quietScheduler grants pebble's compactions as pebble's default
// scheduler does (as many at once as the DB allows without permission)
// but wakes on a timer only while a compaction waits for a grant.
//
// Why: pebble's ConcurrencyLimitScheduler re-reads the allowance every
// 100 ms for the life of the DB, because a flush can raise it unseen. On
// an idle shard server that ticker was the most frequent wake-up of the
// process (10 a second of about 40, by an execution trace), and twelve
// servers on one machine (regen dev, the scale runs) each paid it. Here
// the timer runs only from a refused TrySchedule until a grant finds
// nothing waiting; a busy DB is sampled as often as before.
type quietScheduler struct {
	db   pebble.DBForCompaction
	poke chan struct{}
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	cond     *sync.Cond // signalled when granting ends
	running  int
	waiting  bool // a compaction was refused and may still wait for a grant
	granting bool
	closed   bool
}

// grantPoll is how often a waiting compaction's allowance is re-read.
const grantPoll = 100 * time.Millisecond

func newQuietScheduler() *quietScheduler {
	s := &quietScheduler{poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Register implements pebble.CompactionScheduler.
func (s *quietScheduler) Register(_ int, db pebble.DBForCompaction) {
	s.db = db
	go s.run()
}

// Unregister implements pebble.CompactionScheduler: the granter stops and
// no grant is under way when it returns.
func (s *quietScheduler) Unregister() {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for s.granting {
		s.cond.Wait()
	}
}

// TrySchedule implements pebble.CompactionScheduler.
func (s *quietScheduler) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, nil
	}
	if s.db.GetAllowedWithoutPermission() > s.running {
		s.running++
		return true, s
	}
	s.waiting = true
	s.wake()
	return false, nil
}

// UpdateGetAllowedWithoutPermission implements pebble.CompactionScheduler:
// a flush may have raised the allowance.
func (s *quietScheduler) UpdateGetAllowedWithoutPermission() { s.wake() }

// Started, MeasureCPU and CumulativeStats implement
// pebble.CompactionGrantHandle; nothing is paced.
func (s *quietScheduler) Started()                                          {}
func (s *quietScheduler) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (s *quietScheduler) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done implements pebble.CompactionGrantHandle: the freed slot goes to a
// waiting compaction at once.
func (s *quietScheduler) Done() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	s.grant()
}

func (s *quietScheduler) wake() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// run grants on every poke and, while a compaction waits, every grantPoll.
func (s *quietScheduler) run() {
	defer close(s.done)
	t := time.NewTimer(grantPoll)
	t.Stop()
	for {
		s.mu.Lock()
		waiting := s.waiting
		s.mu.Unlock()
		var tick <-chan time.Time
		if waiting {
			t.Reset(grantPoll)
			tick = t.C
		}
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-s.poke:
		case <-tick:
		}
		t.Stop()
		s.grant()
	}
}

// grant hands free slots to the DB's waiting compactions, one granter at
// a time. GetWaitingCompaction is asked only when a slot is free, so no
// picked compaction is wasted; when it reports none, nothing waits.
func (s *quietScheduler) grant() {
	s.mu.Lock()
	for s.granting && !s.closed {
		s.cond.Wait()
	}
	free := s.db.GetAllowedWithoutPermission() - s.running
	if s.closed || free <= 0 {
		s.mu.Unlock()
		return
	}
	s.granting = true
	s.mu.Unlock()
	drained := false
	for ; free > 0; free-- {
		if waiting, _ := s.db.GetWaitingCompaction(); !waiting {
			drained = true
			break
		}
		if !s.db.Schedule(s) {
			break
		}
		s.mu.Lock()
		s.running++
		s.mu.Unlock()
	}
	s.mu.Lock()
	if drained {
		s.waiting = false
	}
	s.granting = false
	s.cond.Broadcast()
	s.mu.Unlock()
}

var _ pebble.CompactionScheduler = (*quietScheduler)(nil)
