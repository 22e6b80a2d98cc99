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
	if l, ok := t.leases[name]; ok && l.holder != holder && now.Before(l.expires) {
		return fmt.Errorf("%w: %s until %s", shardrpc.ErrLeaseHeld, name, l.expires.Format(time.RFC3339Nano))
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
