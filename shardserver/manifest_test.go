package shardserver

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// manifest builds a one-part manifest that places shard 1 on testNode.
func manifest(bucket, key string, ts int64, partID string) *metadata.Manifest {
	return &metadata.Manifest{
		Bucket: bucket, Key: key, Version: metadata.Version{TS: ts, Writer: "gw"},
		Size: 10, ETag: "e", Code: "rs-2-1", ChunkSize: 8, Modified: time.Unix(ts, 0).UTC(),
		Placement: []string{"aaaaaaaaaaaaaaaa", testNode, "bbbbbbbbbbbbbbbb"},
		Parts:     []metadata.Part{{Number: 1, ID: partID, Size: 10, ShardCRC: []uint32{1, 2, 3}}},
	}
}

func tombstone(bucket, key string, ts int64) *metadata.Manifest {
	return &metadata.Manifest{Bucket: bucket, Key: key, Version: metadata.Version{TS: ts, Writer: "gw"}, Deleted: true}
}

func TestManifestNewerWinsOverRPC(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	versions := []*metadata.Manifest{
		manifest("b", "k", 1, "p1"), manifest("b", "k", 2, "p2"), tombstone("b", "k", 3), manifest("b", "k", 4, "p4"),
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 5 {
		key := string(rune('a' + trial))
		var maxSeen int64
		for _, i := range rng.Perm(len(versions)) {
			m := *versions[i]
			m.Key = key
			stored, cur, err := e.client.PutManifest(ctx, e.addr, &m)
			if err != nil {
				t.Fatal(err)
			}
			if want := m.Version.TS > maxSeen; stored != want {
				t.Fatalf("trial %d: put v%d stored=%v, want %v", trial, m.Version.TS, stored, want)
			}
			maxSeen = max(maxSeen, m.Version.TS)
			if cur.TS != maxSeen {
				t.Fatalf("trial %d: current v%d, want v%d", trial, cur.TS, maxSeen)
			}
		}
		got, err := e.client.GetManifest(ctx, e.addr, "b", key)
		if err != nil || got.Version.TS != 4 || got.Parts[0].ID != "p4" {
			t.Fatalf("trial %d: got %+v %v", trial, got, err)
		}
	}
	if _, err := e.client.GetManifest(ctx, e.addr, "b", "none"); !errors.Is(err, shardrpc.ErrNotFound) {
		t.Fatalf("absent manifest: %v", err)
	}
	if _, _, err := e.client.PutManifest(ctx, e.addr, &metadata.Manifest{Bucket: "b", Key: "k"}); !errors.Is(err, shardrpc.ErrBadRequest) {
		t.Fatalf("invalid manifest: %v", err)
	}
	// A tombstone comes back as a manifest with Deleted set.
	if _, _, err := e.client.PutManifest(ctx, e.addr, tombstone("b", "gone", 9)); err != nil {
		t.Fatal(err)
	}
	if m, err := e.client.GetManifest(ctx, e.addr, "b", "gone"); err != nil || !m.Deleted {
		t.Fatalf("tombstone: %+v %v", m, err)
	}
}

func TestListAndBucketsOverRPC(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for i, k := range []string{"a/1", "a/2", "b", "c/d/e"} {
		if _, _, err := e.client.PutManifest(ctx, e.addr, manifest("bk", k, int64(i+1), "p"+k[:1])); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.client.PutManifest(ctx, e.addr, tombstone("bk", "b", 10)); err != nil {
		t.Fatal(err)
	}
	es, tr, err := e.client.List(ctx, e.addr, metadata.ListQuery{Bucket: "bk", Delimiter: "/", Limit: 2})
	if err != nil || !tr || len(es) != 2 || es[0].Prefix != "a/" || es[1].Key != "b" || !es[1].Deleted {
		t.Fatalf("page 1: %+v %v %v", es, tr, err)
	}
	es, tr, err = e.client.List(ctx, e.addr, metadata.ListQuery{Bucket: "bk", Delimiter: "/", After: "b"})
	if err != nil || tr || len(es) != 1 || es[0].Prefix != "c/" {
		t.Fatalf("page 2: %+v %v %v", es, tr, err)
	}
	es, _, err = e.client.List(ctx, e.addr, metadata.ListQuery{Bucket: "empty"})
	if err != nil || es == nil || len(es) != 0 {
		t.Fatalf("empty bucket: %#v %v", es, err)
	}
	if _, _, err := e.client.List(ctx, e.addr, metadata.ListQuery{}); !errors.Is(err, shardrpc.ErrBadRequest) {
		t.Fatalf("no bucket: %v", err)
	}

	for _, b := range []metadata.Bucket{
		{Name: "x", Version: metadata.Version{TS: 2, Writer: "g"}},
		{Name: "x", Version: metadata.Version{TS: 3, Writer: "g"}, Deleted: true},
		{Name: "x", Version: metadata.Version{TS: 1, Writer: "g"}},
		{Name: "y", Version: metadata.Version{TS: 1, Writer: "g"}},
	} {
		if err := e.client.PutBucket(ctx, e.addr, &b); err != nil {
			t.Fatal(err)
		}
	}
	bs, err := e.client.ListBuckets(ctx, e.addr)
	if err != nil || len(bs) != 2 || !bs[0].Deleted || bs[0].Version.TS != 3 || bs[1].Name != "y" {
		t.Fatalf("buckets: %+v %v", bs, err)
	}
	if err := e.client.PutBucket(ctx, e.addr, &metadata.Bucket{Name: "z"}); !errors.Is(err, shardrpc.ErrBadRequest) {
		t.Fatalf("bucket without version: %v", err)
	}

	for _, k := range []metadata.AccessKey{
		{ID: "RK1", Name: "alice", Version: metadata.Version{TS: 2, Writer: "g"}, SealedSecret: []byte("s")},
		{ID: "RK1", Version: metadata.Version{TS: 3, Writer: "g"}, Deleted: true},
		{ID: "RK1", Name: "alice", Version: metadata.Version{TS: 1, Writer: "g"}, SealedSecret: []byte("s")},
		{ID: "RK2", Name: "bob", Version: metadata.Version{TS: 1, Writer: "g"}, SealedSecret: []byte("s"), Admin: true},
	} {
		if err := e.client.PutAccessKey(ctx, e.addr, &k); err != nil {
			t.Fatal(err)
		}
	}
	ks, err := e.client.ListAccessKeys(ctx, e.addr)
	if err != nil || len(ks) != 2 || !ks[0].Deleted || ks[0].Version.TS != 3 || ks[1].Name != "bob" || !ks[1].Admin || string(ks[1].SealedSecret) != "s" {
		t.Fatalf("access keys: %+v %v", ks, err)
	}
	if err := e.client.PutAccessKey(ctx, e.addr, &metadata.AccessKey{ID: "RK3", Version: metadata.Version{TS: 1, Writer: "g"}}); !errors.Is(err, shardrpc.ErrBadRequest) {
		t.Fatalf("access key without secret: %v", err)
	}
}

// TestBucketWriteFencedByLease: a fenced bucket write lands only while
// its writer holds the record's lease, so a gateway whose lease was
// released (or ran out) cannot land over the next holder's update; an
// unfenced write (bucket creation) is not checked.
func TestBucketWriteFencedByLease(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	name := shardrpc.BucketLeaseName("fenced")
	b := metadata.Bucket{Name: "fenced", Version: metadata.Version{TS: 1, Writer: "g"}}
	if err := e.client.AcquireLease(ctx, e.addr, name, "g1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.client.PutBucketFenced(ctx, e.addr, &b, "g2"); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("write under another holder's lease: %v, want ErrLeaseHeld", err)
	}
	if err := e.client.PutBucketFenced(ctx, e.addr, &b, "g1"); err != nil {
		t.Fatalf("holder's write: %v", err)
	}
	if err := e.client.ReleaseLease(ctx, e.addr, name, "g1"); err != nil {
		t.Fatal(err)
	}
	b.Version.TS = 2
	if err := e.client.PutBucketFenced(ctx, e.addr, &b, "g1"); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("write after the lease was released: %v, want ErrLeaseHeld", err)
	}
	if err := e.client.PutBucket(ctx, e.addr, &b); err != nil {
		t.Fatalf("unfenced write: %v", err)
	}
	bs, err := e.client.ListBuckets(ctx, e.addr)
	if err != nil || len(bs) != 1 || bs[0].Version.TS != 2 {
		t.Fatalf("buckets: %+v %v", bs, err)
	}
}

// TestAccessKeyWriteFencedByLease: a fenced access key write lands only
// while its writer holds the lease it is checked against: the record's
// (AccessKeyLeaseName) for a change, the name's (AccessKeyNameLeaseName)
// for a creation. So a flag change whose lease was released (or ran out)
// cannot land over the deletion made under the next holder's lease, and a
// creation cannot land without its name's lease.
func TestAccessKeyWriteFencedByLease(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	k := metadata.AccessKey{ID: "RKF", Name: "fenced", Version: metadata.Version{TS: 1, Writer: "g"}, SealedSecret: []byte("s")}

	// Creation: checked against the name's lease, not the ID's.
	if err := e.client.CreateAccessKeyFenced(ctx, e.addr, &k, "g1"); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("creation without the name's lease: %v, want ErrLeaseHeld", err)
	}
	if err := e.client.AcquireLease(ctx, e.addr, shardrpc.AccessKeyLeaseName(k.ID), "g1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CreateAccessKeyFenced(ctx, e.addr, &k, "g1"); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("creation under the ID's lease, not the name's: %v, want ErrLeaseHeld", err)
	}
	if err := e.client.AcquireLease(ctx, e.addr, shardrpc.AccessKeyNameLeaseName(k.Name), "g1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CreateAccessKeyFenced(ctx, e.addr, &k, "g1"); err != nil {
		t.Fatalf("creation under the name's lease: %v", err)
	}

	// Changes: checked against the record's lease.
	name := shardrpc.AccessKeyLeaseName(k.ID)
	k.Version.TS, k.Admin = 2, true
	if err := e.client.PutAccessKeyFenced(ctx, e.addr, &k, "g2"); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("change under another holder's lease: %v, want ErrLeaseHeld", err)
	}
	if err := e.client.ReleaseLease(ctx, e.addr, name, "g1"); err != nil {
		t.Fatal(err)
	}
	if err := e.client.PutAccessKeyFenced(ctx, e.addr, &k, "g1"); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("change after the lease was released: %v, want ErrLeaseHeld", err)
	}
	if err := e.client.AcquireLease(ctx, e.addr, name, "g2", time.Minute); err != nil {
		t.Fatal(err)
	}
	gone := metadata.AccessKey{ID: k.ID, Name: k.Name, Version: metadata.Version{TS: 3, Writer: "g"}, Deleted: true}
	if err := e.client.PutAccessKeyFenced(ctx, e.addr, &gone, "g2"); err != nil {
		t.Fatalf("holder's deletion: %v", err)
	}
	ks, err := e.client.ListAccessKeys(ctx, e.addr)
	if err != nil || len(ks) != 1 || !ks[0].Deleted || ks[0].Version.TS != 3 {
		t.Fatalf("access keys: %+v %v; want RKF deleted at 3", ks, err)
	}
}
