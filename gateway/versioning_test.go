package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/regen-s3/regen/metadata"
)

// putVersionFake writes a versioned object (or, with deleted, a delete
// marker) of bucket/key to the first nine servers of its order, except
// those in skip, as a PUT (DELETE) in a bucket with versioning enabled
// does; the fake servers name it by its version.
func putVersionFake(g *Gateway, f *fakeManifests, bucket, key, data string, deleted bool, skip ...int) *metadata.Manifest {
	order, _ := g.layer.manifestOrder(bucket, key)
	m := &metadata.Manifest{Bucket: bucket, Key: key, Version: g.layer.clock.next(), Code: "rs-6-3", Placement: order[:9],
		Versioned: true, Deleted: deleted}
	if !deleted {
		m.Size, m.Inline, m.ETag = int64(len(data)), []byte(data), data
	}
	m.VersionID = m.Version.String()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, id := range order[:9] {
		if !slices.Contains(skip, i) {
			f.store("a"+id[1:], m)
		}
	}
	return m
}

// TestVersionLookup reads versions of a key by ID with the rules of the
// current version's lookup: found when k servers hold it, a delete marker
// told apart from absence, absent only when proven, 503 otherwise.
func TestVersionLookup(t *testing.T) {
	ctx := context.Background()
	g, f, kill := fakeCluster(t, 12)
	v1 := putVersionFake(g, f, "b", "k", "one", false)
	v2 := putVersionFake(g, f, "b", "k", "two", false)
	order, _ := g.layer.manifestOrder("b", "k")

	if m, err := g.layer.readManifest(ctx, "b", "k"); err != nil || string(m.Inline) != "two" {
		t.Fatalf("current: %v, %v; want v2", m, err)
	}
	for _, tc := range []struct {
		name string
		id   string
		want string // data, "absent" or "unsure"
		dead []int  // positions in the key's order
	}{
		{"newest by ID", v2.VersionID, "two", nil},
		{"noncurrent by ID", v1.VersionID, "one", nil},
		{"noncurrent with m servers down", v1.VersionID, "one", []int{0, 1, 2}},
		{"an ID never written is absent", metadata.Version{TS: 7, Writer: "gw"}.String(), "absent", nil},
		{"the null version is absent", "", "absent", nil},
		{"too many silent: not proven absent", metadata.Version{TS: 7, Writer: "gw"}.String(), "unsure", []int{0, 1, 2, 3, 4, 5}},
		{"too many silent: not readable", v1.VersionID, "unsure", []int{0, 1, 2, 3, 4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dead []int
			for _, p := range tc.dead {
				dead = append(dead, idx(order[p]))
			}
			kill(dead...)
			defer kill()
			m, err := g.layer.lookupWhere(ctx, "b", "k", true, matchVersion(tc.id))
			switch tc.want {
			case "absent":
				if !errors.Is(err, errNotFound) {
					t.Fatalf("got %v, %v; want not found", m, err)
				}
			case "unsure":
				if !errors.Is(err, errUnavailable) {
					t.Fatalf("got %v, %v; want unavailable", m, err)
				}
			default:
				if err != nil || string(m.Inline) != tc.want {
					t.Fatalf("got %v, %v; want %q", m, err, tc.want)
				}
			}
		})
	}

	// A delete marker on top: the current lookup says "not found" and
	// tells which marker; the versions under it stay readable by ID.
	dm := putVersionFake(g, f, "b", "k", "", true)
	var mk *deleteMarkerError
	if _, err := g.layer.lookupWhere(ctx, "b", "k", false, nil); !errors.As(err, &mk) || mk.m.VersionID != dm.VersionID || !errors.Is(err, errNotFound) {
		t.Fatalf("current under a marker: %v; want the marker, as not found", err)
	}
	if _, err := g.layer.readHead(ctx, "b", "k"); err != errNotFound {
		t.Fatalf("readHead under a marker: %v; want errNotFound itself, as before versioning", err)
	}
	if m, err := g.layer.lookupWhere(ctx, "b", "k", false, matchVersion(dm.VersionID)); !errors.As(err, &mk) {
		t.Fatalf("marker by ID: %v, %v; want a deleteMarkerError", m, err)
	}
	if m, err := g.layer.lookupWhere(ctx, "b", "k", true, matchVersion(v2.VersionID)); err != nil || string(m.Inline) != "two" {
		t.Fatalf("v2 under the marker: %v, %v", m, err)
	}
}

