package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/internal/placement"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/stripe"
	"github.com/regen-s3/regen/metadata"
)

// deleteKeys deletes keys of bucket, as DeleteObjects asks, with the rules
// of deleteKey but batched: one or two lookup calls and one tombstone call
// per shard server for every MaxBatch keys, instead of one of each per key
// and server. A key whose answers do not decide (servers down, a lease
// held, a placement moved past the first servers) goes through deleteKey
// on its own. errs[i] is keys[i]'s outcome.
//
// ctx bounds the batched lookup; the batched tombstone writes get an
// operation's time of their own (opContext), as each key sent on alone
// does: under load a lookup of 1000 keys can take most of one, and the
// tombstones that then ran out of time failed every key of the request
// (TestDeleteManyThenDeleteBucket at load 75: 1000 of 1000 SlowDown).
func (g *Gateway) deleteKeys(ctx context.Context, bucket string, keys []string) []error {
	errs, _ := g.deleteBatch(ctx, bucket, keys, nil)
	return errs
}

// deleteMarkers is DeleteObjects' entries without a version ID in a
// versioned (versioned) or suspended bucket: a delete marker for each
// key, as writeDeleteMarker writes one, batched as deleteKeys batches
// tombstones. It returns each key's outcome and, for those that
// succeeded, the marker written (its version ID is the response's
// DeleteMarkerVersionId).
func (g *Gateway) deleteMarkers(ctx context.Context, bucket string, keys []string, versioned bool) ([]error, []*metadata.Manifest) {
	return g.deleteBatch(ctx, bucket, keys, &markerMode{versioned: versioned, placeAbsent: func(ctx context.Context, key string) (*metadata.Manifest, error) {
		return g.emptyPlacement(ctx, bucket, key)
	}})
}

// markerMode makes deleteBatch write delete markers instead of
// tombstones: over whatever version is current (a live one, a marker),
// and over no version at all, as a versioned bucket's DELETE does.
type markerMode struct {
	// versioned: markers with version IDs of their own (versioning
	// Enabled); else null markers (Suspended).
	versioned bool
	// placeAbsent places the marker of a key that has no version
	// (emptyPlacement).
	placeAbsent func(ctx context.Context, key string) (*metadata.Manifest, error)
}

// deleteBatch is deleteKeys (markers nil) and deleteMarkers: it returns
// each key's outcome and the tombstone or marker written for it, nil where
// none was needed (an unversioned key absent or deleted already) or the
// key failed.
func (g *Gateway) deleteBatch(ctx context.Context, bucket string, keys []string, markers *markerMode) ([]error, []*metadata.Manifest) {
	l := g.layer
	errs := make([]error, len(keys))
	written := make([]*metadata.Manifest, len(keys))
	ids := l.shardIDs()
	_, addrs := l.liveShards()
	width := max(l.maxN, 1)

	// Look every key up on the first servers of its order: firstAsk live
	// ones first, as many as k votes need (see lookup), then the rest of
	// the first maxN for the keys they leave undecided.
	firsts := make([][]string, len(keys))
	later := make([][]string, len(keys))
	votes := make([]*manifestVote, len(keys))
	byServer := map[string][]int{}
	for i, key := range keys {
		order := placement.Order(placementKey(bucket, key), ids)
		firsts[i] = order[:min(len(order), width)]
		votes[i] = newVote()
		asked := 0
		for _, id := range firsts[i] {
			_, live := addrs[id]
			switch {
			case !live:
				votes[i].fail(nil)
			case asked < l.firstAsk(len(firsts[i])):
				byServer[id] = append(byServer[id], i)
				asked++
			default:
				later[i] = append(later[i], id)
			}
		}
	}
	l.lookupBatch(ctx, bucket, keys, byServer, addrs, votes)
	verdicts := make([]verdict, len(keys))
	found := make([]*metadata.Manifest, len(keys))
	byServer = map[string][]int{}
	for i := range keys {
		found[i], verdicts[i] = l.decide(votes[i], firsts[i])
		if verdicts[i] == verdictUnsure {
			for _, id := range later[i] {
				byServer[id] = append(byServer[id], i)
			}
		}
	}
	if len(byServer) > 0 {
		l.lookupBatch(ctx, bucket, keys, byServer, addrs, votes)
		for i := range keys {
			if verdicts[i] == verdictUnsure {
				found[i], verdicts[i] = l.decide(votes[i], firsts[i])
			}
		}
	}

	// Tombstones for the keys that hold an object; markers for every key.
	var slow []int
	var tombs []*metadata.Manifest
	var tombKey []int
	for i := range keys {
		m, verdict := found[i], verdicts[i]
		switch {
		case verdict != verdictFound && verdict != verdictAbsent:
			slow = append(slow, i)
			continue
		case markers != nil && verdict == verdictAbsent:
			var err error
			if m, err = markers.placeAbsent(ctx, keys[i]); err != nil {
				errs[i] = err
				continue
			}
		case markers != nil:
			// A marker goes over a marker too, as S3 does.
		case verdict == verdictAbsent, m.Deleted:
			continue
		}
		t := l.tombstone(m)
		if markers != nil {
			t.Versioned = markers.versioned
		}
		tombs = append(tombs, t)
		tombKey = append(tombKey, i)
	}

	// Write the tombstones, batched per server of their placements.
	var mu sync.Mutex
	var eg errgroup.Group
	eg.SetLimit(32)
	tctx, cancel := g.opContext()
	defer cancel()
	stored := make([][]string, len(tombs)) // addresses that stored each
	failed := make([][]error, len(tombs))
	replaced := make([]bool, len(tombs)) // on some server that stored it
	byServer = map[string][]int{}
	for t, m := range tombs {
		for _, id := range m.Placement {
			if _, live := addrs[id]; live {
				byServer[id] = append(byServer[id], t)
			}
		}
	}
	for id, idx := range byServer {
		for chunk := range slices.Chunk(idx, shardrpc.MaxBatch) {
			eg.Go(func() error {
				ms := make([]*metadata.Manifest, len(chunk))
				for j, t := range chunk {
					ms[j] = tombs[t]
				}
				res, err := l.shards.PutManifestsFenced(tctx, addrs[id], ms, shardrpc.NoLease)
				mu.Lock()
				defer mu.Unlock()
				for j, t := range chunk {
					switch {
					case err != nil:
						failed[t] = append(failed[t], fmt.Errorf("node %s: %w", id, err))
					case res[j].Err() != nil:
						failed[t] = append(failed[t], fmt.Errorf("node %s: %w", id, res[j].Err()))
					case res[j].Current != nil && tombs[t].Version.Less(*res[j].Current):
						// A newer write got there first: as in
						// storeManifest, the clock moves past it and
						// the key is deleted again, on its own.
						l.clock.observe(*res[j].Current)
						failed[t] = append(failed[t], fmt.Errorf("node %s: %w: %s over %s", id, errNewer, *res[j].Current, tombs[t].Version))
					default:
						stored[t] = append(stored[t], addrs[id])
						replaced[t] = replaced[t] || res[j].Replaced
					}
				}
				return nil
			})
		}
	}
	eg.Wait()
	for t, m := range tombs {
		i := tombKey[t]
		quorum := l.writeQuorum(m)
		if len(stored[t]) >= quorum {
			if l.notify != nil {
				// NB: a tombstone replaced the version it deletes; a
				// versioned marker keeps it, and is urgent only where
				// the server says it replaced one (storeManifest).
				l.notify.committed(m, stored[t], markers == nil || replaced[t])
			}
			written[i] = m
			continue
		}
		qerr := &stripe.QuorumError{Op: "tombstone write", Want: quorum, Got: len(stored[t]), Errs: failed[t]}
		switch {
		case len(stored[t]) < l.readQuorum(m) && (errors.Is(qerr, shardrpc.ErrLeaseHeld) || errors.Is(qerr, errNewer)):
			// Refused: taken back and deleted again on its own, with a
			// newer version. Only below k: once k servers hold the
			// tombstone a read may have seen the key deleted, and a
			// second tombstone over the newer write that refused this
			// one would make the request take effect twice (see fenced);
			// then this same tombstone is completed or fails, below.
			l.abortManifest(m, stored[t])
			slow = append(slow, i)
		default:
			// NB: a batch call that failed (timed out on a busy server)
			// fails every key it carried; each such tombstone is sent
			// again to its missing servers one by one, as DELETE would,
			// and fails only if that cannot complete its quorum.
			if errs[i] = l.completeTombstone(tctx, m, stored[t], quorum); errs[i] == nil {
				written[i] = m
			}
		}
	}

	// The undecided keys, one by one.
	sem := make(chan struct{}, deleteParallelism)
	var wg sync.WaitGroup
	for _, i := range slow {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			kctx, cancel := g.opContext()
			defer cancel()
			if markers != nil {
				m, err := g.writeDeleteMarker(kctx, bucket, keys[i], markers.versioned)
				if errs[i] = err; err == nil {
					written[i] = m
				}
				return
			}
			errs[i] = g.deleteKey(kctx, bucket, keys[i])
		})
	}
	wg.Wait()
	return errs, written
}

