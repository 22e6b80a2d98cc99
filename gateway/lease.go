package gateway

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/placement"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// Per-key leases make check-and-set atomic across gateways: a conditional
// write or a multipart completion holds the key's lease on a majority of
// the key's first servers (rendezvous order) while it reads the current
// manifest and writes the new one. Leases expire, so a gateway that dies
// holding one blocks the key for at most leaseTTL.
const (
	leaseTTL = 30 * time.Second
	// leaseWait is how long a writer waits for a contended key before
	// answering ConditionalRequestConflict.
	leaseWait = 10 * time.Second
)

// keyLease is a held lease; release it when the check-and-set is done.
type keyLease struct {
	l      *layer
	name   string
	holder string
	addrs  []string // where it was acquired
}

// lockKey acquires the lease of bucket/key, waiting up to leaseWait for
// other holders.
func (l *layer) lockKey(ctx context.Context, bucket, key string) (*keyLease, error) {
	ids, addrs := l.liveShards()
	order := placement.Order(placementKey(bucket, key), ids)
	n := min(len(order), max(l.maxN, 1))
	if n == 0 {
		return nil, errUnavailable
	}
	servers := order[:n]
	need := n/2 + 1
	kl := &keyLease{l: l, name: "obj/" + placementKey(bucket, key), holder: l.clock.writer + "/" + newFileID()}
	deadline := time.Now().Add(leaseWait)
	for {
		var got []string
		held := false
		ok, errs := l.onLive(servers, func(_, addr string) error {
			return l.shards.AcquireLease(ctx, addr, kl.name, kl.holder, leaseTTL)
		})
		for _, err := range errs {
			if errors.Is(err, shardrpc.ErrLeaseHeld) {
				held = true
			}
		}
		for _, id := range servers {
			if a, live := addrs[id]; live {
				got = append(got, a)
			}
		}
		kl.addrs = got
		if ok >= need {
			return kl, nil
		}
		kl.release()
		if !held || time.Now().After(deadline) {
			if held {
				return nil, apiErr("ConditionalRequestConflict", "A conflicting operation occurred. If using PutObject you can retry the request. If using multipart upload you should initiate another CompleteMultipartUpload request.")
			}
			return nil, errUnavailable
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(5+rand.IntN(45)) * time.Millisecond):
		}
	}
}

// release gives the lease up everywhere it may have been taken.
func (kl *keyLease) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, addr := range kl.addrs {
		wg.Go(func() { kl.l.shards.ReleaseLease(ctx, addr, kl.name, kl.holder) })
	}
	wg.Wait()
}
