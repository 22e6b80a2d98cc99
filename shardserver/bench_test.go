package shardserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// BenchmarkShard measures one shard written and read back over loopback
// HTTP with the default 64 KiB block: 171 KiB (a 1 MiB object's shard with
// rs-6-3), 1 MiB (a full stripe's) and 16 MiB. Its allocations per op, and
// the system calls of a fixed number of ops (perf stat), do not depend on
// the machine's load.
func BenchmarkShard(b *testing.B) {
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Secret, cfg.NodeID = b.TempDir(), testSecret, testNode
	cfg.Registerer = prometheus.NewRegistry()
	srv, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "http://")
	c := shardrpc.New(testSecret, nil)
	ctx := context.Background()
	for _, size := range []int{171 << 10, 1 << 20, 16 << 20} {
		data := randBytes(1, size)
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run("put-"+name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := c.PutShard(ctx, addr, "bench", 0, bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("get-"+name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				rc, err := c.GetShard(ctx, addr, "bench", 0, 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, rc); err != nil || n != int64(len(data)) {
					b.Fatal(n, err)
				}
				rc.Close()
			}
		})
	}
}
