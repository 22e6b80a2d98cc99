package shardserver

import (
	"context"
	"errors"
	"testing"
	"time"

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
	if _, err := env.client.PutManifestFenced(ctx, env.addr, mk("k1", 200), shardrpc.NoLease); err != nil {
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

// TestPutManifestReportsReplaced: a manifest write says whether it
// replaced the key's current version (the gateway then tells the server
// once the write is on a quorum, settling the confirm job it queued), and
// not when the key was new or the write was older than the current one.
func TestPutManifestReportsReplaced(t *testing.T) {
	env := newEnv(t, nil)
	ctx := context.Background()
	mk := func(ts int64) *metadata.Manifest {
		return &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: ts, Writer: "w"}, Deleted: true}
	}
	for _, tc := range []struct {
		ts               int64
		stored, replaced bool
	}{{100, true, false}, {200, true, true}, {150, false, false}} {
		res, err := env.client.PutManifestFenced(ctx, env.addr, mk(tc.ts), shardrpc.NoLease)
		if err != nil {
			t.Fatal(err)
		}
		if res.Stored != tc.stored || res.Replaced != tc.replaced {
			t.Errorf("write at %d: %+v, want stored %v, replaced %v", tc.ts, res, tc.stored, tc.replaced)
		}
	}
}

// TestPutBatchUnfenced: a batch fenced shardrpc.Unfenced (inline repair
// switches) is stored as single PutManifests without the lease parameter
// are, while another writer holds the key's lease, where a batch of
// writes made without the lease (NoLease) is refused.
func TestPutBatchUnfenced(t *testing.T) {
	env := newEnv(t, nil)
	ctx := context.Background()
	mk := func(ts int64) *metadata.Manifest {
		return &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: ts, Writer: "w"}, Deleted: true}
	}
	if err := env.client.AcquireLease(ctx, env.addr, shardrpc.LeaseName("b", "k"), "gw-1/x", time.Minute); err != nil {
		t.Fatal(err)
	}
	res, err := env.client.PutManifestsFenced(ctx, env.addr, []*metadata.Manifest{mk(100)}, shardrpc.NoLease)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err(), shardrpc.ErrLeaseHeld) {
		t.Fatalf("a write without the lease while it is held: %+v, want refused", res[0])
	}
	res, err = env.client.PutManifestsFenced(ctx, env.addr, []*metadata.Manifest{mk(100)}, shardrpc.Unfenced)
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.Err() != nil || !r.Stored || r.Current == nil || r.Current.TS != 100 {
		t.Fatalf("unfenced batch: %+v, want stored", r)
	}
}

// TestPutBatchMixed: the manifests of one batch are stored together, but
// each has its own outcome: a key whose lease another writer holds is
// refused alone, a key sent twice takes both writes in order, and the
// others are stored.
func TestPutBatchMixed(t *testing.T) {
	env := newEnv(t, nil)
	ctx := context.Background()
	mk := func(key string, ts int64) *metadata.Manifest {
		return &metadata.Manifest{Bucket: "b", Key: key, Version: metadata.Version{TS: ts, Writer: "w"}, Deleted: true}
	}
	if err := env.client.AcquireLease(ctx, env.addr, shardrpc.LeaseName("b", "k1"), "gw-1/x", time.Minute); err != nil {
		t.Fatal(err)
	}
	res, err := env.client.PutManifestsFenced(ctx, env.addr,
		[]*metadata.Manifest{mk("k1", 100), mk("k2", 100), mk("k2", 200), mk("k3", 100)}, shardrpc.NoLease)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err(), shardrpc.ErrLeaseHeld) {
		t.Errorf("k1, its lease held: %+v, want refused", res[0])
	}
	for i, want := range []int64{100, 200, 100} {
		if r := res[i+1]; r.Err() != nil || !r.Stored || r.Current == nil || r.Current.TS != want {
			t.Errorf("result %d: %+v, want stored, current at %d", i+1, r, want)
		}
	}
	if !res[2].Replaced {
		t.Errorf("k2's second write: %+v, want it to have replaced the first", res[2])
	}
	for key, want := range map[string]int64{"k2": 200, "k3": 100} {
		m, err := env.client.GetManifest(ctx, env.addr, "b", key)
		if err != nil || m.Version.TS != want {
			t.Errorf("%s: %v, %v; want the version at %d", key, m, err, want)
		}
	}
	if _, err := env.client.GetManifest(ctx, env.addr, "b", "k1"); !errors.Is(err, shardrpc.ErrNotFound) {
		t.Errorf("k1: %v, want not found", err)
	}
}
