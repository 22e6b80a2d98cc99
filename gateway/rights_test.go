package gateway

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/regen-s3/regen/internal/s3policy"
	"github.com/regen-s3/regen/metadata"
)

// TestRightFor: the right each request needs in its bucket, from the
// request as the router sees it.
func TestRightFor(t *testing.T) {
	for _, c := range []struct {
		method, key, query string
		copy               bool
		acl                string
		want               need
	}{
		{"GET", "k", "", false, "", needRead},
		{"HEAD", "k", "", false, "", needRead},
		{"GET", "k", "tagging", false, "", needRead},
		{"GET", "k", "attributes", false, "", needRead},
		{"GET", "k", "acl", false, "", needRead},
		{"GET", "", "list-type=2", false, "", needRead},
		{"GET", "", "", false, "", needRead},
		{"GET", "", "versions", false, "", needRead},
		{"GET", "", "versioning", false, "", needRead},
		{"HEAD", "", "", false, "", needAny},
		{"GET", "", "location", false, "", needAny},
		{"PUT", "k", "", false, "", needWrite},
		{"PUT", "k", "", false, "private", needWrite},
		{"PUT", "k", "", false, "bucket-owner-full-control", needWrite},
		{"PUT", "k", "", false, "public-read", needOwner}, // publishing is the owner's call
		{"PUT", "k", "", false, "authenticated-read", needOwner},
		{"POST", "k", "uploads", false, "public-read", needOwner},
		{"DELETE", "k", "", false, "", needWrite},
		{"PUT", "k", "tagging", false, "", needWrite},
		{"DELETE", "k", "tagging", false, "", needWrite},
		{"POST", "k", "uploads", false, "", needWrite},
		{"PUT", "k", "partNumber=1&uploadId=u", false, "", needWrite},
		{"POST", "k", "uploadId=u", false, "", needWrite},
		{"DELETE", "k", "uploadId=u", false, "", needWrite},
		{"GET", "k", "uploadId=u", false, "", needWrite},
		{"GET", "", "uploads", false, "", needWrite},
		{"PUT", "k", "acl", false, "", needOwner},
		{"GET", "", "acl", false, "", needOwner},
		{"PUT", "", "acl", false, "", needOwner},
		{"GET", "", "policy", false, "", needOwner},
		{"PUT", "", "policy", false, "", needOwner},
		{"DELETE", "", "policy", false, "", needOwner},
		{"GET", "", "policyStatus", false, "", needOwner},
		{"GET", "", "cors", false, "", needOwner},
		{"PUT", "", "cors", false, "", needOwner},
		{"DELETE", "", "cors", false, "", needOwner},
		{"GET", "", "tagging", false, "", needOwner},
		{"PUT", "", "tagging", false, "", needOwner},
		{"PUT", "", "ownershipControls", false, "", needOwner},
		{"PUT", "", "versioning", false, "", needOwner},
		{"GET", "k", "versionId=x", false, "", needRead},
		{"DELETE", "k", "versionId=x", false, "", needWrite},
		{"DELETE", "", "", false, "", needOwner},
		{"PATCH", "k", "", false, "", needAdmin}, // unknown: nobody but an administrator
	} {
		q, _ := url.ParseQuery(c.query)
		action, _ := s3Action(c.method, "b", c.key, q, c.copy)
		if got := rightFor(c.method, c.key, action, c.acl); got != c.want {
			t.Errorf("%s /b/%s?%s acl=%q (%s): needs %v, want %v", c.method, c.key, c.query, c.acl, action, got, c.want)
		}
	}
}

