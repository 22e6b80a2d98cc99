package shardserver

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// maxLeaseTTL bounds how long one acquisition may hold a key: a dead
// gateway never blocks a key for longer.
const maxLeaseTTL = time.Minute

// leaseTable holds short per-key leases for check-and-set operations
// (conditional writes, multipart completion). Leases live in memory only:
// a gateway holds a lease on a majority of a key's placement servers, and
// a restarted server forgetting its leases can at worst let a second
// holder in where the first holds fewer than a majority without it, which
// the majority rule already tolerates for one server.
type leaseTable struct {
	mu     sync.Mutex
	leases map[string]lease
	// inflight counts the fenced manifest writes of each lease name that
	// were admitted and are being stored: a lease is not granted to a new
	// holder while a write admitted without it is still landing, so the
	// check and the store are atomic against acquisitions.
	inflight map[string]int
}

type lease struct {
	holder  string
	expires time.Time
}

// acquire takes or renews name for holder until now+ttl.
func (t *leaseTable) acquire(name, holder string, ttl time.Duration, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.leases == nil {
		t.leases = map[string]lease{}
	}
	l, ok := t.leases[name]
	if ok && l.holder != holder && now.Before(l.expires) {
		return fmt.Errorf("%w: %s until %s", shardrpc.ErrLeaseHeld, name, l.expires.Format(time.RFC3339Nano))
	}
	if held := ok && l.holder == holder && now.Before(l.expires); !held && t.inflight[name] > 0 {
		return fmt.Errorf("%w: %s: %d writes landing", shardrpc.ErrLeaseHeld, name, t.inflight[name])
	}
	t.leases[name] = lease{holder: holder, expires: now.Add(ttl)}
	// Expired leases are dropped lazily, a few per acquisition, so the
	// table stays as small as the set of keys being written right now.
	n := 0
	for k, l := range t.leases {
		if n++; n > 8 {
			break
		}
		if !now.Before(l.expires) {
			delete(t.leases, k)
		}
	}
	return nil
}

// admit lets a client's manifest write of lease name proceed: holder is
// the lease holder the writer claims, or shardrpc.NoLease for a writer
// without one. A claimed lease must be held by holder and live; a write
// without one is refused while anyone holds the lease. An admitted write
// counts as in flight until done is called.
func (t *leaseTable) admit(name, holder string, now time.Time) (done func(), err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.leases[name]
	live := ok && now.Before(l.expires)
	switch {
	case holder == shardrpc.NoLease && live:
		return nil, fmt.Errorf("%w: %s until %s", shardrpc.ErrLeaseHeld, name, l.expires.Format(time.RFC3339Nano))
	case holder != shardrpc.NoLease && (!live || l.holder != holder):
		return nil, fmt.Errorf("%w: %s is not held by %s", shardrpc.ErrLeaseHeld, name, holder)
	}
	if t.inflight == nil {
		t.inflight = map[string]int{}
	}
	t.inflight[name]++
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.inflight[name]--; t.inflight[name] <= 0 {
			delete(t.inflight, name)
		}
	}, nil
}

func (t *leaseTable) release(name, holder string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.leases[name]; ok && l.holder == holder {
		delete(t.leases, name)
	}
}

func (s *Server) acquireLease(w http.ResponseWriter, r *http.Request) {
	var lr shardrpc.LeaseRequest
	if err := s.decode(w, r, &lr); err != nil {
		s.fail(w, r, err)
		return
	}
	ttl := time.Duration(lr.TTLms) * time.Millisecond
	if lr.Name == "" || lr.Holder == "" || ttl <= 0 || ttl > maxLeaseTTL {
		s.fail(w, r, fmt.Errorf("%w: lease needs name, holder and a TTL in (0, %s]", shardrpc.ErrBadRequest, maxLeaseTTL))
		return
	}
	if err := s.leases.acquire(lr.Name, lr.Holder, ttl, s.now()); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) releaseLease(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.leases.release(q.Get(shardrpc.ParamName), q.Get(shardrpc.ParamHolder))
	w.WriteHeader(http.StatusNoContent)
}
