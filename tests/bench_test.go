package tests

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// These benchmarks measure the dev cluster as a user sees it: a real
// minio-go client, one gateway and 12 shard-server processes on loopback.
//
//	go test ./tests/ -run '^$' -bench 'S3' -benchtime 5x -count 3

func BenchmarkS3Put64MiB(b *testing.B) { benchS3(b, "put", 64<<20) }
func BenchmarkS3Get64MiB(b *testing.B) { benchS3(b, "get", 64<<20) }

func benchS3(b *testing.B, op string, size int64) {
	d := startDev(b)
	c := d.client(b)
	mustMakeBucket(b, c, "bench")
	data := randomData(size, 1)
	put(b, c, "bench", "obj", data, minio.PutObjectOptions{DisableMultipart: true})
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		switch op {
		case "put":
			put(b, c, "bench", "obj", data, minio.PutObjectOptions{DisableMultipart: true})
		case "get":
			obj, err := c.GetObject(ctx(b), "bench", "obj", minio.GetObjectOptions{})
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, obj)
			obj.Close()
			if err != nil || n != size {
				b.Fatalf("get: %d bytes, %v", n, err)
			}
		}
	}
}

// BenchmarkS3Put1GiBGatewayRSS uploads 1 GiB in one PUT and reports the
// peak resident memory of the gateway process (the regen dev process, which
// runs the gateway in-process; the shard servers are children).
func BenchmarkS3Put1GiBGatewayRSS(b *testing.B) {
	d := startDev(b)
	c := d.client(b)
	mustMakeBucket(b, c, "rss")
	const size = 1 << 30
	b.SetBytes(size)
	for i := range b.N {
		r := io.LimitReader(&repeatReader{block: randomData(1<<20, 5)}, size)
		if _, err := c.PutObject(ctx(b), "rss", fmt.Sprint("big", i), r, size, minio.PutObjectOptions{DisableMultipart: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(peakRSS(b, d.cmd.Process.Pid))/(1<<20), "gateway-peak-MiB")
}

// repeatReader repeats one block forever, so the client needs no 1 GiB
// buffer of its own.
type repeatReader struct {
	block []byte
	off   int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.block[r.off:])
	r.off = (r.off + n) % len(r.block)
	return n, nil
}

// peakRSS reads VmHWM (peak resident set) of pid in bytes.
func peakRSS(t testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

var _ = bytes.NewReader

// BenchmarkS3GetDegraded64MiB is BenchmarkS3Get64MiB with three of the
// object's data-shard servers killed (rs-6-3 survives n-k = 3): every
// stripe is decoded from the three remaining data shards and three
// parity shards. The grace is long, so no repair runs meanwhile. Compare
// its MB/s with BenchmarkS3Get64MiB's (target: at least 70%).
func BenchmarkS3GetDegraded64MiB(b *testing.B) {
	const size = 64 << 20
	d := startDev(b, "--repair-grace", "1h")
	c := d.client(b)
	mustMakeBucket(b, c, "bench")
	data := randomData(size, 1)
	put(b, c, "bench", "obj", data, minio.PutObjectOptions{DisableMultipart: true})
	sc := shardrpc.New(d.info.Secret, nil)
	var m *metadata.Manifest
	for _, s := range d.info.Shards {
		if got, err := sc.GetManifest(ctx(b), s.Addr, "bench", "obj"); err == nil {
			m = got
			break
		}
	}
	if m == nil {
		b.Fatal("no manifest")
	}
	killed := 0
	for _, id := range m.Placement[:3] { // data shards 0..2
		for i, s := range d.info.Shards {
			if s.ID == id {
				d.killShard(i)
				killed++
			}
		}
	}
	waitFor(b, 60*time.Second, "gossip to see the dead servers", func() bool { return d.deadShards(b) == killed })
	get := func() {
		obj, err := c.GetObject(ctx(b), "bench", "obj", minio.GetObjectOptions{})
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, obj)
		obj.Close()
		if err != nil || n != size {
			b.Fatalf("get: %d bytes, %v", n, err)
		}
	}
	get() // warm up the connections to the survivors
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		get()
	}
}
