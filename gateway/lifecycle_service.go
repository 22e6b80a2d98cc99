package gateway

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// The lifecycle service applies buckets' lifecycle rules: every
// LifecycleInterval it walks the buckets that have rules, lists their
// keys page by page (with every version in a versioned bucket) and
// writes a tombstone over each expired object (the DELETE path: a quorum
// write, fenced like any other), removes the noncurrent versions and the
// lone delete markers the rules say are due (the DELETE ?versionId path,
// under the key's lease, never a locked version), and aborts the
// multipart uploads older than a rule's DaysAfterInitiation. All of these
// together are paced to LifecycleRate per second. A pass starts each
// bucket from its first key again (a pass interrupted by a restart is
// simply redone: every action is idempotent). Every gateway runs the
// service and there is no leader election: gateways that act on the same
// key at once both write a tombstone for an object that is already
// expired, which is harmless, a version removed twice is removed, and an
// upload aborted twice is aborted.

// lifecyclePage is how many keys or uploads one listing call returns.
const lifecyclePage = 1000

// LifecycleStatus is what the lifecycle service has done since the
// gateway started.
type LifecycleStatus struct {
	Passes  int64 `json:"passes"`
	Expired int64 `json:"expired"`
	// Noncurrent counts the noncurrent versions removed
	// (NoncurrentVersionExpiration), Markers the delete markers removed
	// (ExpiredObjectDeleteMarker).
	Noncurrent int64 `json:"noncurrent_expired"`
	Markers    int64 `json:"delete_markers_removed"`
	Aborted    int64 `json:"aborted"`
	Errors     int64 `json:"errors"`
	// Waiting counts the passes skipped because fewer shard servers were
	// live than /readyz asks for (the cluster starting, or down): not
	// errors, nothing could be done.
	Waiting int64     `json:"waiting"`
	LastRun time.Time `json:"last_run,omitzero"`
}

// LifecycleService applies lifecycle rules in the background (see above).
type LifecycleService struct {
	g     *Gateway
	limit *rate.Limiter
	// now is the clock the rules are judged by (time.Now; tests set it).
	now        func() time.Time
	expired    prometheus.Counter
	noncurrent prometheus.Counter
	markers    prometheus.Counter
	aborted    prometheus.Counter
	passes     prometheus.Counter
	errs       prometheus.Counter

	mu     sync.Mutex
	status LifecycleStatus
	cancel context.CancelFunc
	done   chan struct{}
}

func newLifecycleService(g *Gateway, reg prometheus.Registerer) *LifecycleService {
	s := &LifecycleService{
		g:          g,
		limit:      rate.NewLimiter(rate.Limit(g.cfg.LifecycleRate), 1),
		now:        time.Now,
		expired:    prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_lifecycle_objects_expired_total", Help: "Objects deleted by lifecycle expiration rules."}),
		noncurrent: prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_lifecycle_noncurrent_versions_expired_total", Help: "Noncurrent versions removed by lifecycle NoncurrentVersionExpiration rules."}),
		markers:    prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_lifecycle_delete_markers_removed_total", Help: "Delete markers with no version under them removed by lifecycle ExpiredObjectDeleteMarker rules."}),
		aborted:    prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_lifecycle_uploads_aborted_total", Help: "Incomplete multipart uploads aborted by lifecycle rules."}),
		passes:     prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_lifecycle_passes_total", Help: "Completed passes of the lifecycle service over the buckets with rules."}),
		errs:       prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_lifecycle_errors_total", Help: "Lifecycle listings, deletes, removals and aborts that failed (retried next pass)."}),
	}
	if reg != nil {
		reg.MustRegister(s.expired, s.noncurrent, s.markers, s.aborted, s.passes, s.errs)
	}
	return s
}

// Lifecycle returns the gateway's lifecycle service.
func (g *Gateway) Lifecycle() *LifecycleService { return g.lifecycle }

// Start runs passes every LifecycleInterval until Stop or ctx ends. A
// second Start while running does nothing.
func (s *LifecycleService) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.run(ctx, s.done)
}

// Stop ends the service and waits for the current action to end.
func (s *LifecycleService) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Status returns the service's counts so far.
func (s *LifecycleService) Status() LifecycleStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *LifecycleService) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.g.cfg.LifecycleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.pass(ctx)
	}
}

// lifecycleOutcome is what one lifecycle action did.
type lifecycleOutcome int

const (
	outExpired lifecycleOutcome = iota
	outNoncurrent
	outMarker
	outAborted
	outError
)

// count records one outcome in the status and the metrics.
func (s *LifecycleService) count(o lifecycleOutcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.status
	switch o {
	case outExpired:
		st.Expired++
		s.expired.Inc()
	case outNoncurrent:
		st.Noncurrent++
		s.noncurrent.Inc()
	case outMarker:
		st.Markers++
		s.markers.Inc()
	case outAborted:
		st.Aborted++
		s.aborted.Inc()
	case outError:
		st.Errors++
		s.errs.Inc()
	}
}

