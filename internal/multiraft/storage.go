package multiraft

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// logStore is one group's raft log and hard state in the shared pebble
// DB; it implements raft.Storage. The replica goroutine is its only
// writer; raft reads it from the same goroutine, the snapshot sender from
// others, hence the mutex.
//
// The terms of every entry in the log are also kept in memory (terms),
// because raft asks Term far more often than Entries and the log is kept
// short (see replica.maybeTruncate).
type logStore struct {
	db *pebble.DB
	g  uint32

	mu        sync.Mutex
	hs        *pb.HardState
	cs        *pb.ConfState
	truncIdx  uint64   // entries <= truncIdx are gone
	truncTerm uint64   // term of entry truncIdx
	terms     []uint64 // terms[i] is the term of entry truncIdx+1+i
	// snapshot builds the Snapshot raft asks for (the replica's
	// current applied state); nil when the replica cannot send one.
	snapshot func() (*pb.Snapshot, error)
}

// errCorrupt marks records that fail to decode.
var errCorrupt = errors.New("multiraft: corrupt record")

// loadLogStore reads group g's persisted log state.
func loadLogStore(db *pebble.DB, g uint32) (*logStore, error) {
	s := &logStore{db: db, g: g, hs: &pb.HardState{}, cs: &pb.ConfState{}}
	if v, ok, err := get(db, hardStateKey(g)); err != nil {
		return nil, err
	} else if ok {
		if err := proto.Unmarshal(v, s.hs); err != nil {
			return nil, fmt.Errorf("%w: hard state of group %d: %v", errCorrupt, g, err)
		}
	}
	if v, ok, err := get(db, confKey(g)); err != nil {
		return nil, err
	} else if ok {
		if err := proto.Unmarshal(v, s.cs); err != nil {
			return nil, fmt.Errorf("%w: conf state of group %d: %v", errCorrupt, g, err)
		}
	}
	if v, ok, err := get(db, truncatedKey(g)); err != nil {
		return nil, err
	} else if ok {
		var good bool
		if s.truncIdx, s.truncTerm, good = parseU64pair(v); !good {
			return nil, fmt.Errorf("%w: truncated state of group %d", errCorrupt, g)
		}
	}
	// Load the terms of the entries in the log.
	start, end := logKey(g, s.truncIdx+1), groupKey(g, subState)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	next := s.truncIdx + 1
	for it.First(); it.Valid(); it.Next() {
		var e pb.Entry
		if err := proto.Unmarshal(it.Value(), &e); err != nil {
			return nil, fmt.Errorf("%w: log entry of group %d: %v", errCorrupt, g, err)
		}
		if e.GetIndex() != next {
			return nil, fmt.Errorf("%w: group %d log has entry %d where %d was expected", errCorrupt, g, e.GetIndex(), next)
		}
		s.terms = append(s.terms, e.GetTerm())
		next++
	}
	return s, it.Error()
}

func get(r pebble.Reader, key []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, true, nil
}

// InitialState implements raft.Storage.
func (s *logStore) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.hs).(*pb.HardState), proto.Clone(s.cs).(*pb.ConfState), nil
}

func (s *logStore) lastLocked() uint64 { return s.truncIdx + uint64(len(s.terms)) }

// Entries implements raft.Storage.
func (s *logStore) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.Lock()
	first, last := s.truncIdx+1, s.lastLocked()
	s.mu.Unlock()
	if lo < first {
		return nil, raft.ErrCompacted
	}
	if hi > last+1 {
		return nil, fmt.Errorf("multiraft: group %d entries [%d, %d) past the last index %d: %w", s.g, lo, hi, last, raft.ErrUnavailable)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logKey(s.g, lo), UpperBound: logKey(s.g, hi)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*pb.Entry
	var size uint64
	for it.First(); it.Valid(); it.Next() {
		e := &pb.Entry{}
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			return nil, fmt.Errorf("%w: log entry of group %d: %v", errCorrupt, s.g, err)
		}
		size += uint64(proto.Size(e))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if len(out) == 0 || out[0].GetIndex() != lo {
		// Truncated while we read.
		return nil, raft.ErrCompacted
	}
	return out, nil
}

