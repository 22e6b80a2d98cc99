package repair

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// switchWriteTimeout bounds the write of a manifest switch after its
// fence was read: docs/CONSISTENCY.md counts on a switch written within
// it (a tombstone's collection grace outlasts it).
const switchWriteTimeout = 30 * time.Second

// switchOp is one object version's manifest switch: the state and the
// judgement that switchManifest, switchVersion (one object, one call per
// server) and switchBatch (many objects, one call per server) share, so
// that every answer is judged and every switch decided by the same code
// whichever way its calls were made. Not safe for concurrent use: the
// callers judge the answers after their calls have returned.
//
// A switch is never announced as committed (PathCommitted), unlike a
// PUT: rule 1's argument that any four servers a lookup asks first meet
// every newer version assumes placements a gateway chose, and a switch
// puts the object on a server outside them. With switches announced, a
// chaos run (seed 8383) read an object an acknowledged DELETE had removed
// while its manifest sync was switching it; taking the mark out is the
// conservative answer until the argument is made for switches. Its
// holders are told it is confirmed instead (PathConfirmed,
// notifyConfirmed), which only spares their confirm jobs the asking.
type switchOp struct {
	old        *metadata.Manifest
	noncurrent bool
	k          int // the code's data shards
	// nm is the manifest to write: old with the rebuilt shards' servers
	// in its placement, or an unfinished earlier switch (fenced).
	nm      metadata.Manifest
	rebuilt map[int]Node
	view    nodeView
	// oldLive: old's placement servers live in the view, asked for the
	// fence.
	oldLive []string

	// The fence's answers.
	same   int                // servers that hold exactly old (or finish)
	newer  bool               // a server holds what the switch must not overtake
	finish *metadata.Manifest // the newest unfinished repair switch of old seen

	// targets are the servers the switch is written to (fenced).
	targets []string
	// The write's answers: how many servers store (or hold) it, which
	// (holders), whether one refused it for a newer version.
	ok       int
	holders  []string
	lostRace bool
	errs     []error
}

// newSwitch starts the switch of old (a noncurrent version of its key when
// noncurrent) onto the servers rebuilt holds, with the membership of v.
func (w *Worker) newSwitch(v nodeView, old *metadata.Manifest, rebuilt map[int]Node, noncurrent bool) (*switchOp, error) {
	code, err := w.codes.Get(old.Code)
	if err != nil {
		return nil, err
	}
	op := &switchOp{old: old, noncurrent: noncurrent, k: code.DataShards(), nm: *old, rebuilt: rebuilt, view: v}
	op.nm.Placement = slices.Clone(old.Placement)
	for i, n := range rebuilt {
		op.nm.Placement[i] = n.ID
	}
	writer := repairWriter(w.cfg.NodeID)
	if noncurrent {
		writer = noncurrentWriter(w.cfg.NodeID)
	}
	op.nm.Version = metadata.Version{TS: old.Version.TS + 1, Writer: writer}
	if len(old.Inline) > 0 {
		// NB: the same bytes: the servers that hold them keep them under
		// the key of the version that wrote them (metadata.Manifest.DataOf)
		// instead of writing them again.
		op.nm.DataOf = old.DataVersion()
	}
	for _, id := range old.Placement {
		if op.addr(id) != "" {
			op.oldLive = append(op.oldLive, id)
		}
	}
	return op, nil
}

// addr is the address of server id, "" when it is not live.
func (op *switchOp) addr(id string) string {
	if ni := op.view.nodes[id]; ni.Live {
		return ni.Addr
	}
	return ""
}

// ref names the switched object version in errors.
func (op *switchOp) ref() string {
	if op.noncurrent {
		return fmt.Sprintf("%s/%s version %s", op.old.Bucket, op.old.Key, op.old.S3VersionID())
	}
	return op.old.Bucket + "/" + op.old.Key
}

// fenceAnswer judges what one server of oldLive holds of the key: its
// current manifest cur and its previous versions prev (used by a
// noncurrent switch only), or err when it did not answer. A server that
// holds nothing of the key (cur nil, or not found) counts for nothing.
func (op *switchOp) fenceAnswer(cur *metadata.Manifest, prev []*metadata.Manifest, err error) {
	if err != nil || cur == nil {
		return
	}
	if op.noncurrent {
		// NB: prev may be shared with another switch of the key (a
		// batched answer): appended to a copy.
		f := fenceVersion(op.old, &op.nm, append(prev[:len(prev):len(prev)], cur))
		switch {
		case f.newer:
			op.newer = true
		case f.finish != nil:
			if op.finish == nil || op.finish.Version.Less(f.finish.Version) {
				op.finish = f.finish
			}
			op.same++
		case f.holds:
			op.same++
		}
		return
	}
	switch {
	case cur.Version == op.old.Version:
		op.same++
	case op.old.Version.Less(cur.Version):
		if unfinishedSwitch(op.old, cur) {
			if op.finish == nil || op.finish.Version.Less(cur.Version) {
				op.finish = cur
			}
			op.same++ // it replaced exactly the version being repaired
			return
		}
		op.newer = true
	}
}