// pass applies the rules of every bucket once. While the cluster is not
// ready (fewer live shard servers than /readyz asks for, as while they
// are starting), it waits for the next tick instead: every listing would
// fail, and counting those failures as errors would make a cluster that
// is merely starting look broken.
func (s *LifecycleService) pass(ctx context.Context) {
	if live, _ := s.g.layer.liveShards(); len(live) < s.g.minShards() {
		s.g.log.Debug("lifecycle: pass skipped, waiting for shard servers", "live", len(live), "need", s.g.minShards())
		s.mu.Lock()
		s.status.Waiting++
		s.mu.Unlock()
		return
	}
	lctx, cancel := s.g.opContext()
	buckets, err := s.g.layer.listBuckets(lctx, s.g.buckets)
	cancel()
	if err != nil {
		s.g.log.Warn("lifecycle: buckets not listed", "err", err)
		s.count(outError)
		return
	}
	for i := range buckets {
		b := &buckets[i]
		if len(b.Lifecycle) == 0 || ctx.Err() != nil {
			continue
		}
		s.expireObjects(ctx, b)
		s.abortUploads(ctx, b)
	}
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	s.status.Passes++
	s.status.LastRun = s.now()
	s.mu.Unlock()
	s.passes.Inc()
}

// withoutTags returns rules with their tag conditions dropped: what a
// listing entry (which carries no tags) can be checked against.
func withoutTags(rules []metadata.LifecycleRule) []metadata.LifecycleRule {
	out := make([]metadata.LifecycleRule, len(rules))
	for i, r := range rules {
		r.Tags = nil
		out[i] = r
	}
	return out
}

// expireObjects applies the expiration rules of bucket b: it deletes
// its expired objects and, when b is or was versioned, removes the
// noncurrent versions and lone delete markers that are due.
func (s *LifecycleService) expireObjects(ctx context.Context, b *metadata.Bucket) {
	loose := withoutTags(b.Lifecycle)
	versioned := b.Versioning != ""
	current, older := false, false
	for _, r := range b.Lifecycle {
		current = current || (r.Enabled && (r.ExpirationDays > 0 || !r.ExpirationDate.IsZero()))
		older = older || (r.Enabled && versioned && (r.NoncurrentDays > 0 || r.ExpiredObjectDeleteMarker))
	}
	day := s.g.cfg.LifecycleDay
	for after := ""; (current || older) && ctx.Err() == nil; {
		lctx, cancel := s.g.opContext()
		res, err := s.g.layer.list(lctx, listParams{Bucket: b.Name, After: after, Max: lifecyclePage, Versions: older})
		cancel()
		if err != nil {
			s.g.log.Warn("lifecycle: keys not listed", "bucket", b.Name, "after", after, "err", err)
			s.count(outError)
			return
		}
		for _, e := range res.Objects {
			if current && !e.Deleted && objectExpires(loose, e.Key, e.Size, nil, e.Modified, s.now(), day) {
				if s.limit.Wait(ctx) != nil {
					return
				}
				deleted, err := s.expire(b, e)
				switch {
				case err != nil:
					s.g.log.Warn("lifecycle: expired object not deleted", "bucket", b.Name, "key", e.Key, "err", err)
					s.count(outError)
				case deleted:
					s.count(outExpired)
				}
			}
			if older && !s.removeVersions(ctx, b, e, loose) {
				return
			}
		}
		if !res.Truncated || res.Last == "" {
			return
		}
		after = res.Last
	}
}

// removeVersions removes the versions of e's key (a ListObjectVersions
// entry: e and its Previous, newest first) that the rules say are due,
// judged without tags here and with them by removeVersion. It returns
// false when ctx ended.
func (s *LifecycleService) removeVersions(ctx context.Context, b *metadata.Bucket, e metadata.ListEntry, loose []metadata.LifecycleRule) bool {
	vs := append([]metadata.ListEntry{e}, e.Previous...)
	for i := range vs {
		if !versionDue(loose, vs, i, nil, s.now(), s.g.cfg.LifecycleDay) {
			continue
		}
		if s.limit.Wait(ctx) != nil {
			return false
		}
		removed, err := s.removeVersion(b, vs[i])
		switch {
		case err != nil:
			s.g.log.Warn("lifecycle: version not removed", "bucket", b.Name, "key", e.Key, "version", vs[i].VersionID, "err", err)
			s.count(outError)
		case removed && i == 0:
			s.count(outMarker)
		case removed:
			s.count(outNoncurrent)
		}
	}
	return true
}

