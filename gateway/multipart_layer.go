package gateway

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/internal/placement"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/stripe"
	"github.com/regen-s3/regen/metadata"
)

// errNoUpload: the upload ID names no open upload of this key.
var errNoUpload = errors.New("no such upload")

// onLive runs f for every live server among nodes, in parallel, and
// returns how many succeeded and the errors of the others.
func (l *layer) onLive(nodes []string, f func(id, addr string) error) (int, []error) {
	_, addrs := l.liveShards()
	var mu sync.Mutex
	ok := 0
	var errs []error
	var g errgroup.Group
	for _, id := range nodes {
		addr, live := addrs[id]
		if !live {
			continue
		}
		g.Go(func() error {
			err := f(id, addr)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", id, err))
			} else {
				ok++
			}
			return nil
		})
	}
	g.Wait()
	return ok, errs
}

// createUpload stores the upload record on its placement servers.
func (l *layer) createUpload(ctx context.Context, u *metadata.Upload, quorum int) error {
	ok, errs := l.onLive(u.Placement, func(_, addr string) error { return l.shards.PutUpload(ctx, addr, u) })
	if ok < quorum {
		return &stripe.QuorumError{Op: "upload create", Want: quorum, Got: ok, Errs: errs}
	}
	return nil
}

// getUpload finds the record of an open upload. Records never change
// after creation, so the first server that has it answers for all; the
// key's rendezvous order is walked like a manifest lookup.
func (l *layer) getUpload(ctx context.Context, bucket, key, id string) (*metadata.Upload, error) {
	ids, addrs := l.liveShards()
	order := placement.Order(placementKey(bucket, key), ids)
	var errs []error
	for start := 0; start < len(order); start += max(l.maxN, 1) {
		batch := order[start:min(len(order), start+max(l.maxN, 1))]
		var mu sync.Mutex
		var found *metadata.Upload
		var g errgroup.Group
		for _, n := range batch {
			g.Go(func() error {
				u, err := l.shards.GetUpload(ctx, addrs[n], bucket, key, id)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					found = u
				case !errors.Is(err, shardrpc.ErrNotFound):
					errs = append(errs, err)
				}
				return nil
			})
		}
		g.Wait()
		if found != nil {
			return found, nil
		}
	}
	if len(errs) > len(order)/2 {
		return nil, fmt.Errorf("%w: upload %s: %w", errUnavailable, id, errors.Join(errs...))
	}
	return nil, errNoUpload
}

// putPart records an uploaded part on the upload's placement servers.
func (l *layer) putPart(ctx context.Context, u *metadata.Upload, p *metadata.UploadPart, quorum int) error {
	ok, errs := l.onLive(u.Placement, func(_, addr string) error {
		_, err := l.shards.PutUploadPart(ctx, addr, u.Bucket, u.Key, p)
		return err
	})
	if ok < quorum {
		return &stripe.QuorumError{Op: "part record write", Want: quorum, Got: ok, Errs: errs}
	}
	return nil
}

// listParts merges the part records of the placement servers: for each
// part number the newest version that at least need servers confirm
// (the read rule of manifests), in part-number order.
func (l *layer) listParts(ctx context.Context, u *metadata.Upload, need int) ([]metadata.UploadPart, error) {
	type vote struct {
		p *metadata.UploadPart
		n int
	}
	var mu sync.Mutex
	votes := map[int]map[metadata.Version]*vote{}
	ok, errs := l.onLive(u.Placement, func(_, addr string) error {
		ps, err := l.shards.ListUploadParts(ctx, addr, u.ID)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range ps {
			p := &ps[i]
			if votes[p.Number] == nil {
				votes[p.Number] = map[metadata.Version]*vote{}
			}
			v := votes[p.Number][p.Version]
			if v == nil {
				v = &vote{p: p}
				votes[p.Number][p.Version] = v
			}
			v.n++
		}
		return nil
	})
	if ok < need {
		return nil, &stripe.QuorumError{Op: "part list", Want: need, Got: ok, Errs: errs}
	}
	var out []metadata.UploadPart
	for _, byVer := range votes {
		var best *metadata.UploadPart
		for ver, v := range byVer {
			if v.n >= need && (best == nil || best.Version.Less(ver)) {
				best = v.p
			}
		}
		if best != nil {
			out = append(out, *best)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, nil
}

// finishUpload removes the upload from its placement servers; keep lists
// the part file IDs the completed object uses. Servers that miss it drop
// the upload when it expires.
func (l *layer) finishUpload(ctx context.Context, u *metadata.Upload, keep []string) int {
	ok, errs := l.onLive(u.Placement, func(_, addr string) error {
		err := l.shards.FinishUpload(ctx, addr, shardrpc.FinishRequest{Bucket: u.Bucket, Key: u.Key, Upload: u.ID, Keep: keep})
		if errors.Is(err, shardrpc.ErrNotFound) {
			return nil
		}
		return err
	})
	if len(errs) > 0 {
		l.log.Warn("finishing upload left records behind; they expire", "upload", u.ID, "errs", errors.Join(errs...))
	}
	return ok
}

// listUploads merges the open uploads of every live server, deduplicated,
// in (key, upload ID) order; up to max of them, and whether more follow.
func (l *layer) listUploads(ctx context.Context, q metadata.UploadQuery, max int) ([]metadata.Upload, bool, error) {
	ids, _ := l.liveShards()
	var mu sync.Mutex
	seen := map[string]bool{}
	var all []metadata.Upload
	truncatedAny := false
	q.Limit = max + 1
	ok, errs := l.onLive(ids, func(_, addr string) error {
		us, truncated, err := l.shards.ListUploads(ctx, addr, q)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		truncatedAny = truncatedAny || truncated
		for _, u := range us {
			if !seen[u.ID] {
				seen[u.ID] = true
				all = append(all, u)
			}
		}
		return nil
	})
	if ok == 0 && len(errs) > 0 {
		return nil, false, fmt.Errorf("%w: list uploads: %w", errUnavailable, errors.Join(errs...))
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Key != all[j].Key {
			return all[i].Key < all[j].Key
		}
		return all[i].ID < all[j].ID
	})
	if len(all) > max {
		return all[:max], true, nil
	}
	return all, truncatedAny && len(all) == max, nil
}
