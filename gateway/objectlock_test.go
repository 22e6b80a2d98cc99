package gateway

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/regen-s3/regen/metadata"
)

var lockNow = time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)

func codeOf(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// TestRemovable: which locked versions a removal by ID may take.
func TestRemovable(t *testing.T) {
	future, past := lockNow.Add(time.Hour), lockNow.Add(-time.Hour)
	for _, tc := range []struct {
		name   string
		lock   *metadata.Lock
		bypass bool
		want   string // "" or the S3 error code
	}{
		{"no lock", nil, false, ""},
		{"governance in force", &metadata.Lock{Mode: metadata.LockGovernance, RetainUntil: future}, false, "AccessDenied"},
		{"governance bypassed", &metadata.Lock{Mode: metadata.LockGovernance, RetainUntil: future}, true, ""},
		{"compliance in force", &metadata.Lock{Mode: metadata.LockCompliance, RetainUntil: future}, false, "AccessDenied"},
		{"compliance cannot be bypassed", &metadata.Lock{Mode: metadata.LockCompliance, RetainUntil: future}, true, "AccessDenied"},
		{"compliance expired", &metadata.Lock{Mode: metadata.LockCompliance, RetainUntil: past}, false, ""},
		{"expires exactly now", &metadata.Lock{Mode: metadata.LockCompliance, RetainUntil: lockNow}, false, ""},
		{"legal hold", &metadata.Lock{LegalHold: true}, false, "AccessDenied"},
		{"legal hold is not bypassed", &metadata.Lock{LegalHold: true, Mode: metadata.LockGovernance, RetainUntil: past}, true, "AccessDenied"},
		{"legal hold released", &metadata.Lock{LegalHold: false, Mode: metadata.LockGovernance, RetainUntil: past}, false, ""},
	} {
		if got := codeOf(removable(tc.lock, lockNow, tc.bypass)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestChangeRetention: extended always; shortened, removed or changed
// in mode only for GOVERNANCE with bypass; never for COMPLIANCE.
func TestChangeRetention(t *testing.T) {
	gov, comp := metadata.LockGovernance, metadata.LockCompliance
	d1, d2, d3 := lockNow.Add(24*time.Hour), lockNow.Add(48*time.Hour), lockNow.Add(72*time.Hour)
	past := lockNow.Add(-time.Hour)
	for _, tc := range []struct {
		name      string
		old       metadata.Lock
		mode      string
		until     time.Time
		bypass    bool
		want      string
		wantUntil time.Time // checked when want is ""
	}{
		{"set on nothing", metadata.Lock{}, gov, d1, false, "", d1},
		{"until in the past", metadata.Lock{}, gov, past, false, "InvalidArgument", time.Time{}},
		{"governance extended", metadata.Lock{Mode: gov, RetainUntil: d2}, gov, d3, false, "", d3},
		{"governance kept", metadata.Lock{Mode: gov, RetainUntil: d2}, gov, d2, false, "", d2},
		{"governance shortened", metadata.Lock{Mode: gov, RetainUntil: d2}, gov, d1, false, "AccessDenied", time.Time{}},
		{"governance shortened with bypass", metadata.Lock{Mode: gov, RetainUntil: d2}, gov, d1, true, "", d1},
		{"governance to compliance", metadata.Lock{Mode: gov, RetainUntil: d2}, comp, d3, false, "AccessDenied", time.Time{}},
		{"governance to compliance with bypass", metadata.Lock{Mode: gov, RetainUntil: d2}, comp, d3, true, "", d3},
		{"governance removed with bypass", metadata.Lock{Mode: gov, RetainUntil: d2}, "", time.Time{}, true, "", time.Time{}},
		{"governance removed", metadata.Lock{Mode: gov, RetainUntil: d2}, "", time.Time{}, false, "AccessDenied", time.Time{}},
		{"compliance extended", metadata.Lock{Mode: comp, RetainUntil: d2}, comp, d3, false, "", d3},
		{"compliance shortened with bypass", metadata.Lock{Mode: comp, RetainUntil: d2}, comp, d1, true, "AccessDenied", time.Time{}},
		{"compliance to governance with bypass", metadata.Lock{Mode: comp, RetainUntil: d2}, gov, d3, true, "AccessDenied", time.Time{}},
		{"compliance removed with bypass", metadata.Lock{Mode: comp, RetainUntil: d2}, "", time.Time{}, true, "AccessDenied", time.Time{}},
		{"compliance expired: free", metadata.Lock{Mode: comp, RetainUntil: past}, gov, d1, false, "", d1},
		{"legal hold stays", metadata.Lock{LegalHold: true}, gov, d1, false, "", d1},
	} {
		l := tc.old
		err := changeRetention(&l, tc.mode, tc.until, lockNow, tc.bypass)
		if got := codeOf(err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
			continue
		}
		switch {
		case tc.want != "" && l != tc.old:
			t.Errorf("%s: refused but changed the lock to %+v", tc.name, l)
		case tc.want == "" && (l.Mode != tc.mode || !l.RetainUntil.Equal(tc.wantUntil) || l.LegalHold != tc.old.LegalHold):
			t.Errorf("%s: lock %+v, want mode %q until %s", tc.name, l, tc.mode, tc.wantUntil)
		}
	}
}

// TestApplyBucketLock: what a new version's lock is, from its request
// and its bucket.
func TestApplyBucketLock(t *testing.T) {
	locked := &metadata.Bucket{ObjectLock: true}
	withDefault := &metadata.Bucket{ObjectLock: true, LockDefault: &metadata.LockRule{Mode: metadata.LockCompliance, Days: 3}}
	asked := &metadata.Lock{Mode: metadata.LockGovernance, RetainUntil: lockNow.Add(time.Hour)}
	for _, tc := range []struct {
		name   string
		b      *metadata.Bucket
		asked  *metadata.Lock
		want   *metadata.Lock
		refuse string
	}{
		{"plain bucket, nothing asked", &metadata.Bucket{}, nil, nil, ""},
		{"plain bucket, lock asked", &metadata.Bucket{}, asked, nil, "InvalidRequest"},
		{"plain bucket, legal hold OFF asked", &metadata.Bucket{}, &metadata.Lock{}, nil, "InvalidRequest"},
		{"lock bucket, nothing", locked, nil, nil, ""},
		{"lock bucket, asked", locked, asked, asked, ""},
		{"default applies", withDefault, nil, &metadata.Lock{Mode: metadata.LockCompliance, RetainUntil: lockNow.AddDate(0, 0, 3)}, ""},
		{"asked beats default", withDefault, asked, asked, ""},
		{"hold only: default retention too", withDefault, &metadata.Lock{LegalHold: true},
			&metadata.Lock{Mode: metadata.LockCompliance, RetainUntil: lockNow.AddDate(0, 0, 3), LegalHold: true}, ""},
	} {
		m := &metadata.Manifest{}
		err := applyBucketLock(tc.b, m, tc.asked, lockNow)
		if got := codeOf(err); got != tc.refuse {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.refuse)
			continue
		}
		if err == nil && !((m.Lock == nil && tc.want == nil) || (m.Lock != nil && tc.want != nil && *m.Lock == *tc.want)) {
			t.Errorf("%s: lock %+v, want %+v", tc.name, m.Lock, tc.want)
		}
	}
	if (metadata.LockRule{Years: 1}).Until(lockNow) != lockNow.AddDate(1, 0, 0) {
		t.Error("a one-year default is not a year")
	}
}

// TestEnableBucketLock: PutObjectLockConfiguration turns object lock on
// for a bucket whose versioning is Enabled (as S3 does) and refuses it
// for an unversioned or suspended one, leaving the record unchanged.
func TestEnableBucketLock(t *testing.T) {
	rule := &metadata.LockRule{Mode: metadata.LockGovernance, Days: 1}
	for _, tc := range []struct {
		b      metadata.Bucket
		refuse string
	}{
		{metadata.Bucket{}, "InvalidBucketState"},
		{metadata.Bucket{Versioning: metadata.VersioningSuspended}, "InvalidBucketState"},
		{metadata.Bucket{Versioning: metadata.VersioningEnabled}, ""},
		{metadata.Bucket{Versioning: metadata.VersioningEnabled, ObjectLock: true}, ""},
	} {
		b := tc.b
		err := enableBucketLock(&b, rule)
		switch got := codeOf(err); {
		case got != tc.refuse:
			t.Errorf("%+v: %q, want %q", tc.b, got, tc.refuse)
		case err != nil && (b.ObjectLock || b.LockDefault != nil):
			t.Errorf("%+v: refused but changed to %+v", tc.b, b)
		case err == nil && (!b.ObjectLock || b.LockDefault != rule):
			t.Errorf("%+v: enabled as %+v", tc.b, b)
		}
	}
}

// TestLockRuleOf: PutObjectLockConfiguration bodies.
func TestLockRuleOf(t *testing.T) {
	for _, tc := range []struct {
		body string
		want *metadata.LockRule
		err  string
	}{
		{`<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled></ObjectLockConfiguration>`, nil, ""},
		{`<ObjectLockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention><Mode>GOVERNANCE</Mode><Days>7</Days></DefaultRetention></Rule></ObjectLockConfiguration>`,
			&metadata.LockRule{Mode: "GOVERNANCE", Days: 7}, ""},
		{`<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention><Mode>COMPLIANCE</Mode><Years>2</Years></DefaultRetention></Rule></ObjectLockConfiguration>`,
			&metadata.LockRule{Mode: "COMPLIANCE", Years: 2}, ""},
		{`<ObjectLockConfiguration><ObjectLockEnabled>Disabled</ObjectLockEnabled></ObjectLockConfiguration>`, nil, "MalformedXML"},
		{`<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention><Mode>GOVERNANCE</Mode><Days>7</Days><Years>1</Years></DefaultRetention></Rule></ObjectLockConfiguration>`, nil, "MalformedXML"},
		{`<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention><Mode>GOVERNANCE</Mode></DefaultRetention></Rule></ObjectLockConfiguration>`, nil, "MalformedXML"},
		{`<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention><Mode>FOREVER</Mode><Days>1</Days></DefaultRetention></Rule></ObjectLockConfiguration>`, nil, "MalformedXML"},
		{`<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention><Mode>GOVERNANCE</Mode><Days>0</Days></DefaultRetention></Rule></ObjectLockConfiguration>`, nil, "InvalidArgument"},
		{`<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule></Rule></ObjectLockConfiguration>`, nil, "MalformedXML"},
	} {
		var in objectLockInput
		if err := xml.Unmarshal([]byte(tc.body), &in); err != nil {
			t.Fatal(err)
		}
		r, err := lockRuleOf(&in)
		if got := codeOf(err); got != tc.err {
			t.Errorf("%s: %q, want %q", tc.body, got, tc.err)
			continue
		}
		if (r == nil) != (tc.want == nil) || (r != nil && *r != *tc.want) {
			t.Errorf("%s: rule %+v, want %+v", tc.body, r, tc.want)
		}
	}
}

// TestDeleteLockedVersion: a removal by ID asks the guard about the
// version it read and removes nothing when refused; the version stays
// readable by ID. With the guard satisfied (an expired retention) it
// goes.
func TestDeleteLockedVersion(t *testing.T) {
	ctx := context.Background()
	g, f, kill := fakeCluster(t, 12)
	v1 := putVersionFake(g, f, "b", "k", "one", false)
	putVersionFake(g, f, "b", "k", "two", false)
	lock := &metadata.Lock{Mode: metadata.LockGovernance, RetainUntil: time.Now().Add(time.Hour)}
	f.mu.Lock()
	v1.Lock = lock // every fake server holds this manifest
	f.mu.Unlock()
	guard := func(bypass bool) *removalGuard {
		return &removalGuard{check: func(m *metadata.Manifest) error { return removable(m.Lock, time.Now(), bypass) }, bypass: bypass}
	}
	if _, err := g.layer.deleteVersionGuarded(ctx, "b", "k", v1.VersionID, guard(false)); codeOf(err) != "AccessDenied" {
		t.Fatalf("removal of a retained version: %v, want AccessDenied", err)
	}
	// With three servers of its placement down the lease (a write quorum)
	// cannot be had, but the refusal needs none: AccessDenied, not 503.
	var dead []int
	for _, id := range v1.Placement[:3] {
		dead = append(dead, idx(id))
	}
	kill(dead...)
	if _, err := g.layer.deleteVersionGuarded(ctx, "b", "k", v1.VersionID, guard(false)); codeOf(err) != "AccessDenied" {
		t.Fatalf("removal of a retained version with 3 of its servers down: %v, want AccessDenied", err)
	}
	kill()
	// The shard servers judge the lock themselves: a gateway that does
	// not know the bucket has object lock (a cache older than its
	// enabling) asks no guard, and one whose guard passes the version
	// (its clock past the retention) sends no bypass; both are refused.
	if _, err := g.layer.deleteVersion(ctx, "b", "k", v1.VersionID); codeOf(err) != "AccessDenied" {
		t.Fatalf("unguarded removal of a retained version: %v, want AccessDenied from the servers", err)
	}
	pass := &removalGuard{check: func(*metadata.Manifest) error { return nil }}
	if _, err := g.layer.deleteVersionGuarded(ctx, "b", "k", v1.VersionID, pass); codeOf(err) != "AccessDenied" {
		t.Fatalf("removal of a retained version past a lenient guard: %v, want AccessDenied from the servers", err)
	}
	if m, err := g.readVersion(ctx, "b", "k", v1.VersionID, false); err != nil || string(m.Inline) != "one" || m.Lock == nil {
		t.Fatalf("retained version after a refused removal: %+v, %v", m, err)
	}
	if m, err := g.layer.deleteVersionGuarded(ctx, "b", "k", v1.VersionID, guard(true)); err != nil || m == nil {
		t.Fatalf("removal with bypass: %v, %v", m, err)
	}
	if _, err := g.readVersion(ctx, "b", "k", v1.VersionID, false); !errors.Is(err, errNotFound) {
		t.Fatalf("version after its removal with bypass: %v, want absent", err)
	}
}

// The fake servers grant every lease (the tests here hold no contended
// key) but a down server's.
func (f *fakeManifests) AcquireLease(_ context.Context, addr, _, _ string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[addr] {
		return fmt.Errorf("%s down", addr)
	}
	return nil
}

func (f *fakeManifests) ReleaseLease(context.Context, string, string, string) error { return nil }

// TestUpdateVersion: a lock update of a noncurrent version is a newer
// manifest of that version ID just above it (TS+1), which the lookups by
// ID take and which leaves the current version current; of the current
// version, a manifest newer than everything.
func TestUpdateVersion(t *testing.T) {
	ctx := context.Background()
	g, f, _ := fakeCluster(t, 12)
	v1 := putVersionFake(g, f, "b", "k", "one", false)
	v2 := putVersionFake(g, f, "b", "k", "two", false)
	hold := func(m *metadata.Manifest) error {
		m.Lock = &metadata.Lock{LegalHold: true}
		return nil
	}
	up, err := g.layer.updateVersion(ctx, "b", "k", v1.VersionID, hold)
	if err != nil {
		t.Fatal(err)
	}
	if want := (metadata.Version{TS: v1.Version.TS + 1, Writer: v1.Version.Writer}); up.Version != want || up.VersionID != v1.VersionID {
		t.Fatalf("update of noncurrent v1 stored as %s (%s), want %s (%s)", up.Version, up.VersionID, want, v1.VersionID)
	}
	if m, err := g.readVersion(ctx, "b", "k", v1.VersionID, false); err != nil || m.Lock == nil || !m.Lock.LegalHold || string(m.Inline) != "one" {
		t.Fatalf("v1 after its update: %+v, %v", m, err)
	}
	if m, err := g.layer.readManifest(ctx, "b", "k"); err != nil || m.VersionID != v2.VersionID || m.Lock != nil {
		t.Fatalf("current version after updating v1: %+v, %v; want v2 unlocked", m, err)
	}
	// A repair switch of v1 then rewrites it as TS+1 by "+repair-n1". An
	// update of that manifest writes TS+1 under this gateway's own
	// writer, not the switch's: a second switch by n1 of the same
	// manifest (TS+1, "+repair-n1") would otherwise tie with it exactly,
	// and "+" sorts below every gateway writer, so the update wins.
	sw := *up
	sw.Version = metadata.Version{TS: up.Version.TS + 1, Writer: "+repair-n1"}
	f.mu.Lock()
	for _, id := range sw.Placement {
		f.store("a"+id[1:], &sw)
	}
	f.mu.Unlock()
	up, err = g.layer.updateVersion(ctx, "b", "k", v1.VersionID, hold)
	if want := (metadata.Version{TS: sw.Version.TS + 1, Writer: g.layer.clock.writer}); err != nil || up.Version != want {
		t.Fatalf("update of a switched v1: %+v, %v; want it stored as %s", up, err, want)
	}
	if second := (metadata.Version{TS: sw.Version.TS + 1, Writer: "+repair-n1"}); !second.Less(up.Version) {
		t.Fatalf("a second switch %s does not lose to the update %s", second, up.Version)
	}
	up, err = g.layer.updateVersion(ctx, "b", "k", v2.VersionID, hold)
	if err != nil || !v2.Version.Less(up.Version) || up.VersionID != v2.VersionID {
		t.Fatalf("update of current v2: %+v, %v", up, err)
	}
	if m, err := g.layer.readManifest(ctx, "b", "k"); err != nil || m.VersionID != v2.VersionID || m.Lock == nil || string(m.Inline) != "two" {
		t.Fatalf("current version after updating it: %+v, %v", m, err)
	}
	if _, err := g.layer.updateVersion(ctx, "b", "k", metadata.Version{TS: 7, Writer: "gw"}.String(), hold); !errors.Is(err, errNotFound) {
		t.Fatalf("update of a version never written: %v, want errNotFound", err)
	}
}