// errNotDue is a lifecycle removal's guard refusing: the version is no
// longer due (the key changed since it was listed, its tags do not
// match) or it is locked.
var errNotDue = errors.New("lifecycle: version not due")

// removeVersion removes version v of its key as DELETE ?versionId does
// (deleteVersionGuarded), if it is still due. The guard judges the
// version read under the key's lease against the key's versions listed
// again under it (the lease fences every write and removal of the key,
// so that listing is what the removal acts on), with the version's tags,
// and refuses a version under retention or legal hold as DELETE
// ?versionId without bypass does (removable): lifecycle never removes a
// locked version.
func (s *LifecycleService) removeVersion(b *metadata.Bucket, v metadata.ListEntry) (bool, error) {
	ctx, cancel := s.g.opContext()
	defer cancel()
	check := func(m *metadata.Manifest) error {
		now := s.now()
		if removable(m.Lock, now, false) != nil {
			return errNotDue
		}
		vs, err := s.g.layer.keyVersions(ctx, b.Name, m.Key)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(vs, func(x metadata.ListEntry) bool { return x.VersionID == m.VersionID })
		if i < 0 || !versionDue(b.Lifecycle, vs, i, m.Tags, now, s.g.cfg.LifecycleDay) {
			return errNotDue
		}
		return nil
	}
	m, err := s.g.layer.deleteVersionGuarded(ctx, b.Name, v.Key, v.VersionID, &removalGuard{check: check})
	if errors.Is(err, errNotDue) || errors.Is(err, shardrpc.ErrLocked) {
		// NB: a shard server whose clock has not reached the end of
		// the retention yet refuses it; a later pass removes it.
		return false, nil
	}
	return m != nil && err == nil, err
}

// expire deletes the current version of e's key if it is still the one
// listed and expires by the rules, tags included: a key written again
// since the listing is left alone. It is deleteKey with that check.
func (s *LifecycleService) expire(b *metadata.Bucket, e metadata.ListEntry) (bool, error) {
	ctx, cancel := s.g.opContext()
	defer cancel()
	deleted := false
	err := s.g.layer.fenced(ctx, func() error {
		m, err := s.g.layer.readHead(ctx, b.Name, e.Key)
		if errors.Is(err, errNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if m.Version != e.Version || !objectExpires(b.Lifecycle, m.Key, m.Size, m.Tags, m.Modified, s.now(), s.g.cfg.LifecycleDay) {
			return nil
		}
		tomb := s.g.layer.tombstone(m)
		// In a versioned bucket expiring is a delete marker, as in S3:
		// the versions under it stay.
		tomb.Versioned = b.Versioning == metadata.VersioningEnabled
		if err := s.g.layer.writeManifest(ctx, tomb, m.Placement, s.g.layer.writeQuorum(m), shardrpc.NoLease); err != nil {
			return err
		}
		deleted = true
		return nil
	})
	return deleted, err
}

// abortUploads aborts the multipart uploads of bucket b that a rule
// says are too old.
func (s *LifecycleService) abortUploads(ctx context.Context, b *metadata.Bucket) {
	active := false
	for _, r := range b.Lifecycle {
		active = active || (r.Enabled && r.AbortDays > 0)
	}
	q := metadata.UploadQuery{Bucket: b.Name}
	for active && ctx.Err() == nil {
		lctx, cancel := s.g.opContext()
		us, truncated, err := s.g.layer.listUploads(lctx, q, lifecyclePage)
		cancel()
		if err != nil {
			s.g.log.Warn("lifecycle: uploads not listed", "bucket", b.Name, "err", err)
			s.count(outError)
			return
		}
		for _, u := range us {
			if !uploadExpires(b.Lifecycle, u.Key, u.Initiated, s.now(), s.g.cfg.LifecycleDay) {
				continue
			}
			if s.limit.Wait(ctx) != nil {
				return
			}
			switch err := s.abort(b.Name, u.Key, u.ID); {
			case errors.Is(err, errNoUpload): // finished or aborted since listed
			case err != nil:
				s.g.log.Warn("lifecycle: upload not aborted", "bucket", b.Name, "key", u.Key, "upload", u.ID, "err", err)
				s.count(outError)
			default:
				s.count(outAborted)
			}
		}
		if !truncated || len(us) == 0 {
			return
		}
		q.KeyMarker, q.IDMarker = us[len(us)-1].Key, us[len(us)-1].ID
	}
}

// abort aborts one upload as AbortMultipartUpload does.
func (s *LifecycleService) abort(bucket, key, id string) error {
	ctx, cancel := s.g.opContext()
	defer cancel()
	u, err := s.g.layer.getUpload(ctx, bucket, key, id)
	if err != nil {
		return err
	}
	if s.g.layer.finishUpload(ctx, u, nil) == 0 {
		return errUnavailable
	}
	return nil
}