// TestDeleteVersion removes one version from the servers that hold it:
// a marker removed brings the object back, a version removed is absent
// afterwards, an absent one is a success that changes nothing, and with
// more than n-(k+1) placement servers down it fails (503), never a
// success short of a write quorum.
func TestDeleteVersion(t *testing.T) {
	ctx := context.Background()
	g, f, kill := fakeCluster(t, 12)
	v1 := putVersionFake(g, f, "b", "k", "one", false)
	dm := putVersionFake(g, f, "b", "k", "", true)
	order, _ := g.layer.manifestOrder("b", "k")

	m, err := g.layer.deleteVersion(ctx, "b", "k", dm.VersionID)
	if err != nil || m == nil || !m.Deleted {
		t.Fatalf("delete the marker: %v, %v", m, err)
	}
	if m, err := g.layer.readManifest(ctx, "b", "k"); err != nil || string(m.Inline) != "one" {
		t.Fatalf("after the marker went: %v, %v; want v1 back", m, err)
	}
	if f.distinctVersions("b", "k", func(m *metadata.Manifest) bool { return m.VersionID == dm.VersionID }) != 0 {
		t.Fatal("a server still holds the removed marker")
	}
	if m, err := g.layer.deleteVersion(ctx, "b", "k", dm.VersionID); err != nil || m != nil {
		t.Fatalf("delete of a version already gone: %v, %v; want success, nothing removed", m, err)
	}

	kill(idx(order[0]), idx(order[1]), idx(order[2]))
	if _, err := g.layer.deleteVersion(ctx, "b", "k", v1.VersionID); !errors.Is(err, errUnavailable) {
		t.Fatalf("delete with 3 of 9 down: %v; want unavailable (write quorum 7)", err)
	}
	kill(idx(order[0]), idx(order[1]))
	if _, err := g.layer.deleteVersion(ctx, "b", "k", v1.VersionID); err != nil {
		t.Fatalf("delete with 2 of 9 down: %v", err)
	}
	kill()
	// Two servers missed the removal and still hold v1: fewer than k,
	// so neither the key nor the version is readable, and it is absent.
	if _, err := g.layer.readManifest(ctx, "b", "k"); !errors.Is(err, errNotFound) {
		t.Fatalf("key after its only version went: %v; want not found", err)
	}
	if _, err := g.layer.lookupWhere(ctx, "b", "k", false, matchVersion(v1.VersionID)); !errors.Is(err, errNotFound) {
		t.Fatalf("removed version: %v; want not found", err)
	}
}

// TestWriteDeleteMarker: a DELETE in a versioned bucket adds a marker
// over the current version and keeps it; in a suspended bucket the marker
// is the null version.
func TestWriteDeleteMarker(t *testing.T) {
	ctx := context.Background()
	g, f, _ := fakeCluster(t, 12)
	v1 := putVersionFake(g, f, "b", "k", "one", false)
	for _, versioned := range []bool{true, false} {
		mk, err := g.writeDeleteMarker(ctx, "b", "k", versioned)
		if err != nil || !mk.Deleted || mk.Versioned != versioned || !slices.Equal(mk.Placement, v1.Placement) {
			t.Fatalf("marker (versioned %v): %+v, %v", versioned, mk, err)
		}
		var dm *deleteMarkerError
		if _, err := g.layer.lookupWhere(ctx, "b", "k", false, nil); !errors.As(err, &dm) || dm.m.Version != mk.Version {
			t.Fatalf("current after the marker: %v", err)
		}
		if want := metadata.NullVersionID; !versioned && mk.S3VersionID() != want {
			t.Fatalf("suspended marker's ID %q, want %q", mk.S3VersionID(), want)
		}
	}
	if m, err := g.layer.lookupWhere(ctx, "b", "k", true, matchVersion(v1.VersionID)); err != nil || string(m.Inline) != "one" {
		t.Fatalf("v1 under the markers: %v, %v", m, err)
	}
}

