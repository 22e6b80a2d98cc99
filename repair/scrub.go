package repair

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// The scrubber reads every shard this server holds, at ScrubRate, through
// its own shard API (so the server checks every block checksum) and
// compares the whole file's CRC-32C with the manifest. A missing, corrupt
// or mismatching shard is rebuilt in place by this server: nobody else
// holds that shard, so no coordination is needed, and the placement does
// not change.

// scrubber is the background service that verifies this server's shards.
// It owns its counts and their lock; the worker starts it (run) and reads
// its status, and hands it what it needs of the rest: the membership
// view, the lookup of a job's manifest and the queue its rebuilds go to.
type scrubber struct {
	self string
	// rate is bytes read per second (Config.ScrubRate); every is how
	// often a pass starts at most (Config.ScrubInterval).
	rate   int64
	every  time.Duration
	log    *slog.Logger
	store  Store
	shards shardGetter
	m      *metrics
	// view is the membership as the worker sees it; lookup returns the
	// manifest a job names as stored now; rebuild queues a job.
	view    func() nodeView
	lookup  func(ctx context.Context, j *job) (*metadata.Manifest, error)
	rebuild func(j *job) bool

	mu     sync.Mutex
	counts shardrpc.ScrubCounts
}

// shardGetter reads a shard (Shards has it).
type shardGetter interface {
	GetShard(ctx context.Context, addr, fileID string, idx int, off, length int64) (io.ReadCloser, error)
}

// status returns the scrub counts.
func (s *scrubber) status() shardrpc.ScrubCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// scrubVisitCost is what visiting one manifest takes from the scrub's
// byte budget (ScrubRate): reading and decoding a manifest costs about as
// much CPU as checking 16 KiB of shard data. The walk leaves inline
// objects out before decoding them (EachStripedAfter), so a server of
// small objects pays only for iterating their records, once per
// ScrubInterval.
const scrubVisitCost = 16 << 10

