package repair

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/regen-s3/regen/codec"
)

// Calibrate measures this machine and returns base with its CPU and disk
// constants replaced: RS and Clay decoding, the per-byte cost of the data
// path (checksumming and a loopback TCP copy), one fsync's latency and the
// durable write rate of a file in dir. It takes a fraction of a second.
// CPU rates are measured in process CPU time (processCPU), so servers
// calibrating side by side on a busy host agree; each measurement keeps
// the best of a few runs. Rates it cannot measure stay as in base.
func Calibrate(ctx context.Context, dir string, base CostModel) (CostModel, error) {
	cm := base
	cm.Cores = float64(runtime.NumCPU())
	const size = 4 << 20
	best := func(f func() (float64, error)) (float64, error) {
		var top float64
		for range 3 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			r, err := f()
			if err != nil {
				return 0, err
			}
			top = max(top, r)
		}
		return top, nil
	}
	var err error
	if cm.Decode, err = best(func() (float64, error) { return decodeRate("rs-6-3", size, false) }); err != nil {
		return base, err
	}
	if cm.MSRDecode, err = best(func() (float64, error) { return decodeRate("clay-6-3", size, true) }); err != nil {
		return base, err
	}
	if cm.Move, err = best(func() (float64, error) { return moveRate(size) }); err != nil {
		return base, err
	}
	fs, wr, err := diskRates(dir, size)
	if err != nil {
		return base, err
	}
	cm.Fsync, cm.Default.DiskWrite = fs, wr
	return cm, nil
}

// decodeRate rebuilds one shard of a code from the others and returns,
// for RS, survivor bytes combined per second (k·b/s) and, for an MSR
// code (rebuilt), rebuilt bytes per second.
func decodeRate(name string, size int, rebuilt bool) (float64, error) {
	c, err := codec.Parse(name)
	if err != nil {
		return 0, err
	}
	k, n := c.DataShards(), c.TotalShards()
	m := c.ShardMultiple()
	b := (size / k / m) * m
	shards := make([][]byte, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range shards {
		shards[i] = make([]byte, b)
		if i < k {
			for j := range shards[i] {
				shards[i][j] = byte(rng.Uint32())
			}
		}
	}
	if err := c.Encode(shards); err != nil {
		return 0, fmt.Errorf("repair: calibrate %s: %w", name, err)
	}
	need := make([]bool, n)
	need[0] = true
	meter := startMeter()
	shards[0] = nil
	if err := c.ReconstructSome(shards, need); err != nil {
		return 0, fmt.Errorf("repair: calibrate %s: %w", name, err)
	}
	secs := meter.seconds()
	if rebuilt {
		return float64(b) / secs, nil
	}
	return float64(k*b) / secs, nil
}

// moveRate sends size bytes over a loopback TCP connection, checksummed
// on both ends, and returns bytes per second per core: both ends run at
// once, so the pair's rate is each byte's send plus receive cost, which
// is what Move counts twice for a byte between servers.
func moveRate(size int) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("repair: calibrate: %w", err)
	}
	defer ln.Close()
	data := bytes.Repeat([]byte{0x5a}, size)
	tab := crc32.MakeTable(crc32.Castagnoli)
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		h := crc32.New(tab)
		_, err = io.Copy(h, c)
		done <- err
	}()
	meter := startMeter()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("repair: calibrate: %w", err)
	}
	crc32.Checksum(data, tab)
	if _, err := c.Write(data); err != nil {
		c.Close()
		return 0, fmt.Errorf("repair: calibrate: %w", err)
	}
	c.Close()
	if err := <-done; err != nil {
		return 0, fmt.Errorf("repair: calibrate: %w", err)
	}
	if !meter.ok {
		// Wall time on up to two cores: count the core-seconds.
		return 2 * float64(size) / (meter.seconds() * min(float64(runtime.NumCPU()), 2)), nil
	}
	// One byte cost a send and a receive (2 units of Move) in the
	// CPU-seconds both ends spent.
	return 2 * float64(size) / meter.seconds(), nil
}