// TestDeleteMarkersBatched: DeleteObjects' entries without a version ID
// in a versioned bucket add a marker to every key (over a live version,
// over a marker, over nothing) with a bounded number of calls, keep the
// versions under them, and fail, never falsely succeed, where the write
// quorum cannot be reached.
func TestDeleteMarkersBatched(t *testing.T) {
	ctx := context.Background()
	placeAbsent := func(g *Gateway) func(context.Context, string) (*metadata.Manifest, error) {
		return func(_ context.Context, key string) (*metadata.Manifest, error) {
			order, _ := g.layer.manifestOrder("b", key)
			return &metadata.Manifest{Bucket: "b", Key: key, Code: "rs-6-3", Placement: order[:9]}, nil
		}
	}
	for _, versioned := range []bool{true, false} {
		g, f, _ := fakeCluster(t, 12)
		var keys []string
		under := map[string]*metadata.Manifest{}
		for i := range 200 {
			k := fmt.Sprintf("k%03d", i)
			under[k] = putVersionFake(g, f, "b", k, k, i%10 == 0) // every tenth a marker
			keys = append(keys, k)
		}
		keys = append(keys, "never-written")
		f.calls = 0
		errs, marks := g.deleteBatch(ctx, "b", keys, &markerMode{versioned: versioned, placeAbsent: placeAbsent(g)})
		if f.calls > 36 {
			t.Errorf("versioned %v: %d calls for %d keys on 12 servers, want at most 36", versioned, f.calls, len(keys))
		}
		for i, k := range keys {
			mk := marks[i]
			if errs[i] != nil || mk == nil || !mk.Deleted || mk.Versioned != versioned {
				t.Fatalf("versioned %v, %s: marker %+v, %v", versioned, k, mk, errs[i])
			}
			if !versioned && mk.S3VersionID() != metadata.NullVersionID {
				t.Fatalf("suspended marker of %s has ID %q", k, mk.S3VersionID())
			}
			var dm *deleteMarkerError
			if _, err := g.layer.lookupWhere(ctx, "b", k, false, nil); !errors.As(err, &dm) || dm.m.Version != mk.Version {
				t.Fatalf("versioned %v, %s after the batch: %v; want the batch's marker current", versioned, k, err)
			}
			if v := under[k]; v != nil && !v.Deleted {
				if m, err := g.layer.lookupWhere(ctx, "b", k, true, matchVersion(v.VersionID)); err != nil || string(m.Inline) != k {
					t.Fatalf("versioned %v, %s: the version under the marker: %v, %v", versioned, k, m, err)
				}
			}
		}
	}
	t.Run("three servers down: no false success", func(t *testing.T) {
		g, f, kill := fakeCluster(t, 12)
		putVersionFake(g, f, "b", "k", "one", false)
		order, _ := g.layer.manifestOrder("b", "k")
		kill(idx(order[0]), idx(order[1]), idx(order[2]))
		errs, marks := g.deleteBatch(ctx, "b", []string{"k"}, &markerMode{versioned: true, placeAbsent: placeAbsent(g)})
		if errs[0] == nil || marks[0] != nil {
			t.Fatalf("marker on 6 of 9 reported as written: %+v, %v", marks[0], errs[0])
		}
	})
}

// TestVisibleVersions: ListObjectVersions lists, per key, the versions
// that may be visible, newest manifest per version ID, newest first.
func TestVisibleVersions(t *testing.T) {
	g, _, _ := fakeCluster(t, 12)
	at := func(ts int64) metadata.Version { return metadata.Version{TS: ts, Writer: "gw"} }
	e := func(ts int64, id int64, deleted bool) metadata.ListEntry {
		le := metadata.ListEntry{Key: "k", Version: at(ts), Code: "rs-6-3", Deleted: deleted, Modified: time.Unix(ts, 0)}
		if id > 0 {
			le.VersionID = at(id).String()
		}
		return le
	}
	// server returns its current entry with its previous versions.
	server := func(cur metadata.ListEntry, prev ...metadata.ListEntry) metadata.ListEntry {
		cur.Previous = prev
		return cur
	}
	times := func(n int, le metadata.ListEntry) []metadata.ListEntry {
		out := make([]metadata.ListEntry, n)
		for i := range out {
			out[i] = le
		}
		return out
	}
	cases := []struct {
		name   string
		same   []metadata.ListEntry
		silent int
		want   []int64 // TS of the versions listed, newest first; nil: key not listed
	}{
		{"all versions, newest first", times(9, server(e(3, 3, false), e(2, 2, false), e(1, 0, false))), 0, []int64{3, 2, 1}},
		{"a failed write on 2 servers is not listed", append(times(7, server(e(2, 2, false), e(1, 1, false))), times(2, server(e(5, 5, false), e(2, 2, false), e(1, 1, false)))...), 0, []int64{2, 1}},
		{"with silent servers it may be visible", append(times(5, server(e(2, 2, false), e(1, 1, false))), times(2, server(e(5, 5, false), e(2, 2, false), e(1, 1, false)))...), 4, []int64{5, 2, 1}},
		{"a repair switch and its original: the newest manifest only", times(9, server(e(4, 2, false), e(2, 2, false), e(1, 1, false))), 0, []int64{4, 1}},
		{"two null versions, unconfirmed: the newest only", times(9, server(e(3, 0, false), e(2, 0, false), e(1, 1, false))), 0, []int64{3, 1}},
		{"a delete marker on top is listed", times(9, server(e(3, 3, true), e(2, 2, false))), 0, []int64{3, 2}},
		{"a null tombstone over nothing is not", times(9, server(e(3, 3, false), e(2, 0, true))), 0, []int64{3}},
		{"only a null tombstone: key not listed", times(9, server(e(2, 0, true))), 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := g.layer.visibleVersions(tc.same, tc.silent)
			if !ok {
				if tc.want != nil {
					t.Fatalf("key not listed, want %v", tc.want)
				}
				return
			}
			var ts []int64
			for _, v := range append([]metadata.ListEntry{got}, got.Previous...) {
				ts = append(ts, v.Version.TS)
			}
			if !slices.Equal(ts, tc.want) {
				t.Fatalf("listed %v, want %v", ts, tc.want)
			}
		})
	}
}

