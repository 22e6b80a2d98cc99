package repair

import (
	"context"
	"errors"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/internal/shardrpc"
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
	for _, m := range local {
		g.Go(func() error {
			best := m
			for _, id := range m.Placement {
				ni := v.nodes[id]
				if id == v.self || !ni.Live {
					continue
				}
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				cur, err := w.shards.GetManifest(cctx, ni.Addr, m.Bucket, m.Key)
				cancel()
				if errors.Is(err, shardrpc.ErrNotFound) || err != nil {
					continue
				}
				if best.Version.Less(cur.Version) {
					best = cur
				}
			}
			if best != m {
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
