package gateway

import (
	"net/url"
	"testing"

	"github.com/regen-s3/regen/metadata"
)

func TestS3Action(t *testing.T) {
	for _, c := range []struct {
		method, bucket, key, query string
		copy                       bool
		action                     string
		object                     bool
	}{
		{"GET", "", "", "", false, "s3:ListAllMyBuckets", false},
		{"GET", "b", "", "", false, "s3:ListBucket", false},
		{"HEAD", "b", "", "", false, "s3:ListBucket", false},
		{"GET", "b", "", "list-type=2&prefix=a", false, "s3:ListBucket", false},
		{"GET", "b", "", "versions", false, "s3:ListBucketVersions", false},
		{"GET", "b", "", "uploads", false, "s3:ListBucketMultipartUploads", false},
		{"PUT", "b", "", "", false, "s3:CreateBucket", false},
		{"DELETE", "b", "", "", false, "s3:DeleteBucket", false},
		{"GET", "b", "", "acl", false, "s3:GetBucketAcl", false},
		{"DELETE", "b", "", "cors", false, "s3:PutBucketCORS", false},
		{"POST", "b", "", "delete", false, "", false},
		{"GET", "b", "k", "", false, "s3:GetObject", true},
		{"HEAD", "b", "k", "partNumber=1", false, "s3:GetObject", true},
		{"PUT", "b", "k", "", false, "s3:PutObject", true},
		{"PUT", "b", "k", "", true, "", true},
		{"DELETE", "b", "k", "", false, "s3:DeleteObject", true},
		{"GET", "b", "k", "versionId=x", false, "s3:GetObjectVersion", true},
		{"HEAD", "b", "k", "versionId=x", false, "s3:GetObjectVersion", true},
		{"DELETE", "b", "k", "versionId=x", false, "s3:DeleteObjectVersion", true},
		{"GET", "b", "k", "acl", false, "s3:GetObjectAcl", true},
		{"PUT", "b", "k", "tagging", false, "s3:PutObjectTagging", true},
		{"GET", "b", "k", "attributes", false, "s3:GetObjectAttributes", true},
		{"POST", "b", "k", "uploads", false, "s3:PutObject", true},
		{"GET", "b", "k", "uploadId=x", false, "s3:ListMultipartUploadParts", true},
		{"DELETE", "b", "k", "uploadId=x", false, "s3:AbortMultipartUpload", true},
	} {
		q, _ := url.ParseQuery(c.query)
		a, obj := s3Action(c.method, c.bucket, c.key, q, c.copy)
		if a != c.action || obj != c.object {
			t.Errorf("%s /%s/%s?%s copy=%v: %q object=%v; want %q %v", c.method, c.bucket, c.key, c.query, c.copy, a, obj, c.action, c.object)
		}
	}
}

func TestACLAllows(t *testing.T) {
	pub := &metadata.Bucket{ACL: "public-read"}
	authRead := &metadata.Bucket{ACL: "authenticated-read"}
	priv := &metadata.Bucket{}
	enforced := &metadata.Bucket{ACL: "public-read", Ownership: "BucketOwnerEnforced"}
	pubObj := &metadata.Manifest{ACL: "public-read"}
	authObj := &metadata.Manifest{ACL: "authenticated-read"}
	for _, c := range []struct {
		action string
		signed bool
		b      *metadata.Bucket
		m      *metadata.Manifest
		want   bool
	}{
		{"s3:ListBucket", false, pub, nil, true},
		{"s3:ListBucket", true, pub, nil, true},
		{"s3:ListBucket", false, priv, nil, false},
		{"s3:ListBucket", false, enforced, nil, false},
		{"s3:ListBucket", false, authRead, nil, false},
		{"s3:ListBucket", true, authRead, nil, true},
		{"s3:GetObject", false, priv, pubObj, true},
		{"s3:GetObject", false, priv, authObj, false},
		{"s3:GetObject", true, priv, authObj, true},
		{"s3:GetObject", false, pub, &metadata.Manifest{}, false}, // a public bucket does not make its objects public
		{"s3:GetObject", false, priv, nil, false},
		{"s3:GetObject", false, &metadata.Bucket{Ownership: "BucketOwnerEnforced"}, pubObj, false},
		{"s3:PutObject", true, pub, pubObj, false},
		{"s3:GetObjectAcl", false, pub, pubObj, false},
	} {
		if got := aclAllows(c.action, c.signed, c.b, c.m); got != c.want {
			t.Errorf("%s signed=%v bucket %+v object %+v: %v, want %v", c.action, c.signed, c.b, c.m, got, c.want)
		}
	}
}

func TestS3Escape(t *testing.T) {
	for in, want := range map[string]string{
		"a/b c":   "a/b%20c",
		"c+d":     "c%2Bd",
		"é":       "%C3%A9",
		"x-_.~/y": "x-_.~/y",
		"%&=?":    "%25%26%3D%3F",
	} {
		if got := s3Escape(in, true); got != want {
			t.Errorf("s3Escape(%q) = %q, want %q", in, got, want)
		}
		if got := s3Escape(in, false); got != in {
			t.Errorf("s3Escape off changed %q", in)
		}
	}
}