func TestKeyBefore(t *testing.T) {
	for _, k := range []string{"a", "b/c", "k\x00", "zz", "é"} {
		p := keyBefore(k)
		if !(p < k) {
			t.Fatalf("keyBefore(%q) = %q, not before it", k, p)
		}
		// No UTF-8 key lies strictly between them.
		for _, between := range []string{k[:len(k)-1], k[:len(k)-1] + "\x7f", k + "\x00"} {
			if p < between && between < k {
				t.Fatalf("%q lies between keyBefore(%q) = %q and it", between, k, p)
			}
		}
	}
}

// TestVersionsXML: versions and delete markers interleave in one list,
// each under its own element name, a marker without ETag, Size or
// StorageClass, and no xmlns="" on either (SDKs read both).
func TestVersionsXML(t *testing.T) {
	size := int64(0)
	out := string(EncodeXML(ListVersionsResult{Name: "b", Versions: []VersionEntry{
		VersionEntry{Key: "a", VersionID: "2", IsLatest: true, ETag: `"e"`, StorageClass: "STANDARD"}.Marker(),
		{Key: "a", VersionID: "1", ETag: `"e"`, Size: &size, StorageClass: "STANDARD"},
	}}))
	for _, want := range []string{
		"<DeleteMarker><Key>a</Key><VersionId>2</VersionId><IsLatest>true</IsLatest><LastModified>",
		"<Version><Key>a</Key><VersionId>1</VersionId><IsLatest>false</IsLatest>",
		"<ETag>&#34;e&#34;</ETag><Size>0</Size><StorageClass>STANDARD</StorageClass></Version>",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("%s\nwant it to contain %s", out, want)
		}
	}
	if strings.Count(out, "<ETag>") != 1 || strings.Contains(out, `xmlns=""`) {
		t.Fatalf("%s: a marker with an ETag, or xmlns=\"\"", out)
	}
}

// subRequest is a sub-resource request (?tagging, ?acl) on bucket/key,
// naming version id ("": none).
func subRequest(bucket, key, sub, id string) *request {
	q := url.Values{sub: {""}}
	if id != "" {
		q.Set("versionId", id)
	}
	return &request{bucket: bucket, key: key, query: q}
}

