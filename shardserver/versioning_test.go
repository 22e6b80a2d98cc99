package shardserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// versioned is wide(ts, part) written in a bucket with versioning
// enabled, as servers store it (named by its version).
func versioned(ts int64, part string) *metadata.Manifest {
	m := wide(ts, part)
	m.Versioned, m.VersionID = true, m.Version.String()
	return m
}

// TestConfirmKeepsNoncurrentVersions: once a versioned overwrite is
// confirmed on a write quorum, the version it replaced stays (with its
// shard file) where an unversioned one would go.
func TestConfirmKeepsNoncurrentVersions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v1, v2   *metadata.Manifest
		want     string
		keepsOld bool
	}{
		{"unversioned overwrite drops the old version", wide(1, "p1"), wide(2, "p2"), "2 |", false},
		{"versioned overwrite keeps it", versioned(1, "p1"), versioned(2, "p2"), "2 | 1", true},
		{"versioned overwrite keeps the null version", wide(1, "p1"), versioned(2, "p2"), "2 | 1", true},
		{"a repair switch replaces the manifest it repaired", versioned(1, "p1"), moved(versioned(1, "p1"), 2), "2 |", false},
		{"a versioned delete marker keeps the object", versioned(1, "p1"), tomb(versioned(1, "p1")), "2 | 1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := newConfirmEnv(t)
			if tc.v2.Deleted {
				tc.v2.VersionID = "" // a new version: the server names it
			}
			ce.putManifest(t, tc.v1)
			ce.putManifest(t, tc.v2)
			ce.setPeers(0, 9, peerState{cur: tc.v2, prev: []*metadata.Manifest{tc.v1}})
			ce.tick(t, testGCDelay)
			ce.tick(t, testGCDelay)
			if got := ce.state(t); got != tc.want {
				t.Fatalf("versions %q after confirmation, want %q", got, tc.want)
			}
			if got := ce.exists(t, "p1", 1); got != tc.keepsOld {
				t.Fatalf("p1.1 exists = %v, want %v", got, tc.keepsOld)
			}
		})
	}
}

// TestDeleteVersionOverRPC removes versions by ID: the current one (the
// previous becomes current), and the last one (the key goes); the shard
// files are collected after GCDelay, not before.
func TestDeleteVersionOverRPC(t *testing.T) {
	ce := newConfirmEnv(t)
	ctx := context.Background()
	v1, v2 := versioned(1, "p1"), versioned(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)

	if n, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", "0000000000000007.gw", shardrpc.NoLease); err != nil || n != 0 {
		t.Fatalf("delete of a version not held: %d %v", n, err)
	}
	if n, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", v2.S3VersionID(), shardrpc.NoLease); err != nil || n != 1 {
		t.Fatalf("delete current version: %d %v", n, err)
	}
	if got := ce.state(t); got != "1 |" {
		t.Fatalf("versions %q after deleting v2, want v1 current", got)
	}
	ce.tick(t, testGCDelay/2)
	if !ce.exists(t, "p2", 1) {
		t.Fatal("p2.1 collected before GCDelay: a read in flight would fail")
	}
	ce.tick(t, testGCDelay)
	if ce.exists(t, "p2", 1) || !ce.exists(t, "p1", 1) {
		t.Fatal("want p2.1 collected, p1.1 kept")
	}
	if n, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", v1.S3VersionID(), shardrpc.NoLease); err != nil || n != 1 {
		t.Fatalf("delete last version: %d %v", n, err)
	}
	if _, err := ce.client.GetManifest(ctx, ce.addr, "b", "k"); !errors.Is(err, shardrpc.ErrNotFound) {
		t.Fatalf("key still there after its last version went: %v", err)
	}
	for _, bad := range [][3]string{{"", "k", ""}, {"b", "", ""}, {"b", "k", metadata.NullVersionID}} {
		if _, err := ce.client.DeleteVersion(ctx, ce.addr, bad[0], bad[1], bad[2], shardrpc.NoLease); !errors.Is(err, shardrpc.ErrBadRequest) {
			t.Fatalf("DeleteVersion(%q) = %v, want ErrBadRequest", bad, err)
		}
	}
}

// TestDeleteVersionIsFenced: removing a version is a write of the key,
// refused while another writer holds the key's lease (a conditional
// write between its check and its set), admitted for the holder.
func TestDeleteVersionIsFenced(t *testing.T) {
	ce := newConfirmEnv(t)
	ctx := context.Background()
	v1, v2 := versioned(1, "p1"), versioned(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)
	if err := ce.client.AcquireLease(ctx, ce.addr, shardrpc.LeaseName("b", "k"), "gw-cond", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", v2.VersionID, shardrpc.NoLease); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("removal without the lease while it is held: %v; want ErrLeaseHeld", err)
	}
	if got := ce.state(t); got != "2 | 1" {
		t.Fatalf("versions %q after a refused removal", got)
	}
	if n, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", v2.VersionID, "gw-cond"); err != nil || n != 1 {
		t.Fatalf("removal by the lease holder: %d %v", n, err)
	}
}
