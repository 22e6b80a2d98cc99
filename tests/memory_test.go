package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// Memory bounds of the data path (docs/DATAPATH.md): the gateway's
// resident set stays under gatewayRSSBound and every shard server's under
// shardRSSBound while clients write and read large objects at once.
const (
	gatewayRSSBound = 256 << 20
	shardRSSBound   = 128 << 20
)

// TestMemoryBounds runs, on one regen dev cluster, reads and writes of
// objects of mixed sizes (several read buffer size classes and write
// buffer geometries), then 4 PUTs and 4 GETs of large objects at once
// (64 MiB each; 1 GiB with REGEN_LONG_TESTS), and checks the peak
// resident set (VmHWM) of the gateway and of every shard server against
// the bounds. Every byte read back is checked. The heap the gateway keeps
// afterwards is the unit test stripe.TestMemoryHeldAfterMixedSizes.
func TestMemoryBounds(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector multiplies memory")
	}
	parallel(t)
	size, timeout := int64(64<<20), 5*time.Minute
	if longTests() {
		size, timeout = 1<<30, 20*time.Minute
	}
	d := startDev(t)
	c := d.client(t)
	mustMakeBucket(t, c, "mem")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	const clients = 4
	var sums [clients][]byte
	for i := range clients {
		sums[i] = putStream(ctx, t, c, fmt.Sprint("get-", i), size, uint64(i))
	}
	// First mixed sizes: objects of one stripe whose shards fall in
	// different size classes of the gateway's read buffers (3 MiB:
	// 512 KiB shards, 1.5 MiB: 256 KiB, 700 KiB: 128 KiB), each read by
	// 16 clients at once, so that each class's free list fills, while
	// others write objects of other sizes (other write geometries).
	// What the gateway keeps of them must leave room for the large
	// objects: when each class kept 16 MiB, and write buffers pushed out
	// by another geometry stayed allocated, the gateway went past 256 MiB
	// in the second phase.
	small := []int64{3 << 20, 3<<19 - 5, 700 << 10}
	var smallSums [3][]byte
	for i, n := range small {
		smallSums[i] = putStream(ctx, t, c, fmt.Sprint("small-", i), n, uint64(200+i))
	}
	start := time.Now()
	for i, n := range small {
		each(t, 20, func(j int) error {
			if j >= 16 {
				n := []int64{9 << 20, 13<<20 + 3, 20<<20 + 11, 5<<20 + 7}[j-16]
				putStream(ctx, t, c, fmt.Sprintf("mixed-%d-%d", i, j), n, uint64(1000+10*i+j))
				return nil
			}
			for range 4 {
				if err := getStream(ctx, c, fmt.Sprint("small-", i), n, smallSums[i]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	t.Logf("16 clients reading each of %d sizes, 4 writing others: %v", len(small), time.Since(start).Round(time.Millisecond))
	gw, shard := d.peakRSS(t)
	t.Logf("peak RSS after the mixed sizes: gateway %d MiB, largest shard server %d MiB", gw>>20, shard>>20)

	start = time.Now()
	each(t, 2*clients, func(i int) error {
		if i < clients {
			putStream(ctx, t, c, fmt.Sprint("put-", i), size, uint64(100+i))
			return nil
		}
		return getStream(ctx, c, fmt.Sprint("get-", i-clients), size, sums[i-clients])
	})
	t.Logf("then %d PUTs and %d GETs of %d MiB at once: %v", clients, clients, size>>20, time.Since(start).Round(time.Millisecond))

	gw, shard = d.peakRSS(t)
	t.Logf("peak RSS: gateway %d MiB (bound %d), largest shard server %d MiB (bound %d)", gw>>20, gatewayRSSBound>>20, shard>>20, shardRSSBound>>20)
	if gw > gatewayRSSBound {
		t.Errorf("gateway peak RSS %d MiB, bound %d MiB", gw>>20, gatewayRSSBound>>20)
	}
	if shard > shardRSSBound {
		t.Errorf("shard server peak RSS %d MiB, bound %d MiB", shard>>20, shardRSSBound>>20)
	}
}

// peakRSS is the peak resident set (VmHWM) of the gateway (the regen dev
// process, which runs it in-process) and the largest of the shard
// servers'.
func (d *devCluster) peakRSS(t *testing.T) (gateway, shard int64) {
	t.Helper()
	gateway = peakRSS(t, d.cmd.Process.Pid)
	for _, s := range d.info.Shards {
		shard = max(shard, peakRSS(t, s.PID))
	}
	return gateway, shard
}

// each runs f(0..n-1) at once and fails t with their errors.
func each(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// streamBody is size pseudo-random bytes from seed, made as they are read
// (the test holds no object in memory).
func streamBody(size int64, seed uint64) io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}), size)
}

// putStream uploads streamBody(size, seed) to mem/key in one PUT and
// returns its sha256. It is called from several goroutines: on failure it
// marks t failed and returns nil, which no GET matches.
func putStream(ctx context.Context, t *testing.T, c *minio.Client, key string, size int64, seed uint64) []byte {
	if _, err := c.PutObject(ctx, "mem", key, streamBody(size, seed), size, minio.PutObjectOptions{DisableMultipart: true}); err != nil {
		t.Errorf("put %s (%d bytes): %v", key, size, err)
		return nil
	}
	h := sha256.New()
	io.Copy(h, streamBody(size, seed))
	return h.Sum(nil)
}

// getStream reads mem/key and compares its length and sha256.
func getStream(ctx context.Context, c *minio.Client, key string, size int64, sum []byte) error {
	obj, err := c.GetObject(ctx, "mem", key, minio.GetObjectOptions{})
	if err != nil {
		return fmt.Errorf("get %s: %v", key, err)
	}
	defer obj.Close()
	h := sha256.New()
	n, err := io.Copy(h, obj)
	if err != nil {
		return fmt.Errorf("get %s: %v after %d bytes", key, err, n)
	}
	if n != size || !bytes.Equal(h.Sum(nil), sum) {
		return fmt.Errorf("get %s: %d bytes, want %d, or wrong bytes", key, n, size)
	}
	return nil
}
