package shardserver

import (
	"context"
	"testing"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// TestPutBatchReportsCurrent: a batched manifest write reports, per
// manifest, the key's current version after it, so a writer whose
// version is older than one already there learns it (as from a single
// PutManifest) and can write again with a newer one.
func TestPutBatchReportsCurrent(t *testing.T) {
	env := newEnv(t, nil)
	ctx := context.Background()
	mk := func(key string, ts int64) *metadata.Manifest {
		return &metadata.Manifest{Bucket: "b", Key: key, Version: metadata.Version{TS: ts, Writer: "w"}, Deleted: true}
	}
	if _, _, err := env.client.PutManifestFenced(ctx, env.addr, mk("k1", 200), shardrpc.NoLease); err != nil {
		t.Fatal(err)
	}
	res, err := env.client.PutManifestsFenced(ctx, env.addr, []*metadata.Manifest{mk("k1", 100), mk("k2", 100)}, shardrpc.NoLease)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{200, 100} {
		if r := res[i]; r.Err() != nil || r.Current == nil || r.Current.TS != want {
			t.Errorf("result %d: %+v, want current version at %d", i, r, want)
		}
	}
}
