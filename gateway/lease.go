package gateway

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/pause"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// Per-key leases make check-and-set atomic across gateways: a conditional
// write, a multipart completion with a precondition or a metadata update
// holds the key's lease on the servers it will write the manifest to
// while it reads the current manifest and writes the new one. Every other
// write of the key is fenced by the same lease: shard servers refuse a
// manifest write made without the lease while someone holds it (see
// shardrpc.PutManifestFenced), and refuse the holder's own writes once
// its lease has expired, so nothing lands between the check and the set.
// Leases expire, so a gateway that dies holding one blocks the key for at
// most leaseTTL. A bucket's record has a lease of the same kind
// (underRecordLease), held by every change of the record from its read to its
// write and checked by the servers the same way (updateBucket); so has an
// access key's record, and an access key's name while a key of that name
// is created (updateAccessKey, createAccessKey).
const (
	leaseTTL = 30 * time.Second
	// leaseWait is how long a writer waits for a contended key before
	// answering ConditionalRequestConflict (conditional) or 503; a
	// bucket or access key record's update answers OperationAborted.
	leaseWait = 10 * time.Second
)

// keyLease is a held lease; release it when the check-and-set is done.
type keyLease struct {
	l      *layer
	name   string
	holder string
	addrs  []string // where it was acquired
	// until is when the lease runs out: writes under it must be done
	// before (the servers refuse them after).
	until time.Time
}

// errLeaseHeld: another writer holds the key's lease.
var errLeaseHeld = apiErr("ConditionalRequestConflict", "A conflicting operation occurred. If using PutObject you can retry the request. If using multipart upload you should initiate another CompleteMultipartUpload request.")

// lockKey acquires the lease of bucket/key on the live servers among
// nodes, the ones its manifest will be written to, and succeeds once need
// of them granted it; it waits up to leaseWait for other holders.
func (l *layer) lockKey(ctx context.Context, bucket, key string, nodes []string, need int) (*keyLease, error) {
	return l.lock(ctx, shardrpc.LeaseName(bucket, key), nodes, need)
}

// underRecordLease runs fn holding lease name on a majority of the live
// shard servers, where the records kept on every server (buckets', access
// keys') are read and written: fn gets ctx bounded by the lease's end
// (keyLease.context) and the holder that fences its writes. Contended for
// leaseWait, it returns aborted and fn does not run. Every change of such
// a record goes through it (updateBucket, updateAccessKey,
// createAccessKey).
func (l *layer) underRecordLease(ctx context.Context, name string, aborted error, fn func(ctx context.Context, holder string) error) error {
	ids, _ := l.liveShards()
	if len(ids) == 0 {
		return fmt.Errorf("%w: no live shard servers", errUnavailable)
	}
	kl, err := l.lock(ctx, name, ids, len(ids)/2+1)
	if errors.Is(err, errLeaseHeld) {
		return aborted
	}
	if err != nil {
		return err
	}
	defer kl.release()
	lctx, cancel := kl.context(ctx)
	defer cancel()
	return fn(lctx, kl.holder)
}

// lock acquires lease name on the live servers among nodes and succeeds
// once need of them granted it.
func (l *layer) lock(ctx context.Context, name string, nodes []string, need int) (*keyLease, error) {
	_, addrs := l.liveShards()
	kl := &keyLease{l: l, name: name, holder: l.clock.writer + "/" + newFileID()}
	deadline := time.Now().Add(leaseWait)
	for {
		start := time.Now()
		ok, errs := l.onLive(nodes, func(_, addr string) error {
			return l.shards.AcquireLease(ctx, addr, kl.name, kl.holder, leaseTTL)
		})
		held := false
		for _, err := range errs {
			if errors.Is(err, shardrpc.ErrLeaseHeld) {
				held = true
			}
		}
		kl.addrs = kl.addrs[:0]
		for _, id := range nodes {
			if a, live := addrs[id]; live {
				kl.addrs = append(kl.addrs, a)
			}
		}
		if ok >= need {
			// Counted from before the request: the servers' leases run
			// out no earlier than this.
			kl.until = start.Add(leaseTTL)
			return kl, nil
		}
		kl.release()
		if !held || time.Now().After(deadline) {
			if held {
				return nil, errLeaseHeld
			}
			return nil, errUnavailable
		}
		if err := leaseBackoff(ctx); err != nil {
			return nil, err
		}
	}
}

// leaseBackoff waits a few random milliseconds before a contended key is
// tried again.
func leaseBackoff(ctx context.Context) error {
	return pause.For(ctx, time.Duration(5+rand.IntN(45))*time.Millisecond)
}

// context bounds ctx by the lease's end, so no write under the lease is
// still being sent when the servers stop honouring it.
func (kl *keyLease) context(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, kl.until.Add(-time.Second))
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
