package shardserver

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// BenchmarkShard measures one 16 MiB shard written and read back over
// loopback HTTP with the default 64 KiB block.
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
	data := randBytes(1, 16<<20)
	ctx := context.Background()
	b.Run("put", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := c.PutShard(ctx, addr, "bench", 0, bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
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