// TestDecision: the rights decision, every rule of access.go's comment.
func TestDecision(t *testing.T) {
	none := metadata.Rights{}
	read := metadata.Rights{Read: true}
	write := metadata.Rights{Write: true}
	owner := metadata.Rights{Owner: true}
	all := metadata.Rights{Read: true, Write: true, Owner: true}
	const (
		no    = s3policy.NoMatch
		allow = s3policy.Allow
		deny  = s3policy.Deny
	)
	for _, c := range []struct {
		name string
		d    decision
		want bool
	}{
		{"admin reads", decision{admin: true, need: needRead}, true},
		{"admin configures", decision{admin: true, need: needOwner}, true},
		{"admin, unknown action", decision{admin: true, need: needAdmin}, true},
		{"reader reads", decision{rights: read, need: needRead}, true},
		{"reader cannot write", decision{rights: read, need: needWrite}, false},
		{"reader cannot configure", decision{rights: read, need: needOwner}, false},
		{"writer writes", decision{rights: write, need: needWrite}, true},
		{"writer cannot read", decision{rights: write, need: needRead}, false},
		{"owner configures", decision{rights: owner, need: needOwner}, true},
		{"owner alone cannot read", decision{rights: owner, need: needRead}, false},
		{"all rights write", decision{rights: all, need: needWrite}, true},
		{"no rights", decision{rights: none, need: needRead}, false},
		{"any right: head bucket with write", decision{rights: write, need: needAny}, true},
		{"any right: none", decision{rights: none, need: needAny}, false},
		{"any right: a right on a prefix", decision{rights: none, someRight: true, need: needAny}, true},
		{"a right on a prefix is not read", decision{rights: none, someRight: true, need: needRead}, false},
		{"a right on a prefix is not owner", decision{rights: none, someRight: true, need: needOwner}, false},
		{"unknown action, all rights", decision{rights: all, need: needAdmin}, false},

		{"deny beats read right", decision{rights: read, need: needRead, policy: deny}, false},
		{"deny beats admin", decision{admin: true, need: needRead, policy: deny}, false},
		{"owner may replace a policy that denies it", decision{rights: owner, need: needOwner, policy: deny, policyAdmin: true}, true},
		{"admin may replace a policy that denies it", decision{admin: true, need: needOwner, policy: deny, policyAdmin: true}, true},
		{"reader may not touch the policy", decision{rights: read, need: needOwner, policy: deny, policyAdmin: true}, false},
		{"policy allow lets a key without rights in", decision{rights: none, need: needRead, policy: allow}, true},
		{"policy allow does not need rights to write", decision{rights: read, need: needWrite, policy: allow}, true},
		{"ACL grant lets a key without rights read", decision{rights: none, need: needRead, acl: true}, true},
		{"ACL grant does not beat deny", decision{rights: none, need: needRead, acl: true, policy: deny}, false},
		{"no match, no rights", decision{rights: write, need: needRead, policy: no}, false},

		{"anonymous, nothing", decision{anonymous: true, need: needRead}, false},
		{"anonymous, policy allow", decision{anonymous: true, need: needRead, policy: allow}, true},
		{"anonymous, ACL", decision{anonymous: true, need: needRead, acl: true}, true},
		{"anonymous, policy deny", decision{anonymous: true, need: needRead, policy: deny, acl: true}, false},
		{"anonymous never owner", decision{anonymous: true, admin: true, rights: all, need: needOwner, policy: deny, policyAdmin: true}, false},
	} {
		if got := c.d.allowed(); got != c.want {
			t.Errorf("%s: %+v allowed=%v, want %v", c.name, c.d, got, c.want)
		}
	}
}

