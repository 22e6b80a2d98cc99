package gateway

import (
	"net/url"
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
