package metadata

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkPutManifestOverwrite is the hot path of every PUT on a shard
// server: an overwrite of a key that keeps its previous versions (up to
// MaxPreviousKept, no confirm job here), in memory, so the fsync does
// not hide the store's own cost.
func BenchmarkPutManifestOverwrite(b *testing.B) {
	ctx := context.Background()
	s, err := Open("db", Options{FS: vfs.NewMem(), NodeID: "n1"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	for i := range b.N {
		m := obj("b", "k", int64(i+1), nodes3, "p")
		if _, err := s.PutManifest(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}
