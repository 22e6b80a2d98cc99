package shardserver

import (
	"context"
	"testing"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// TestPutBatchReportsReplaced: a batched manifest write answers each
// manifest as a single PutManifest does: stored or not (a version older
// than the current one is kept, not stored), whether it replaced the
// key's current version (the gateway's commit notice of it is urgent),
// and whether the version is held.
func TestPutBatchReportsReplaced(t *testing.T) {
	env := newEnv(t, nil)
	ctx := context.Background()
	mk := func(key string, ts int64) *metadata.Manifest {
		return &metadata.Manifest{Bucket: "b", Key: key, Version: metadata.Version{TS: ts, Writer: "w"}, Deleted: true}
	}
	if _, err := env.client.PutManifestFenced(ctx, env.addr, mk("old", 200), shardrpc.NoLease); err != nil {
		t.Fatal(err)
	}
	if _, err := env.client.PutManifestFenced(ctx, env.addr, mk("over", 100), shardrpc.NoLease); err != nil {
		t.Fatal(err)
	}
	res, err := env.client.PutManifestsFenced(ctx, env.addr, []*metadata.Manifest{mk("new", 100), mk("over", 200), mk("old", 150)}, shardrpc.NoLease)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ stored, replaced, held bool }{{true, false, true}, {true, true, true}, {false, false, true}} {
		if r := res[i]; r.Err() != nil || r.Stored != want.stored || r.Replaced != want.replaced || r.Held != want.held {
			t.Errorf("result %d: %+v, want stored %v, replaced %v, held %v", i, r, want.stored, want.replaced, want.held)
		}
	}
}