// fenced decides on the fence's answers: nil when the switch is to be
// written, nm (an unfinished earlier switch, perhaps) to targets.
func (op *switchOp) fenced() error {
	if op.newer {
		return fmt.Errorf("%w: %s", ErrSuperseded, op.ref())
	}
	if op.noncurrent {
		if need := max(op.k, len(op.oldLive)/2+1); op.same < need {
			// NB: not a failure to retry at once: a version fewer than k
			// servers hold is not visible (a failed write kept below k), or
			// they do not answer now; the next scan looks again.
			return fmt.Errorf("%w: fence %s: %d of %d live servers hold version %s, need %d", errRetryLater, op.ref(), op.same, len(op.oldLive), op.old.Version, need)
		}
	} else if op.same < len(op.oldLive)/2+1 {
		return fmt.Errorf("repair: fence %s: %d of %d live servers confirm version %s", op.ref(), op.same, len(op.oldLive), op.old.Version)
	}
	if op.finish != nil {
		// An earlier attempt (this server's or another coordinator's)
		// stored its switch on too few servers. Its shards were durable
		// and verified before it was written, so finish it rather than
		// fence it out forever; this attempt's shards become garbage.
		op.nm = *op.finish
		if op.nm.Inline == nil {
			// NB: a batched fence reads manifests without their inline
			// data; a repair switch carries its object's unchanged.
			op.nm.Inline = op.old.Inline
		}
		op.rebuilt = map[int]Node{}
		for i, id := range op.finish.Placement {
			if id != op.old.Placement[i] {
				op.rebuilt[i] = Node{ID: id, Addr: op.addr(id)}
			}
		}
	}
	// Write to the old and the new placement.
	op.targets = slices.Clone(op.oldLive)
	for _, i := range slices.Sorted(maps.Keys(op.rebuilt)) {
		if id := op.rebuilt[i].ID; !slices.Contains(op.targets, id) {
			op.targets = append(op.targets, id)
		}
	}
	return nil
}

// wrote judges one target's answer to the write: for a current switch,
// whether it stored nm and the key's current version there after it; for
// a noncurrent one, whether it holds nm's version.
func (op *switchOp) wrote(id string, stored bool, cur metadata.Version, held bool, err error) {
	switch {
	case err != nil:
		op.errs = append(op.errs, fmt.Errorf("node %s: %w", id, err))
	case op.noncurrent && held:
		op.ok++
		op.holders = append(op.holders, id)
	case op.noncurrent:
		op.errs = append(op.errs, fmt.Errorf("node %s: does not hold the switch", id))
	case stored || cur == op.nm.Version:
		op.ok++
		op.holders = append(op.holders, id)
	default:
		op.lostRace = true
	}
}

// result is the switch's outcome once every target answered: done when
// k+1 servers store (or hold) it, like a PUT.
func (op *switchOp) result() error {
	if !op.noncurrent && op.lostRace && op.ok == 0 {
		return fmt.Errorf("%w: %s", ErrSuperseded, op.ref())
	}
	if quorum := min(op.k+1, len(op.targets)); op.ok < quorum {
		verb := "stored"
		if op.noncurrent {
			verb = "hold"
		}
		return fmt.Errorf("repair: switch %s: %d of %d servers %s it, need %d: %w", op.ref(), op.ok, len(op.targets), verb, quorum, errors.Join(op.errs...))
	}
	return nil
}

// confirmer tells shard servers that versions are stored on a write
// quorum, for their confirm jobs only (*shardrpc.Client has it).
type confirmer interface {
	SwitchConfirmed(ctx context.Context, addr string, refs []shardrpc.VersionRef) error
}

// NB: the worker finds the notice by asserting its Shards has it; a
// rename there must not silently turn the notices off.
var _ confirmer = (*shardrpc.Client)(nil)

// noticeTimeout bounds the confirm notices of switches: they are best
// effort.
const noticeTimeout = 5 * time.Second

// notifyConfirmed tells the servers that stored a current switch of ops,
// done on a write quorum (errs[i] nil, more than k holders), that it is
// (shardrpc.PathConfirmed): one call per server for up to
// shardrpc.MaxBatch of ops. Where the switch replaced the repaired
// version, the server's confirm job for it then asks no peer: one notice
// per server and batch instead of n-1 lookups per server and object,
// which at a million objects with a server dead were ~38% of the others'
// CPU. The notice vouches for what the job would find by asking: k+1
// servers stored the switch, so it is visible and nothing takes it back
// (docs/CONSISTENCY.md, rule 5). It marks nothing for readers (see
// switchOp). Best effort: a notice lost, or refused by a server that
// predates the path, only sends the confirm job back to asking.
func (w *Worker) notifyConfirmed(ctx context.Context, v nodeView, ops []*switchOp, errs []error) {
	cm, ok := w.shards.(confirmer)
	if !ok {
		return
	}
	refs := map[string][]shardrpc.VersionRef{}
	for i, op := range ops {
		// NB: a noncurrent version's switch is stored beside the current
		// version, so no confirm job of a holder is about it.
		if errs[i] != nil || op.noncurrent || op.ok <= op.k {
			continue
		}
		ref := shardrpc.VersionRef{Bucket: op.nm.Bucket, Key: op.nm.Key, Version: op.nm.Version}
		for _, id := range op.holders {
			refs[id] = append(refs[id], ref)
		}
	}
	if len(refs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, noticeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for id, rs := range refs {
		addr := v.nodes[id].Addr
		for len(rs) > 0 {
			batch := rs[:min(len(rs), shardrpc.MaxBatch)]
			rs = rs[len(batch):]
			wg.Go(func() {
				if err := cm.SwitchConfirmed(ctx, addr, batch); err != nil && ctx.Err() == nil {
					w.log.Debug("repair: confirm notice", "node", id, "versions", len(batch), "err", err)
				}
			})
		}
	}
	wg.Wait()
}
