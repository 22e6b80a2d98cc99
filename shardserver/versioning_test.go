package shardserver

import (
	"context"
	"errors"
	"slices"
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

	if n, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", "0000000000000007.gw", shardrpc.NoLease, false); err != nil || n != 0 {
		t.Fatalf("delete of a version not held: %d %v", n, err)
	}
	if n, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", v2.S3VersionID(), shardrpc.NoLease, false); err != nil || n != 1 {
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
	if n, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", v1.S3VersionID(), shardrpc.NoLease, false); err != nil || n != 1 {
		t.Fatalf("delete last version: %d %v", n, err)
	}
	if _, err := ce.client.GetManifest(ctx, ce.addr, "b", "k"); !errors.Is(err, shardrpc.ErrNotFound) {
		t.Fatalf("key still there after its last version went: %v", err)
	}
	for _, bad := range [][3]string{{"", "k", ""}, {"b", "", ""}, {"b", "k", metadata.NullVersionID}} {
		if _, err := ce.client.DeleteVersion(ctx, ce.addr, bad[0], bad[1], bad[2], shardrpc.NoLease, false); !errors.Is(err, shardrpc.ErrBadRequest) {
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
	if _, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", v2.VersionID, shardrpc.NoLease, false); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("removal without the lease while it is held: %v; want ErrLeaseHeld", err)
	}
	if got := ce.state(t); got != "2 | 1" {
		t.Fatalf("versions %q after a refused removal", got)
	}
	if n, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", v2.VersionID, "gw-cond", false); err != nil || n != 1 {
		t.Fatalf("removal by the lease holder: %d %v", n, err)
	}
}

// TestConfirmKeepsManifestOfUnseenSwitch: the confirm job drops the
// manifest of a noncurrent version that a repair switch rewrote only once
// it has seen the switch visible (k holders). A switch stored on three
// servers and left there (its job's retries all failed) leaves the old
// manifest on them, so k servers still hold a manifest of the version;
// before, those three dropped it and the version had k holders of
// neither (docs/VERSIONING.md, "Known limits", as it was).
func TestConfirmKeepsManifestOfUnseenSwitch(t *testing.T) {
	ce := newConfirmEnv(t)
	v1, v2 := versioned(1, "p1"), versioned(2, "p2")
	sw := *v1 // the switch: TS+1, same ID, one server replaced
	sw.Version = metadata.Version{TS: 2, Writer: "+repair-x"}
	sw.Placement = append(slices.Clone(nine[:8]), "b000000000000008")
	for _, m := range []*metadata.Manifest{v1, v2, &sw} {
		ce.putManifest(t, m)
	}
	ce.setPeers(0, 9, peerState{cur: v2, prev: []*metadata.Manifest{v1}})
	ce.setPeers(2, 4, peerState{cur: v2, prev: []*metadata.Manifest{&sw, v1}})
	ce.tick(t, testGCDelay)
	ce.tick(t, testGCDelay)
	if got := ce.state(t); got != "2 | 2 1" {
		t.Fatalf("versions %q after confirming v2 with the switch on 3 servers, want v1's manifest kept beside it", got)
	}
	// Seen on a write quorum, at the key's next confirmation: it goes.
	v3 := versioned(3, "p3")
	ce.putManifest(t, v3)
	ce.setPeers(0, 9, peerState{cur: v3, prev: []*metadata.Manifest{v2, &sw, v1}})
	ce.tick(t, testGCDelay)
	ce.tick(t, testGCDelay)
	if got := ce.state(t); got != "3 | 2 2" {
		t.Fatalf("versions %q after confirming v3 with the switch visible, want v1's old manifest dropped", got)
	}
	if !ce.exists(t, "p1", 1) {
		t.Fatal("p1.1 collected: the switch still places it here")
	}
}

// TestLockedVersionRefused: a shard server applies object lock itself,
// whoever calls it with the cluster secret. A version under COMPLIANCE
// retention is not removed, bypass or not, nor one under GOVERNANCE
// without bypass; its shard file cannot be deleted; a newer manifest of
// it without its COMPLIANCE retention is refused; an abort (rollback) of
// it long after it was written is refused, while a writer's abort of
// its own fresh failed write still works; nothing is collected.
// GOVERNANCE with bypass goes.
func TestLockedVersionRefused(t *testing.T) {
	ce := newConfirmEnv(t)
	ctx := context.Background()
	until := time.Now().AddDate(50, 0, 0) // the store judges by the wall clock
	comp, gov := versioned(1, "p1"), versioned(2, "p2")
	comp.Lock = &metadata.Lock{Mode: metadata.LockCompliance, RetainUntil: until}
	gov.Lock = &metadata.Lock{Mode: metadata.LockGovernance, RetainUntil: until}
	ce.putManifest(t, comp)
	ce.putManifest(t, gov)
	for _, c := range []struct {
		m      *metadata.Manifest
		bypass bool
	}{{comp, false}, {comp, true}, {gov, false}} {
		if _, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", c.m.VersionID, shardrpc.NoLease, c.bypass); !errors.Is(err, shardrpc.ErrLocked) {
			t.Fatalf("DeleteVersion(%s, bypass %v) = %v, want ErrLocked", c.m.Lock.Mode, c.bypass, err)
		}
	}
	if err := ce.client.DeleteShard(ctx, ce.addr, "p1", 1); !errors.Is(err, shardrpc.ErrLocked) {
		t.Fatalf("DeleteShard of a locked version's shard = %v, want ErrLocked", err)
	}
	if err := ce.client.AbortManifest(ctx, ce.addr, "b", "k", gov.Version); !errors.Is(err, shardrpc.ErrLocked) {
		t.Fatalf("abort of a locked version written long ago = %v, want ErrLocked", err)
	}
	weak := *comp
	weak.Version, weak.Lock = metadata.Version{TS: 3, Writer: "gw"}, nil
	if _, _, err := ce.client.PutManifest(ctx, ce.addr, &weak); !errors.Is(err, shardrpc.ErrLocked) {
		t.Fatalf("a newer manifest dropping a COMPLIANCE retention = %v, want ErrLocked", err)
	}
	fresh := versioned(ce.clock.now().UnixNano(), "p1")
	fresh.Lock, fresh.Modified = &metadata.Lock{LegalHold: true}, ce.clock.now()
	ce.putManifest(t, fresh)
	if err := ce.client.AbortManifest(ctx, ce.addr, "b", "k", fresh.Version); err != nil {
		t.Fatalf("abort of a fresh failed write with a legal hold = %v", err)
	}
	ce.tick(t, testGCDelay)
	ce.tick(t, testGCDelay)
	if got := ce.state(t); got != "2 | 1" {
		t.Fatalf("versions %q after the refusals, want both locked versions", got)
	}
	if !ce.exists(t, "p1", 1) || !ce.exists(t, "p2", 1) {
		t.Fatal("a locked version's shard was collected")
	}
	if n, err := ce.client.DeleteVersion(ctx, ce.addr, "b", "k", gov.VersionID, shardrpc.NoLease, true); err != nil || n != 1 {
		t.Fatalf("DeleteVersion(GOVERNANCE, bypass) = %d, %v; want it removed", n, err)
	}
}
