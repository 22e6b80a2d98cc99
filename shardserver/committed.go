package shardserver

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"sync"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// committedSet remembers the versions gateways and repair switches
// reported as stored on a write quorum (shardrpc.PathCommitted,
// PathConfirmed) that replaced a version here, so that a confirm job for
// one of them confirms it without asking the peers. It lives in memory and is bounded: a version it forgot (a
// restart, or more notices than it holds before their jobs ran) is
// confirmed the slow way, by asking, which is always right. A notice can
// only confirm, never roll back, so a lost or late one costs time, not
// safety.
type committedSet struct {
	mu   sync.Mutex
	set  map[noteKey]struct{}
	fifo []noteKey
}

// noteKey is a note's version, hashed: 16 bytes of SHA-256 instead of its
// bucket, key and writer strings. A full set held ~40 MiB of strings on
// each server of a million-object repair, whose switches send notices
// faster than the confirm jobs take them. A collision would confirm an
// unnoted version without asking; at 2^-128 per pair, as for any content
// hash, that is not a risk.
type noteKey [16]byte

func noteKeyOf(r shardrpc.VersionRef) noteKey {
	h := sha256.New()
	var n [8]byte
	for _, f := range []string{r.Bucket, r.Key, r.Version.Writer} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	binary.BigEndian.PutUint64(n[:], uint64(r.Version.TS))
	h.Write(n[:])
	var k noteKey
	copy(k[:], h.Sum(nil))
	return k
}

// maxCommitted bounds the set: a few GCDelays of notices at thousands of
// writes a second.
const maxCommitted = 1 << 18

func (c *committedSet) add(r shardrpc.VersionRef) {
	k := noteKeyOf(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil {
		c.set = map[noteKey]struct{}{}
	}
	if _, ok := c.set[k]; ok {
		return
	}
	if len(c.fifo) >= maxCommitted {
		delete(c.set, c.fifo[0])
		c.fifo = c.fifo[1:]
	}
	c.set[k] = struct{}{}
	c.fifo = append(c.fifo, k)
}

// take reports whether r was noted, and forgets it.
func (c *committedSet) take(r shardrpc.VersionRef) bool {
	k := noteKeyOf(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.set[k]
	delete(c.set, k) // NB: its fifo slot goes when it reaches the front
	return ok
}

// confirmed takes a notice that versions are stored on a write quorum,
// for the confirm jobs alone: from a gateway after a write (on
// shardrpc.PathConfirmed, or PathCommitted from a gateway that predates
// it) or from a repair switch. Both paths are this one handler: nothing
// is marked in the record any more, since no lookup reads a mark
// (docs/CONSISTENCY.md, rule 1, chaos seed 8383), and a mark was a pebble
// write per notice.
//
// Each version is noted for its confirm job when it is current here and
// the key has previous versions, which only a key with a confirm job
// has. A version that is no longer current here gets no note: its key
// moved on.
func (s *Server) confirmed(w http.ResponseWriter, r *http.Request) {
	var req shardrpc.CommittedRequest
	if err := s.decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Versions) > shardrpc.MaxBatch {
		s.fail(w, r, fmt.Errorf("%w: at most %d versions", shardrpc.ErrBadRequest, shardrpc.MaxBatch))
		return
	}
	for _, v := range req.Versions {
		current, previous, err := s.meta.CurrentIs(r.Context(), v.Bucket, v.Key, v.Version)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if current && previous {
			s.notes.add(v)
			if req.Switch {
				s.expedite(r.Context(), v)
			}
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// noted reports whether a gateway or a repair switch said cur is on a
// write quorum.
func (s *Server) noted(cur *metadata.Manifest) bool {
	return s.notes.take(shardrpc.VersionRef{Bucket: cur.Bucket, Key: cur.Key, Version: cur.Version})
}