// run scrubs pass after pass until ctx ends.
func (s *scrubber) run(ctx context.Context) {
	lim := rate.NewLimiter(rate.Limit(s.rate), int(max(s.rate, 1<<20)))
	for ctx.Err() == nil {
		start := time.Now()
		walk, err := s.pass(ctx, lim)
		if err != nil && ctx.Err() == nil {
			s.log.Error("scrub", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(max(time.Second, s.every-time.Since(start), walkPace*walk)):
		}
	}
}

// scrubCursor names the scrubber's saved position in the store, and
// scrubSaveEvery is how often a pass saves it: a restart resumes the pass
// there instead of starting it over (a pass over a large server takes
// weeks at ScrubRate), repeating at most that much reading.
const (
	scrubCursor    = "scrub"
	scrubSaveEvery = 10 * time.Second
)

// cursorStore is the optional capability of resuming a walk over the
// manifests (*metadata.Store has it); without it every pass starts over.
type cursorStore interface {
	EachStripedAfter(ctx context.Context, after *metadata.Cursor, fn func(*metadata.Manifest) error) error
	LoadCursor(ctx context.Context, name string) (*metadata.Cursor, error)
	SaveCursor(ctx context.Context, name string, c *metadata.Cursor) error
}

// pass verifies every shard of this server once, from the saved
// position on: first the shards of current manifests, then those of the
// noncurrent versions of versioned buckets (EachVersionAfter), which keep
// their stripes and are rebuilt alike. A saved position with a Version is
// in the second walk. walk is how long listing them took (the pass's
// CPU-bound part; the reads are paced).
//
// It streams: each page of manifests is scrubbed before the next is read,
// so its memory does not grow with the number of objects (it held every
// manifest of the server before).
func (s *scrubber) pass(ctx context.Context, lim *rate.Limiter) (walk time.Duration, err error) {
	start := time.Now()
	var reading time.Duration
	cs, resumable := s.store.(cursorStore)
	var from, last *metadata.Cursor
	if resumable {
		if from, err = cs.LoadCursor(ctx, scrubCursor); err != nil {
			return 0, fmt.Errorf("repair: scrub: %w", err)
		}
		if from != nil {
			s.log.Info("scrub: resuming the pass", "after", from.String())
		}
	}
	saved := time.Now()
	visit := func(noncurrent bool) func(m *metadata.Manifest) error {
		return func(m *metadata.Manifest) error {
			// NB: the wait counts as reading, not walking, so the pause
			// after the pass (walkPace) paces the walk's own CPU only.
			t0 := time.Now()
			if err := lim.WaitN(ctx, scrubVisitCost); err != nil {
				return err
			}
			reading += time.Since(t0)
			if !slices.Contains(m.Placement, s.self) {
				return nil
			}
			t0 = time.Now()
			err := s.one(ctx, lim, m, noncurrent)
			reading += time.Since(t0)
			if err != nil {
				return err
			}
			last = &metadata.Cursor{Bucket: m.Bucket, Key: m.Key}
			if noncurrent {
				v := m.Version
				last.Version = &v
			}
			if resumable && time.Since(saved) >= scrubSaveEvery {
				saved = time.Now()
				return cs.SaveCursor(ctx, scrubCursor, last)
			}
			return nil
		}
	}
	switch {
	case resumable && from != nil && from.Version != nil:
		// Resumed within the noncurrent versions: the current manifests
		// were scrubbed in this pass already.
	case resumable:
		err = cs.EachStripedAfter(ctx, from, visit(false))
		from = nil
	default:
		err = s.store.EachManifest(ctx, visit(false))
	}
	if vs, ok := s.store.(versionStore); ok && err == nil {
		err = vs.EachVersionAfter(ctx, from, visit(true))
	}
	walk = max(time.Since(start)-reading, 0)
	if err != nil {
		if resumable && last != nil {
			// NB: also when ctx ended (the server stops): the next start
			// resumes after the last manifest scrubbed, not the last save.
			if serr := cs.SaveCursor(context.WithoutCancel(ctx), scrubCursor, last); serr != nil {
				s.log.Warn("scrub: save position", "err", serr)
			}
		}
		return walk, err
	}
	s.mu.Lock()
	s.counts.Passes++
	s.mu.Unlock()
	if resumable {
		return walk, cs.SaveCursor(ctx, scrubCursor, nil)
	}
	return walk, nil
}

// one verifies this server's shards of m (a current manifest, or a
// noncurrent version) and queues their rebuild when they are bad.
func (s *scrubber) one(ctx context.Context, lim *rate.Limiter, m *metadata.Manifest, noncurrent bool) error {
	if len(m.Parts) == 0 {
		return nil // inline: the manifest is the data, and it has been read
	}
	v := s.view()
	self := v.nodes[s.self]
	if self.Addr == "" {
		return nil
	}
	idx := slices.Index(m.Placement, s.self)
	for _, p := range m.Parts {
		bad, err := s.shard(ctx, lim, self.Addr, p.ID, idx, p.ShardCRC[idx])
		if err != nil {
			return err
		}
		if !bad {
			continue
		}
		// The manifest may have changed since the pass started (an
		// overwrite's GC removes the old shard): only one still held
		// counts.
		j := &job{bucket: m.Bucket, key: m.Key, version: m.Version, lost: []int{idx}, inPlace: true, prio: 1, noncurrent: noncurrent}
		cur, err := s.lookup(ctx, j)
		if err != nil || cur.Version != m.Version {
			return nil
		}
		s.m.scrubCorrupt.Inc()
		s.log.Warn("scrub: bad shard, rebuilding in place", "object", j.ref(), "file", p.ID, "idx", idx)
		s.rebuild(j)
		return nil
	}
	return nil
}

// shard reads one shard and reports whether it is missing or bad.
// Errors are returned only when the scrub itself should stop.
func (s *scrubber) shard(ctx context.Context, lim *rate.Limiter, addr, fileID string, idx int, want uint32) (bool, error) {
	rc, err := s.shards.GetShard(ctx, addr, fileID, idx, 0, -1)
	if errors.Is(err, shardrpc.ErrCorrupt) {
		s.mu.Lock()
		s.counts.Corrupt++
		s.mu.Unlock()
		return true, nil
	}
	if errors.Is(err, shardrpc.ErrNotFound) {
		s.mu.Lock()
		s.counts.Missing++
		s.mu.Unlock()
		return true, nil
	}
	if err != nil {
		return false, ctx.Err()
	}
	defer rc.Close()
	crc, n, err := crcOf(&limitedReader{ctx: ctx, r: rc, lim: lim})
	s.m.scrubBytes.Add(float64(n))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Shards++
	s.counts.Bytes += n
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err()
	case err != nil || crc != want:
		// This server's own shard API aborts a stream whose block fails
		// its checksum after the headers went out: the scrubber sees a
		// cut-off body, not ErrCorrupt. A local read has no network to
		// blame, so any failure mid-stream counts as a bad shard.
		s.counts.Corrupt++
		return true, nil
	}
	return false, nil
}

// limitedReader paces reads by a rate limiter.
type limitedReader struct {
	ctx context.Context
	r   io.Reader
	lim *rate.Limiter
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if len(p) > l.lim.Burst() {
		p = p[:l.lim.Burst()]
	}
	n, err := l.r.Read(p)
	if n > 0 {
		if werr := l.lim.WaitN(l.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}
