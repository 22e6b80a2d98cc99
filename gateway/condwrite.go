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
// The version is newer than every version of the key acknowledged before
// this request began: the write first reads the key's versions from its
// servers (a conditional write reads its current manifest anyway), and
// the clock moves past what it saw, whatever the wall clocks say.
//
// With a precondition, the key's lease is held on holders from reading
// the current manifest to writing the new one. Without one, the write is
// fenced by that lease: servers refuse it while another writer holds the
// lease, and it is tried again with a new version until leaseWait has
// passed. Either way nothing lands between a conditional write's check
// and its set.
//
// probed, when not nil, is closed by a probe of the key started when the
// request began (startProbe), which the first try uses instead of its own:
// the probe then overlaps the upload of the body.
func (g *Gateway) commit(ctx context.Context, m *metadata.Manifest, holders []string, quorum int, w *writeCond, probed <-chan bool) error {
	if w != nil {
		return g.commitChecked(ctx, m, holders, quorum, w)
	}
	return g.layer.fenced(ctx, func() error {
		var seen bool
		if probed != nil {
			seen = <-probed
			probed = nil
		} else {
			seen = g.layer.probe(ctx, m.Bucket, m.Key)
		}
		m.Version = g.layer.clock.next()
		m.Modified = time.Unix(0, m.Version.TS).UTC()
		if seen {
			return g.layer.replaceManifest(ctx, m, holders, quorum, shardrpc.NoLease)
		}
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
	if cur != nil {
		return g.layer.replaceManifest(lctx, m, holders, quorum, kl.holder)
	}
	return g.layer.writeManifest(lctx, m, holders, quorum, kl.holder)
}

// fenced runs write, a manifest write made without the key's lease, again
// while servers refuse it because another writer holds the lease or a
// newer version, up to leaseWait. Each try must take a new version.
//
// A try that k servers stored (errStayed) is never followed by another:
// a read may have returned it, and a second version of the same request
// landing after a newer write would make one request take effect twice,
// the second time over a write that had replaced the first (chaos seed
// 222: a PUT read back, replaced by a concurrent PUT that was read back
// too, then current again). Such a request fails (5xx, outcome open).
func (l *layer) fenced(ctx context.Context, write func() error) error {
	deadline := time.Now().Add(leaseWait)
	for {
		err := write()
		if errors.Is(err, errStayed) || (!errors.Is(err, shardrpc.ErrLeaseHeld) && !errors.Is(err, errNewer)) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: the key's lease stayed held for %s: %w", errUnavailable, leaseWait, err)
		}
		if err := leaseBackoff(ctx); err != nil {
			return err
		}
	}
}

// startProbe runs probe in the background; its result arrives on the
// channel, which is then closed.
func (l *layer) startProbe(ctx context.Context, bucket, key string) <-chan bool {
	done := make(chan bool, 1)
	go func() {
		defer close(done)
		done <- l.probe(ctx, bucket, key)
	}()
	return done
}

// probe reads the versions the key's first servers hold, so that the
// clock moves past them (readManifest does the same for every version it
// sees), and reports whether any server holds one (the write then
// replaces a version: see replaceManifest).
//
// It needs answers from maxN-minK+1 of the first maxN servers only: every
// visible version is on k of a placement within them, and any k of them
// meet that many. So it asks that many live ones first, and the rest of
// the first maxN only when some fail: a small PUT's probe costs 4 calls
// instead of 9 with rs-6-3.
func (l *layer) probe(ctx context.Context, bucket, key string) bool {
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
	return len(v.byVersion) > 0
}
