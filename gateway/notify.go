package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// notifier tells shard servers which of their manifests a write quorum
// stored (shardrpc.PathCommitted), so their confirm jobs need not ask the
// peers. It batches notices per server, a flush every notifyEvery, and is
// best effort: when its queue is full or it is not running (Serve not
// called), notices are dropped and the servers ask, as they always could.
type notifier struct {
	shards ShardAPI
	queue  chan notice
}

type notice struct {
	addr string
	ref  shardrpc.VersionRef
}

const (
	notifyEvery = 20 * time.Millisecond
	notifyQueue = 1 << 14
)

func newNotifier(shards ShardAPI) *notifier {
	return &notifier{shards: shards, queue: make(chan notice, notifyQueue)}
}

// committed notes that m is stored on a write quorum, to tell addrs.
func (n *notifier) committed(m *metadata.Manifest, addrs []string) {
	ref := shardrpc.VersionRef{Bucket: m.Bucket, Key: m.Key, Version: m.Version}
	for _, a := range addrs {
		select {
		case n.queue <- notice{addr: a, ref: ref}:
		default: // full: the server's confirm job asks instead
		}
	}
}

// run sends the queued notices until ctx ends.
func (n *notifier) run(ctx context.Context) {
	tick := time.NewTicker(notifyEvery)
	defer tick.Stop()
	pending := map[string][]shardrpc.VersionRef{}
	for {
		select {
		case <-ctx.Done():
			return
		case nt := <-n.queue:
			pending[nt.addr] = append(pending[nt.addr], nt.ref)
		case <-tick.C:
			if len(pending) > 0 {
				n.flush(ctx, pending)
				pending = map[string][]shardrpc.VersionRef{}
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
			wg.Go(func() { n.shards.Committed(ctx, addr, batch) })
		}
	}
	wg.Wait()
}
