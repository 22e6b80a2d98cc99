package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// writeCond is the precondition of a conditional write (PutObject,
// CopyObject, CompleteMultipartUpload): If-None-Match: * (create only) or
// If-Match: <etag> (replace only that version).
type writeCond struct {
	ifMatch     string // ETag without quotes
	ifNoneMatch bool
}

// writeCondOf reads the request's write precondition; nil when it has
// none.
func writeCondOf(c *fiber.Ctx) *writeCond {
	im, inm := strings.TrimSpace(c.Get("If-Match")), strings.TrimSpace(c.Get("If-None-Match"))
	if im == "" && inm == "" {
		return nil
	}
	return &writeCond{ifMatch: strings.Trim(strings.TrimPrefix(im, "W/"), `"`), ifNoneMatch: inm != ""}
}

// validate rejects preconditions S3 does not accept on writes.
func (w *writeCond) validate(c *fiber.Ctx) error {
	if w == nil {
		return nil
	}
	if inm := strings.TrimSpace(c.Get("If-None-Match")); inm != "" && inm != "*" {
		return apiErr("NotImplemented", "If-None-Match on writes only accepts *")
	}
	return nil
}

// check applies w to the current manifest (nil: the key has no object).
func (w *writeCond) check(cur *metadata.Manifest) error {
	switch {
	case w.ifNoneMatch && cur != nil:
		return apiErr("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	case w.ifMatch != "" && cur == nil:
		return apiErr("NoSuchKey", "The specified key does not exist.")
	case w.ifMatch != "" && w.ifMatch != "*" && w.ifMatch != cur.ETag:
		return apiErr("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	}
	return nil
}

// current returns the key's current manifest, nil when there is none.
func (l *layer) current(ctx context.Context, bucket, key string) (*metadata.Manifest, error) {
	m, err := l.readHead(ctx, bucket, key)
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	return m, err
}

// precheck fails a conditional write early, before its body is read; the
// decisive check is repeated under the key's lease in commit.
func (g *Gateway) precheck(ctx context.Context, bucket, key string, w *writeCond) error {
	if w == nil {
		return nil
	}
	cur, err := g.layer.current(ctx, bucket, key)
	if err != nil {
		return err
	}
	return w.check(cur)
}

// commit gives m a version and writes its manifest to holders.
//
// The version must be newer than every version of the key acknowledged
// (or read) before this request began, whatever the gateways' clocks say.
// A write without a precondition takes the clock's next version and
// writes at once: the servers holding a newer version refuse it (errNewer),
// the clock moves past what they hold, and the write is tried again (see
// fenced). That is sound only while a stale try cannot reach k servers,
// which staleRefused checks; otherwise the write first reads the key's
// versions from its servers (probe) and the clock moves past them. A
// conditional write reads the current manifest under the key's lease
// anyway.
//
// With a precondition, the key's lease is held on holders from reading
// the current manifest to writing the new one. Without one, the write is
// fenced by that lease: servers refuse it while another writer holds the
// lease, and it is tried again with a new version until leaseWait has
// passed. Either way nothing lands between a conditional write's check
// and its set.
func (g *Gateway) commit(ctx context.Context, m *metadata.Manifest, holders []string, quorum int, w *writeCond) error {
	if w != nil {
		return g.commitChecked(ctx, m, holders, quorum, w)
	}
	probe := !g.layer.staleRefused(m)
	return g.layer.fenced(ctx, func() error {
		if probe {
			g.layer.probe(ctx, m.Bucket, m.Key)
		}
		m.Version = g.layer.clock.next()
		m.Modified = time.Unix(0, m.Version.TS).UTC()
		return g.layer.writeManifest(ctx, m, holders, quorum, shardrpc.NoLease)
	})
}

// commitChecked is commit of a conditional write: check and set under
// the key's lease.
func (g *Gateway) commitChecked(ctx context.Context, m *metadata.Manifest, holders []string, quorum int, w *writeCond) error {
	kl, err := g.layer.lockKey(ctx, m.Bucket, m.Key, holders, quorum)
	if err != nil {
		return err
	}
	defer kl.release()
	lctx, cancel := kl.context(ctx)
	defer cancel()
	cur, err := g.layer.current(lctx, m.Bucket, m.Key)
	if err != nil {
		return err
	}
	if err := w.check(cur); err != nil {
		return err
	}
	m.Version = g.layer.clock.next()
	m.Modified = time.Unix(0, m.Version.TS).UTC()
	return g.layer.writeManifest(lctx, m, holders, quorum, kl.holder)
}

// fenced runs write, a manifest write made without the key's lease, again
// while servers refuse it because another writer holds the lease or a
// newer version, up to leaseWait. Each try must take a new version. A try
// refused by a newer version is followed by the next at once the first
// time (the clock has moved past that version: a gateway whose clock is
// behind pays one round trip), after a backoff when it happens again (a
// hot key written through several gateways); a held lease is waited out
// with a backoff.
//
// A try that k servers stored (errStayed) is never followed by another:
// a read may have returned it, and a second version of the same request
// landing after a newer write would make one request take effect twice,
// the second time over a write that had replaced the first (chaos seed
// 222: a PUT read back, replaced by a concurrent PUT that was read back
// too, then current again). Such a request fails (5xx, outcome open).
func (l *layer) fenced(ctx context.Context, write func() error) error {
	deadline := time.Now().Add(leaseWait)
	for newer := 0; ; {
		err := write()
		if errors.Is(err, errStayed) || (!errors.Is(err, shardrpc.ErrLeaseHeld) && !errors.Is(err, errNewer)) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: the key's lease stayed held for %s: %w", errUnavailable, leaseWait, err)
		}
		if errors.Is(err, errNewer) && !errors.Is(err, shardrpc.ErrLeaseHeld) {
			if newer++; newer == 1 {
				continue
			}
		}
		if err := leaseBackoff(ctx); err != nil {
			return err
		}
	}
}

// probe reads the versions the key's first servers hold, so that the
// clock moves past them (readManifest does the same for every version it
// sees). commit needs it only when too many of those servers are down
// for a stale write to be refused (staleRefused).
//
// It needs answers from maxN-minK+1 of the first maxN servers only: every
// visible version is on k of a placement within them, and any k of them
// meet that many. So it asks that many live ones first, and the rest of
// the first maxN only when some fail: a small PUT's probe costs 4 calls
// instead of 9 with rs-6-3.
func (l *layer) probe(ctx context.Context, bucket, key string) {
	order, addrs := l.manifestOrder(bucket, key)
	first := order[:min(len(order), max(l.maxN, 1))]
	need := max(len(first)-l.minK+1, 1)
	var ask, rest []string
	for _, id := range first {
		if _, live := addrs[id]; live && len(ask) < need {
			ask = append(ask, id)
		} else {
			rest = append(rest, id)
		}
	}
	v := newVote()
	l.askManifests(ctx, ask, addrs, bucket, key, v, "")
	if len(v.answered) < need {
		l.askManifests(ctx, rest, addrs, bucket, key, v, "")
	}
}

// staleRefused reports whether a write of m whose version is older than
// a visible version V of its key (one that k servers hold, so a read may
// have returned it) is sure to be refused by enough servers to stay below
// k, so that it is taken back and tried again with a newer version, never
// acknowledged and never visible.
//
// V's holders are at least minK servers within the key's first maxN
// (the assumption lookups make too: see the Known limits of
// docs/CONSISTENCY.md). m's placement is the first live servers of the
// same order; the holders it can miss are those gossip calls dead and
// those beyond its width, at most down + (maxN - n). So at most
// maxN - minK + down of its servers store the stale write, plus
// strayHolders for a repaired placement that reaches past the first
// maxN. With rs-6-3 alone: 3 + down + 1 < 6 while at most one of the
// key's first nine servers is down. The rule needs 2k > n; codes
// without it (the 10-10 ones) always probe.
func (l *layer) staleRefused(m *metadata.Manifest) bool {
	c, err := l.code(m.Code)
	if err != nil {
		return false
	}
	order, addrs := l.manifestOrder(m.Bucket, m.Key)
	down := 0
	for _, id := range order[:min(len(order), max(l.maxN, 1))] {
		if _, live := addrs[id]; !live {
			down++
		}
	}
	return l.maxN-l.minK+down+strayHolders < c.DataShards()
}

// strayHolders is the slack staleRefused leaves for holders of a version
// outside the key's first maxN servers (a repair moved a shard past them).
const strayHolders = 1