// Term implements raft.Storage.
func (s *logStore) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case i == s.truncIdx:
		return s.truncTerm, nil
	case i < s.truncIdx:
		return 0, raft.ErrCompacted
	case i > s.lastLocked():
		return 0, raft.ErrUnavailable
	}
	return s.terms[i-s.truncIdx-1], nil
}

// LastIndex implements raft.Storage.
func (s *logStore) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastLocked(), nil
}

// FirstIndex implements raft.Storage.
func (s *logStore) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.truncIdx + 1, nil
}

// Snapshot implements raft.Storage.
func (s *logStore) Snapshot() (*pb.Snapshot, error) {
	s.mu.Lock()
	f := s.snapshot
	s.mu.Unlock()
	if f == nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return f()
}

// append writes entries and hs into b; commit b, then call appended.
// Entries past the first one's index are replaced (a new leader's log
// wins over an uncommitted suffix).
func (s *logStore) append(b *pebble.Batch, ents []*pb.Entry, hs *pb.HardState) error {
	if hs != nil && !raft.IsEmptyHardState(hs) {
		v, err := proto.Marshal(hs)
		if err != nil {
			return err
		}
		if err := b.Set(hardStateKey(s.g), v, nil); err != nil {
			return err
		}
	}
	if len(ents) == 0 {
		return nil
	}
	s.mu.Lock()
	last := s.lastLocked()
	s.mu.Unlock()
	first := ents[0].GetIndex()
	if first <= last {
		if err := b.DeleteRange(logKey(s.g, first), logKey(s.g, last+1), nil); err != nil {
			return err
		}
	}
	for _, e := range ents {
		v, err := proto.Marshal(e)
		if err != nil {
			return err
		}
		if err := b.Set(logKey(s.g, e.GetIndex()), v, nil); err != nil {
			return err
		}
	}
	return nil
}

// appended updates the in-memory state once append's batch is committed.
func (s *logStore) appended(ents []*pb.Entry, hs *pb.HardState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hs != nil && !raft.IsEmptyHardState(hs) {
		s.hs = proto.Clone(hs).(*pb.HardState)
	}
	if len(ents) == 0 {
		return
	}
	first := ents[0].GetIndex()
	if first <= s.truncIdx {
		panic(fmt.Sprintf("multiraft: group %d appends entry %d at or below the truncated index %d", s.g, first, s.truncIdx))
	}
	s.terms = s.terms[:first-s.truncIdx-1]
	for _, e := range ents {
		s.terms = append(s.terms, e.GetTerm())
	}
}

// truncate drops entries up to and including i (i <= applied).
func (s *logStore) truncate(i uint64) error {
	s.mu.Lock()
	if i <= s.truncIdx || i > s.lastLocked() {
		s.mu.Unlock()
		return nil
	}
	term := s.terms[i-s.truncIdx-1]
	from := s.truncIdx + 1
	s.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(logKey(s.g, from), logKey(s.g, i+1), nil); err != nil {
		return err
	}
	if err := b.Set(truncatedKey(s.g), u64pair(i, term), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	s.mu.Lock()
	s.terms = append([]uint64(nil), s.terms[i-s.truncIdx:]...)
	s.truncIdx, s.truncTerm = i, term
	s.mu.Unlock()
	return nil
}

// setConf records a new ConfState in memory (its key is written with the
// apply batch).
func (s *logStore) setConf(cs *pb.ConfState) {
	s.mu.Lock()
	s.cs = proto.Clone(cs).(*pb.ConfState)
	s.mu.Unlock()
}

func (s *logStore) confState() *pb.ConfState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return proto.Clone(s.cs).(*pb.ConfState)
}

// installed resets the in-memory state after a snapshot at (index, term)
// replaced the log and the state.
func (s *logStore) installed(index, term uint64, cs *pb.ConfState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.truncIdx, s.truncTerm, s.terms = index, term, nil
	s.cs = proto.Clone(cs).(*pb.ConfState)
}
