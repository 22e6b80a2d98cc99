package repair

import (
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/metadata"
)

// Manifest anti-entropy. A server that was down missed the manifest
// switches of the repairs done meanwhile (and overwrites and deletes):
// its own copies still place shards on it. When it starts, and whenever
// a peer comes back, it asks the other live servers of each placement for
// their version and stores anything newer through its own shard API. The
// shard server then garbage-collects, after its GC delay, the shard files
// the newer manifest no longer places on it. A repair switch is only
// written after the rebuilt copies are durable, so this never drops the
// last copy.

func (w *Worker) kickSync() {
	select {
	case w.sync <- struct{}{}:
	default:
	}
}

func (w *Worker) runSync(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.sync:
		}
		// Let gossip settle so the peers we ask are the ones alive now.
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		n, err := w.syncManifests(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Error("manifest sync", "err", err)
		}
		if n > 0 {
			w.log.Info("manifest sync: took newer versions from peers", "manifests", n)
		}
	}
}

// confirmedNewer returns the newest version of m's key, newer than m, that
// a write quorum of servers hold as current; nil if there is none. Taking
// any newer version a single peer holds would spread a write that failed
// (and that its servers will roll back) over the whole placement, and
// readers would then choose a version whose shards do not exist.
func (w *Worker) confirmedNewer(ctx context.Context, v nodeView, m *metadata.Manifest, quorums *quorumCache) *metadata.Manifest {
	votes := map[metadata.Version]int{}
	seen := map[metadata.Version]*metadata.Manifest{m.Version: m}
	votes[m.Version]++ // this server
	for _, id := range m.Placement {
		ni := v.nodes[id]
		if id == v.self || !ni.Live {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cur, err := w.shards.GetManifest(cctx, ni.Addr, m.Bucket, m.Key)
		cancel()
		if err != nil {
			continue
		}
		votes[cur.Version]++
		if _, ok := seen[cur.Version]; !ok {
			seen[cur.Version] = cur
		}
	}
	var best *metadata.Manifest
	for ver, cand := range seen {
		if !m.Version.Less(ver) || votes[ver] < quorums.get(cand) {
			continue
		}
		if best == nil || best.Version.Less(ver) {
			best = cand
		}
	}
	return best
}

// quorumCache remembers the write quorum (k+1) of each code name.
type quorumCache struct {
	mu sync.Mutex
	k  map[string]int
}

func newQuorumCache() *quorumCache { return &quorumCache{k: map[string]int{}} }

func (q *quorumCache) get(m *metadata.Manifest) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	k, ok := q.k[m.Code]
	if !ok {
		k = len(m.Placement)/2 + 1 - 1 // unknown code: a majority
		if c, err := codec.Parse(m.Code); err == nil {
			k = c.DataShards()
		}
		q.k[m.Code] = k
	}
	return min(k+1, len(m.Placement))
}

// syncManifests pulls newer versions of the local manifests from their
// placement peers; it returns how many it stored.
func (w *Worker) syncManifests(ctx context.Context) (int, error) {
	v := w.view()
	self := v.nodes[v.self]
	if self.Addr == "" {
		return 0, nil
	}
	var local []*metadata.Manifest
	err := w.eachManifest(ctx, func(m *metadata.Manifest) error {
		local = append(local, m)
		return nil
	})
	if err != nil {
		return 0, err
	}
	var g errgroup.Group
	g.SetLimit(16)
	updated := 0
	type upd struct{ m *metadata.Manifest }
	results := make(chan upd, len(local))
	quorums := newQuorumCache()
	for _, m := range local {
		g.Go(func() error {
			if best := w.confirmedNewer(ctx, v, m, quorums); best != nil {
				results <- upd{best}
			}
			return nil
		})
	}
	g.Wait()
	close(results)
	for u := range results {
		if _, _, err := w.shards.PutManifest(ctx, self.Addr, u.m); err != nil {
			w.log.Warn("manifest sync: store", "object", u.m.Bucket+"/"+u.m.Key, "err", err)
			continue
		}
		updated++
		if !slices.Contains(u.m.Placement, v.self) {
			w.log.Info("manifest sync: shards rebuilt elsewhere, dropping ours", "object", u.m.Bucket+"/"+u.m.Key, "version", u.m.Version)
		}
	}
	return updated, nil
}
