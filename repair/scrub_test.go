package repair

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"testing"

	"golang.org/x/time/rate"

	"github.com/regen-s3/regen/metadata"
)

// scrubShards serves every shard file with the contents its manifest's
// CRC names, counts reads per file, and calls onRead after each.
type scrubShards struct {
	shardAPI
	mu     sync.Mutex
	reads  map[string]int
	onRead func(total int)
	total  int
}

func (s *scrubShards) GetShard(_ context.Context, _, fileID string, _ int, _, _ int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.reads[fileID]++
	s.total++
	total := s.total
	s.mu.Unlock()
	if s.onRead != nil {
		s.onRead(total)
	}
	return io.NopCloser(bytes.NewReader([]byte("shard " + fileID))), nil
}

// TestScrubResumes: a scrub pass stopped midway (the server stops) resumes
// after the last manifest it scrubbed when it starts again, instead of
// starting over; a pass that ends clears its position, so the next one
// reads everything again.
func TestScrubResumes(t *testing.T) {
	const objects = 30
	store, err := metadata.Open(t.TempDir(), metadata.Options{NodeID: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	for i := range objects {
		id := fmt.Sprintf("f%02d", i)
		crc := crc32.Checksum([]byte("shard "+id), castagnoli)
		m := &metadata.Manifest{Bucket: "b", Key: fmt.Sprintf("k%02d", i), Version: metadata.Version{TS: 1, Writer: "w"},
			Code: "rs-2-1", ChunkSize: 16, Placement: []string{"n0", "n1", "n2"}, Size: 10,
			Parts: []metadata.Part{{Number: 1, ID: id, Size: 10, ShardCRC: []uint32{crc, crc, crc}}}}
		if _, err := store.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	f := newFakeCluster(3)
	shards := &scrubShards{shardAPI: shardAPI{f}, reads: map[string]int{}}
	cfg := DefaultConfig()
	cfg.NodeID = "n0"
	w, err := New(cfg, store, f, shards, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lim := rate.NewLimiter(rate.Inf, 1<<20)

	// The server stops during its twelfth read.
	stop, cancel := context.WithCancel(ctx)
	shards.onRead = func(total int) {
		if total == 12 {
			cancel()
		}
	}
	if _, err := w.scrub.pass(stop, lim); err == nil {
		t.Fatal("the stopped pass reported no error")
	}
	shards.onRead = nil
	c, err := store.LoadCursor(ctx, scrubCursor)
	if err != nil || c == nil || c.Key != "k10" {
		t.Fatalf("saved position %v, %v; want after k10 (the last manifest scrubbed whole)", c, err)
	}

	if _, err := w.scrub.pass(ctx, lim); err != nil {
		t.Fatal(err)
	}
	for i := range objects {
		id := fmt.Sprintf("f%02d", i)
		want := 1
		if i == 11 {
			want = 2 // cut off mid-read, read again
		}
		if got := shards.reads[id]; got != want {
			t.Errorf("%s read %d times over the stopped and the resumed pass, want %d", id, got, want)
		}
	}
	st := w.scrub.status()
	if st.Passes != 1 || st.Corrupt != 0 || st.Missing != 0 {
		t.Errorf("scrub counts %+v, want one pass and nothing bad", st)
	}
	if c, err := store.LoadCursor(ctx, scrubCursor); c != nil || err != nil {
		t.Fatalf("position after a whole pass: %v, %v; want none", c, err)
	}

	before := shards.total
	if _, err := w.scrub.pass(ctx, lim); err != nil {
		t.Fatal(err)
	}
	if n := shards.total - before; n != objects {
		t.Errorf("the next pass read %d shards, want all %d", n, objects)
	}
}