// TestTagsOfAnyVersion: ?tagging and ?acl act on the version the request
// names, current or not, through one locked update (updateNamed over
// layer.updateVersion), and leave the other versions and the data as
// they are; an unknown ID is NoSuchVersion, a delete marker by ID 405, a
// key whose current version is a marker NoSuchKey; in a bucket never
// versioned only the null version (the current one) is named.
func TestTagsOfAnyVersion(t *testing.T) {
	ctx := context.Background()
	g, f, _ := fakeCluster(t, 12)
	b := metadata.Bucket{Name: "b", Versioning: metadata.VersioningEnabled}
	v1 := putVersionFake(g, f, "b", "k", "one", false)
	v2 := putVersionFake(g, f, "b", "k", "two", false)
	tag := func(v string) func(*metadata.Manifest) error {
		return func(m *metadata.Manifest) error { m.Tags = map[string]string{"v": v}; return nil }
	}
	if _, err := g.updateNamed(ctx, subRequest("b", "k", "tagging", v1.VersionID), &b, tag("one")); err != nil {
		t.Fatalf("tags of noncurrent v1: %v", err)
	}
	if _, err := g.updateNamed(ctx, subRequest("b", "k", "tagging", ""), &b, tag("two")); err != nil {
		t.Fatalf("tags of the current version: %v", err)
	}
	if _, err := g.updateNamed(ctx, subRequest("b", "k", "acl", v1.VersionID), &b, func(m *metadata.Manifest) error {
		m.ACL = "public-read"
		return nil
	}); err != nil {
		t.Fatalf("ACL of noncurrent v1: %v", err)
	}
	for id, want := range map[string]string{v1.VersionID: "one", v2.VersionID: "two", "": "two"} {
		m, _, err := g.namedVersion(ctx, subRequest("b", "k", "tagging", id), &b)
		if err != nil || m.Tags["v"] != want || (m.ACL == "public-read") != (want == "one") {
			t.Errorf("version %q: %+v, %v; want tag %s", id, m, err, want)
		}
	}
	if m, err := g.readVersion(ctx, "b", "k", v1.VersionID, false); err != nil || string(m.Inline) != "one" {
		t.Fatalf("v1's data after its updates: %+v, %v", m, err)
	}
	if m, err := g.layer.readManifest(ctx, "b", "k"); err != nil || m.VersionID != v2.VersionID || string(m.Inline) != "two" {
		t.Fatalf("current version after the updates: %+v, %v; want v2", m, err)
	}

	marker := putVersionFake(g, f, "b", "k", "", true)
	never := metadata.Version{TS: 7, Writer: "gw"}.String()
	for _, c := range []struct{ id, code string }{
		{marker.VersionID, "MethodNotAllowed"}, {never, "NoSuchVersion"}, {"", "NoSuchKey"}, {"bogus", "InvalidArgument"},
	} {
		if _, _, err := g.namedVersion(ctx, subRequest("b", "k", "tagging", c.id), &b); codeOf(err) != c.code {
			t.Errorf("GET ?tagging of %q: %v, want %s", c.id, err, c.code)
		}
		if _, err := g.updateNamed(ctx, subRequest("b", "k", "tagging", c.id), &b, tag("x")); codeOf(err) != c.code {
			t.Errorf("PUT ?tagging of %q: %v, want %s", c.id, err, c.code)
		}
	}

	plain := metadata.Bucket{Name: "b"}
	putFake(g, f, "b", "p")
	if _, err := g.updateNamed(ctx, subRequest("b", "p", "tagging", "null"), &plain, tag("null")); err != nil {
		t.Fatalf("tags of versionId=null in a bucket never versioned: %v", err)
	}
	if m, err := g.layer.readManifest(ctx, "b", "p"); err != nil || m.Tags["v"] != "null" {
		t.Fatalf("after tagging versionId=null: %+v, %v", m, err)
	}
	if _, err := g.updateNamed(ctx, subRequest("b", "p", "tagging", v1.VersionID), &plain, tag("x")); codeOf(err) != "InvalidArgument" {
		t.Fatalf("a version ID in a bucket never versioned: %v, want InvalidArgument", err)
	}
}

// TestACLOfVersionDecidesItsRead: an anonymous GET of a version by ID is
// allowed by that version's canned ACL, not the current version's.
func TestACLOfVersionDecidesItsRead(t *testing.T) {
	ctx := context.Background()
	g, f, _ := fakeCluster(t, 12)
	b := metadata.Bucket{Name: "b", Versioning: metadata.VersioningEnabled}
	v1 := putVersionFake(g, f, "b", "k", "one", false)
	f.mu.Lock()
	v1.ACL = "public-read" // every fake server holds this manifest
	f.mu.Unlock()
	v2 := putVersionFake(g, f, "b", "k", "two", false)
	for _, c := range []struct {
		action, id string
		want       bool
	}{
		{"s3:GetObjectVersion", v1.VersionID, true},
		{"s3:GetObjectVersion", v2.VersionID, false},
		{"s3:GetObject", "", false},
	} {
		req := subRequest("b", "k", "versionId", c.id)
		req.anonymous = true
		if c.id == "" {
			req.query = url.Values{}
		}
		ok, err := g.allowedOn(ctx, nil, req, &b, c.action, "k", true, needRead)
		if err != nil || ok != c.want {
			t.Errorf("anonymous %s of %q: %v, %v; want %v", c.action, c.id, ok, err, c.want)
		}
	}
}
