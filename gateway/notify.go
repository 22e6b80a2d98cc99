package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// notifier tells shard servers which of their manifests a write quorum
// stored (shardrpc.PathConfirmed): their confirm jobs need not ask the
// peers. It used to send shardrpc.PathCommitted, on which servers also
// wrote a committed mark into the record; lookups stopped reading marks
// (decide, chaos seed 8383), so the mark was a pebble write per notice
// that nobody read. A server that predates PathConfirmed answers 404:
// the notice is lost and its confirm job asks its peers, as for any
// notice dropped. It batches notices per server and is best effort: when
// its queue is full or it is not running (Serve not called), notices are
// dropped; servers then ask.
//
// A notice for a write that replaced a version (urgent) goes within
// notifyEvery, before the server's confirm job may run (at once for a
// hot key, metadata.MaxPrevious); the others wait up to markEvery, so
// that a stream of small PUTs costs a few notices a second per server
// rather than one per write.
type notifier struct {
	shards ShardAPI
	queue  chan notice
}

type notice struct {
	addr   string
	ref    shardrpc.VersionRef
	urgent bool
}

const (
	notifyEvery = 20 * time.Millisecond
	markEvery   = 250 * time.Millisecond
	notifyQueue = 1 << 14
)

func newNotifier(shards ShardAPI) *notifier {
	return &notifier{shards: shards, queue: make(chan notice, notifyQueue)}
}

// committed notes that m is stored on a write quorum, to tell addrs (the
// servers that stored it); urgent when it replaced a version on one of
// them.
func (n *notifier) committed(m *metadata.Manifest, addrs []string, urgent bool) {
	ref := shardrpc.VersionRef{Bucket: m.Bucket, Key: m.Key, Version: m.Version}
	for _, a := range addrs {
		select {
		case n.queue <- notice{addr: a, ref: ref, urgent: urgent}:
		default: // full: the server's confirm job asks instead
		}
	}
}

// run sends the queued notices until ctx ends.
func (n *notifier) run(ctx context.Context) {
	// NB: the ticker runs only while notices are pending (tickC is nil
	// otherwise): an idle gateway need not wake 50 times a second.
	tick := time.NewTicker(notifyEvery)
	tick.Stop()
	defer tick.Stop()
	var tickC <-chan time.Time
	pending := map[string][]shardrpc.VersionRef{}
	urgent, last := false, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case nt := <-n.queue:
			pending[nt.addr] = append(pending[nt.addr], nt.ref)
			urgent = urgent || nt.urgent
			if tickC == nil {
				tick.Reset(notifyEvery)
				tickC = tick.C
			}
		case now := <-tickC:
			if urgent || now.Sub(last) >= markEvery {
				n.flush(ctx, pending)
				pending = map[string][]shardrpc.VersionRef{}
				urgent, last = false, now
				tick.Stop()
				tickC = nil
			}
		}
	}
}

func (n *notifier) flush(ctx context.Context, pending map[string][]shardrpc.VersionRef) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for addr, refs := range pending {
		for len(refs) > 0 {
			batch := refs[:min(len(refs), shardrpc.MaxBatch)]
			refs = refs[len(batch):]
			wg.Go(func() { n.shards.Confirmed(ctx, addr, batch) })
		}
	}
	wg.Wait()
}