func TestParseRights(t *testing.T) {
	for in, want := range map[string]metadata.Rights{
		"":                  {},
		"read":              {Read: true},
		"write,owner":       {Write: true, Owner: true},
		"read, write,owner": {Read: true, Write: true, Owner: true},
	} {
		got, err := parseRights(in)
		if err != nil || got != want {
			t.Errorf("parseRights(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"admin", "rw", "read,all"} {
		if _, err := parseRights(bad); err == nil {
			t.Errorf("parseRights(%q) accepted", bad)
		}
	}
	if !validKeyName("alice@example.com") || validKeyName("") || validKeyName("a b") || validKeyName(string(make([]byte, 65))) {
		t.Error("validKeyName")
	}
}

// TestScopedRights: which rights count where. A right on a prefix counts
// for the objects whose keys begin with it and for listings whose prefix
// begins with it, never for the bucket's configuration; rights on the
// whole bucket count everywhere.
func TestScopedRights(t *testing.T) {
	b := &metadata.Bucket{
		Name:   "b",
		Grants: map[string]metadata.Rights{"RKWIDE": {Read: true}},
		PrefixGrants: map[string][]metadata.PrefixRights{
			"RKTEAM": {
				{Prefix: "team/", Rights: metadata.Rights{Read: true, Write: true}},
				{Prefix: "team/pub", Rights: metadata.Rights{Owner: true}},
			},
			"RKWIDE": {{Prefix: "in/", Rights: metadata.Rights{Write: true}}},
		},
	}
	read, rw, rwo := metadata.Rights{Read: true}, metadata.Rights{Read: true, Write: true}, metadata.Rights{Read: true, Write: true, Owner: true}
	for _, c := range []struct {
		who, method, key, query string
		want                    metadata.Rights
	}{
		{"RKTEAM", "GET", "team/a", "", rw},
		{"RKTEAM", "PUT", "team/a", "", rw},
		{"RKTEAM", "GET", "team/public/x", "", rwo}, // both prefixes
		{"RKTEAM", "GET", "team", "", metadata.Rights{}},
		{"RKTEAM", "GET", "teams/a", "", metadata.Rights{}},
		{"RKTEAM", "GET", "other/a", "", metadata.Rights{}},
		{"RKTEAM", "GET", "", "list-type=2&prefix=team/", rw},
		{"RKTEAM", "GET", "", "list-type=2&prefix=team/sub/&delimiter=/", rw},
		{"RKTEAM", "GET", "", "prefix=team/", rw}, // V1
		{"RKTEAM", "GET", "", "versions&prefix=team/x", rw},
		{"RKTEAM", "GET", "", "uploads&prefix=team/", rw},
		{"RKTEAM", "GET", "", "list-type=2&prefix=team", metadata.Rights{}}, // would list "teams/..."
		{"RKTEAM", "GET", "", "list-type=2", metadata.Rights{}},
		{"RKTEAM", "GET", "", "list-type=2&prefix=other/", metadata.Rights{}},
		{"RKTEAM", "GET", "", "list-type=2&start-after=team/", metadata.Rights{}},
		{"RKTEAM", "GET", "", "versioning", metadata.Rights{}},
		{"RKTEAM", "GET", "", "policy", metadata.Rights{}},
		{"RKWIDE", "GET", "any", "", read},
		{"RKWIDE", "PUT", "in/x", "", rw},
		{"RKWIDE", "GET", "", "list-type=2", read},
		{"RKWIDE", "GET", "", "list-type=2&prefix=in/", rw},
		{"RKWIDE", "GET", "", "versioning", read},
		{"RKNONE", "GET", "team/a", "", metadata.Rights{}},
	} {
		q, _ := url.ParseQuery(c.query)
		req := &request{method: c.method, bucket: "b", key: c.key, query: q, who: principal{accessKey: c.who}}
		action, object := s3Action(c.method, "b", c.key, q, false)
		if got := scopedRights(req, b, action, c.key, object); got != c.want {
			t.Errorf("%s %s /b/%s?%s (%s): %+v, want %+v", c.who, c.method, c.key, c.query, action, got, c.want)
		}
	}
	anon := &request{method: "GET", bucket: "b", key: "team/a", anonymous: true}
	if got := scopedRights(anon, b, "s3:GetObject", "team/a", true); got.Any() {
		t.Errorf("anonymous: %+v", got)
	}
	for who, want := range map[string]bool{"RKTEAM": true, "RKWIDE": true, "RKNONE": false, "": false} {
		if got := (principal{accessKey: who}).anyRights(b); got != want {
			t.Errorf("anyRights(%q) = %v", who, got)
		}
	}
}

// TestChangeGrant: grants and revokes on a bucket and on its prefixes
// as the bucket record keeps them.
func TestChangeGrant(t *testing.T) {
	b := &metadata.Bucket{Name: "b"}
	step := func(prefix, rights string, grant bool) {
		t.Helper()
		r, err := parseRights(rights)
		if err != nil {
			t.Fatal(err)
		}
		if err := changeGrant(b, "K", prefix, r, grant); err != nil {
			t.Fatalf("changeGrant(%q, %q, %v): %v", prefix, rights, grant, err)
		}
	}
	prefixes := func() string {
		var out []string
		for _, p := range b.PrefixGrants["K"] {
			out = append(out, p.Prefix+":"+strings.Join(rightNames(p.Rights), ","))
		}
		return strings.Join(out, " ")
	}
	step("logs/", "read", true)
	step("a/", "write", true)
	step("logs/", "write", true)
	step("", "read", true)
	if got := prefixes(); got != "a/:write logs/:read,write" {
		t.Errorf("after grants: %q", got)
	}
	if b.Grants["K"] != (metadata.Rights{Read: true}) {
		t.Errorf("bucket-wide: %+v", b.Grants["K"])
	}
	step("logs/", "read", false)
	step("a/", "write", false)
	if got := prefixes(); got != "logs/:write" {
		t.Errorf("after revokes: %q", got)
	}
	step("", "read", false) // the bucket's read only
	if _, ok := b.Grants["K"]; ok || prefixes() != "logs/:write" {
		t.Errorf("revoking read on the bucket: %+v %q", b.Grants, prefixes())
	}
	step("x/", "", false) // no such prefix: nothing changes
	if prefixes() != "logs/:write" {
		t.Errorf("revoking an unknown prefix: %q", prefixes())
	}
	step("", "", false) // every right on b, its prefixes' too
	if len(b.Grants) != 0 || len(b.PrefixGrants) != 0 {
		t.Errorf("after revoking everything: %+v %+v", b.Grants, b.PrefixGrants)
	}
	for i := range maxPrefixGrants {
		step(fmt.Sprintf("p%03d/", i), "read", true)
	}
	if err := changeGrant(b, "K", "one-more/", metadata.Rights{Read: true}, true); err == nil {
		t.Errorf("grant %d on the %dth prefix accepted", maxPrefixGrants, maxPrefixGrants+1)
	}
	step("p000/", "write", true) // a prefix it has: still allowed
	if err := checkGrantPrefix("ok/"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"bad\x01", "\xff", strings.Repeat("x", maxKeyLen+1)} {
		if checkGrantPrefix(bad) == nil {
			t.Errorf("prefix %q accepted", bad)
		}
	}
}

// BenchmarkScopedRights: what rights on prefixes add to each request's
// decision, for a key with rights on the whole bucket only and for one
// with the most prefixes a key may have in a bucket.
func BenchmarkScopedRights(b *testing.B) {
	for _, n := range []int{0, maxPrefixGrants} {
		bucket := &metadata.Bucket{Name: "b", Grants: map[string]metadata.Rights{"K": {Read: true}}}
		for i := range n {
			if err := changeGrant(bucket, "K", fmt.Sprintf("team-%03d/", i), metadata.Rights{Write: true}, true); err != nil {
				b.Fatal(err)
			}
		}
		req := &request{method: "GET", bucket: "b", key: "team-050/some/object.txt", query: url.Values{}, who: principal{accessKey: "K"}}
		b.Run(fmt.Sprintf("prefixes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := scopedRights(req, bucket, "s3:PutObject", req.key, true); !r.Read {
					b.Fatal("no read right")
				}
			}
		})
	}
}