// lookupBatch asks each server of byServer for the versions of the keys
// it lists (indexes into keys), MaxBatch keys a call, and counts the
// answers into votes.
func (l *layer) lookupBatch(ctx context.Context, bucket string, keys []string, byServer map[string][]int, addrs map[string]string, votes []*manifestVote) {
	var mu sync.Mutex
	var eg errgroup.Group
	eg.SetLimit(32)
	for id, idx := range byServer {
		for chunk := range slices.Chunk(idx, shardrpc.MaxBatch) {
			eg.Go(func() error {
				names := make([]string, len(chunk))
				for j, i := range chunk {
					names[j] = keys[i]
				}
				res, err := l.shards.GetManifestVersionsBatch(ctx, addrs[id], bucket, names)
				mu.Lock()
				defer mu.Unlock()
				for j, i := range chunk {
					switch {
					case err != nil:
						votes[i].fail(err)
					case res[j].Err != "":
						votes[i].fail(fmt.Errorf("node %s: %s", id, res[j].Err))
					case res[j].Current == nil:
						votes[i].add(l, id, nil, false)
					default:
						votes[i].add(l, id, append([]*metadata.Manifest{res[j].Current}, res[j].Previous...), res[j].Committed)
					}
				}
				return nil
			})
		}
	}
	eg.Wait()
}

// completeTombstone sends tombstone m, which the servers in stored hold,
// to the other live servers of its placement one by one until quorum hold
// it. Short of quorum it is taken back below k (as storeManifest does) and
// the delete fails (503).
func (l *layer) completeTombstone(ctx context.Context, m *metadata.Manifest, stored []string, quorum int) error {
	_, addrs := l.liveShards()
	var rest []string
	for _, id := range m.Placement {
		if a, live := addrs[id]; live && !slices.Contains(stored, a) {
			rest = append(rest, id)
		}
	}
	more, _, errs := l.putOnLive(ctx, m, rest, shardrpc.NoLease)
	all := append(slices.Clone(stored), more...)
	if len(all) >= quorum {
		if l.notify != nil {
			l.notify.committed(m, all, true)
		}
		return nil
	}
	if len(all) < l.readQuorum(m) {
		l.abortManifest(m, all)
	}
	return &stripe.QuorumError{Op: "tombstone write", Want: quorum, Got: len(all), Errs: errs}
}