// diskRates writes size bytes to a file in dir and fsyncs it, then does
// a few small fsync'd writes; it returns the median small fsync and the
// durable write rate of the large write.
func diskRates(dir string, size int) (time.Duration, float64, error) {
	f, err := os.CreateTemp(dir, ".calibrate-*")
	if err != nil {
		return 0, 0, fmt.Errorf("repair: calibrate disk: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var syncs []time.Duration
	small := make([]byte, 4096)
	for range 5 {
		t0 := time.Now()
		if _, err := f.Write(small); err != nil {
			return 0, 0, fmt.Errorf("repair: calibrate disk: %w", err)
		}
		if err := f.Sync(); err != nil {
			return 0, 0, fmt.Errorf("repair: calibrate disk: %w", err)
		}
		syncs = append(syncs, time.Since(t0))
	}
	slices.Sort(syncs)
	fsync := syncs[len(syncs)/2]
	big := make([]byte, size)
	t0 := time.Now()
	if _, err := f.Write(big); err != nil {
		return 0, 0, fmt.Errorf("repair: calibrate disk: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, 0, fmt.Errorf("repair: calibrate disk: %w", err)
	}
	// The big write's own fsync is part of what a shard costs, so its
	// rate includes it; take the fixed fsync out so it is not counted twice.
	secs := time.Since(t0).Seconds() - fsync.Seconds()
	if secs <= 0 {
		// The big write was faster than one small fsync: a noisy
		// measurement, not a disk. Count the whole write.
		secs = max(time.Since(t0).Seconds(), 1e-6)
	}
	return fsync, float64(size) / secs, nil
}

// shardDeleter is how calibratePath removes its probe shard
// (*shardrpc.Client has it).
type shardDeleter interface {
	DeleteShard(ctx context.Context, addr, fileID string, idx int) error
}

// calibratePath measures this server's own data path, the one repairs
// use: a small durable PUT (a request's fixed cost, fsync included) and
// a few MiB PUT and GET back over HTTP, checksummed at both ends. The
// loopback copy of Calibrate misses the HTTP stack, the block checksums
// and the file I/O, which on a small machine cost several times more per
// byte. It sets the model's Move and Setup; on any error the model stays
// as it was. Each measurement keeps the best of three runs.
func (c *calibrator) calibratePath(ctx context.Context) {
	var addr string
	for range 50 {
		if addr = c.view().nodes[c.self].Addr; addr != "" || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if addr == "" {
		return
	}
	const size = 4 << 20
	id := fmt.Sprintf("repaircal-%d", time.Now().UnixNano())
	if d, ok := c.shards.(shardDeleter); ok {
		defer func() {
			for _, idx := range []int{0, 1} {
				_ = d.DeleteShard(context.WithoutCancel(ctx), addr, id, idx)
			}
		}()
	}
	small := make([]byte, 4096)
	big := bytes.Repeat([]byte{0xa5}, size)
	// timeIt keeps the best of three runs, in wall time (a small PUT is
	// latency: an fsync and round trips) or in CPU time (a big one is
	// the bytes' cost through both ends, this process being both).
	timeIt := func(cpu bool, f func() error) (time.Duration, error) {
		best := time.Duration(math.MaxInt64)
		for range 3 {
			t0, m := time.Now(), startMeter()
			if err := f(); err != nil {
				return 0, err
			}
			d := time.Since(t0)
			if cpu {
				d = time.Duration(m.seconds() * float64(time.Second))
			}
			best = min(best, d)
		}
		return best, nil
	}
	tSmall, err := timeIt(false, func() error {
		_, err := c.shards.PutShard(ctx, addr, id, 0, bytes.NewReader(small))
		return err
	})
	if err != nil {
		c.log.Warn("repair: data path calibration", "err", err)
		return
	}
	tPut, err := timeIt(true, func() error {
		_, err := c.shards.PutShard(ctx, addr, id, 1, bytes.NewReader(big))
		return err
	})
	if err != nil {
		c.log.Warn("repair: data path calibration", "err", err)
		return
	}
	tGet, err := timeIt(true, func() error {
		rc, err := c.shards.GetShard(ctx, addr, id, 1, 0, size)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(io.Discard, rc)
		return err
	})
	if err != nil {
		c.log.Warn("repair: data path calibration", "err", err)
		return
	}
	// The PUT and GET each move the bytes through three data-path steps
	// (send, receive, write or read with checksums); this process runs
	// both ends, so their CPU time is all three.
	perByte := (tPut + tGet).Seconds()
	cm := c.model()
	if perByte > 0 {
		cm.Move = min(6*size/perByte, cm.Move)
	}
	// A task's sequential round trips: the control request, the helpers'
	// reads, the durable store, the manifest fence and its durable write.
	cm.Setup = max(cm.Setup, 4*tSmall)
	c.setModel(cm)
	c.log.Info("repair: calibrated data path", "small_put", tSmall, "put_4MiB", tPut, "get_4MiB", tGet,
		"move_MBps", int(cm.Move/1e6), "setup", cm.Setup)
}

// recalibrateDisk re-measures the disk now and then while the server's
// disk is quiet (no repair running or queued, no shard writes: diskBusy) and
// keeps the best rates seen. The first measurement at start-up is taken
// while every shard server of the host starts and measures at the same
// moment, so it sees their contention (fsyncs 10-50x slower than idle);
// later ones, at random offsets, do not. The model divides the disk among
// the host's servers itself (Batch's share), so a contended measurement
// would count that twice. The first few follow each other quickly so that
// a young cluster's model is right before its first failure.
// recalibrateWait is how long the disk calibration waits before its next
// measurement, after n measurements of which the last same found nothing
// better: a few quick ones after start-up (busy moments are skipped),
// then a minute, doubling with every measurement that finds nothing
// better up to an hour. Each measurement writes and fsyncs 4 MiB: every
// minute forever, that was 5.7% of an idle shard server's CPU samples
// and 48 MiB a minute of writes for a twelve-server dev cluster that
// nothing was using.
func recalibrateWait(n, same int) time.Duration {
	const eager = 5
	if n < eager {
		return time.Second
	}
	return min(time.Minute<<min(same, 6), time.Hour)
}

func (c *calibrator) recalibrateDisk(ctx context.Context, dir string) {
	n, same := 0, 0 // measurements taken; of them, the last that found nothing better
	for {
		wait := recalibrateWait(n, same) + rand.N(recalibrateWait(n, same)/8)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if c.diskBusy(ctx) {
			continue
		}
		fsync, write, err := diskRates(dir, 4<<20)
		if err != nil {
			c.log.Warn("repair: disk calibration", "err", err)
			continue
		}
		n++
		cm := c.model()
		if fsync >= cm.Fsync && write <= cm.Default.DiskWrite {
			same++
			continue
		}
		// NB: only a clear gain brings the quick cadence back: a fsync a
		// few percent faster is noise, and resetting on it kept twelve
		// idle servers measuring every minute.
		if !clearGain(cm.Fsync, fsync) && !clearGain(write, cm.Default.DiskWrite) {
			same++
		} else {
			same = 0
		}
		cm.Fsync = min(cm.Fsync, fsync)
		cm.Default.DiskWrite = max(cm.Default.DiskWrite, write)
		c.setModel(cm)
		c.log.Info("repair: recalibrated disk", "fsync", cm.Fsync, "disk_write_MBps", int(cm.Default.DiskWrite/1e6))
	}
}

// clearGain reports whether a is more than a tenth above b (b > 0): a gain
// a measurement's noise does not explain.
func clearGain[T time.Duration | float64](a, b T) bool {
	return b > 0 && float64(a) > 1.1*float64(b)
}

// diskBusy reports whether repairs are running or queued, or shard
// writes went on in the last quarter second: a disk measurement now would
// time them, not the disk. (Reads mostly hit the page cache; a cluster
// serving GETs all day must still get measured.)
func (c *calibrator) diskBusy(ctx context.Context) bool {
	busy := c.repairing()
	if busy || c.writtenBytes == nil {
		return busy
	}
	b0 := c.writtenBytes()
	select {
	case <-ctx.Done():
		return true
	case <-time.After(250 * time.Millisecond):
	}
	return c.writtenBytes() != b0
}
