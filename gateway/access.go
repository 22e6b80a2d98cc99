package gateway

import (
	"errors"
	"net/url"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// Who may do what. Every access key has full control of every bucket
// (regen has one owner). A request without any signature is anonymous: it
// is allowed exactly where a canned ACL (public-read on the bucket for
// listing, on the object for reading) says so, and refused with
// AccessDenied everywhere else.

// s3Action names the IAM action of a request, as S3's bucket policies and
// ACLs know it ("s3:GetObject"), and whether it acts on an object (the
// resource is then the object's ARN, else the bucket's). An empty action
// is one no grant can allow to an anonymous caller (ListBuckets, admin).
func s3Action(method, bucket, key string, q url.Values, copySource bool) (action string, object bool) {
	if bucket == "" {
		return "s3:ListAllMyBuckets", false
	}
	get := method == fiber.MethodGet || method == fiber.MethodHead
	put := method == fiber.MethodPut
	del := method == fiber.MethodDelete
	sub := func(name, getAct, putAct, delAct string) (string, bool) {
		if !q.Has(name) {
			return "", false
		}
		switch {
		case get:
			return getAct, true
		case put:
			return putAct, true
		case del:
			return delAct, true
		}
		return "", true
	}
	if key != "" {
		for _, s := range [][4]string{
			{"acl", "s3:GetObjectAcl", "s3:PutObjectAcl", ""},
			{"tagging", "s3:GetObjectTagging", "s3:PutObjectTagging", "s3:DeleteObjectTagging"},
			{"attributes", "s3:GetObjectAttributes", "", ""},
		} {
			if a, ok := sub(s[0], s[1], s[2], s[3]); ok {
				return a, true
			}
		}
		switch {
		case q.Has("uploadId") && get:
			return "s3:ListMultipartUploadParts", true
		case q.Has("uploadId") && del:
			return "s3:AbortMultipartUpload", true
		case copySource:
			return "", true // a copy reads another object too: never anonymous
		case get:
			return "s3:GetObject", true
		case put, method == fiber.MethodPost:
			return "s3:PutObject", true
		case del:
			return "s3:DeleteObject", true
		}
		return "", true
	}
	for _, s := range [][4]string{
		{"acl", "s3:GetBucketAcl", "s3:PutBucketAcl", ""},
		{"policy", "s3:GetBucketPolicy", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"},
		{"policyStatus", "s3:GetBucketPolicyStatus", "", ""},
		{"cors", "s3:GetBucketCORS", "s3:PutBucketCORS", "s3:PutBucketCORS"},
		{"tagging", "s3:GetBucketTagging", "s3:PutBucketTagging", "s3:PutBucketTagging"},
		{"ownershipControls", "s3:GetBucketOwnershipControls", "s3:PutBucketOwnershipControls", "s3:PutBucketOwnershipControls"},
		{"versioning", "s3:GetBucketVersioning", "s3:PutBucketVersioning", ""},
		{"location", "s3:GetBucketLocation", "", ""},
		{"versions", "s3:ListBucketVersions", "", ""},
		{"uploads", "s3:ListBucketMultipartUploads", "", ""},
	} {
		if a, ok := sub(s[0], s[1], s[2], s[3]); ok {
			return a, false
		}
	}
	switch {
	case get:
		return "s3:ListBucket", false
	case put:
		return "s3:CreateBucket", false
	case del:
		return "s3:DeleteBucket", false
	}
	return "", false // POST ?delete: checked per key by the owner only
}

// Canned ACLs regen stores and enforces. authenticated-read grants reading
// to every holder of an access key, who already has full control, so it
// changes nothing but what GetBucketAcl/GetObjectAcl report.
var cannedACLs = []string{"private", "public-read", "authenticated-read", "bucket-owner-full-control", "bucket-owner-read"}

// storedACL is how a canned ACL is recorded: "" for the ones that grant
// nothing beyond the owner's full control.
func storedACL(canned string) string {
	switch canned {
	case "public-read", "authenticated-read":
		return canned
	}
	return ""
}

// aclsDisabled reports whether ACLs are off for the bucket (ownership
// controls BucketOwnerEnforced): they then neither grant nor may be set.
func aclsDisabled(b *metadata.Bucket) bool { return b.Ownership == "BucketOwnerEnforced" }

// anonymousAllowed decides an anonymous request from the bucket record and,
// for object actions, the object's manifest (nil when there is none).
func anonymousAllowed(action string, b *metadata.Bucket, m *metadata.Manifest) bool {
	if aclsDisabled(b) {
		return false
	}
	switch action {
	case "s3:ListBucket":
		return b.ACL == "public-read"
	case "s3:GetObject":
		return m != nil && m.ACL == "public-read"
	}
	return false
}

// authorize lets the request through or refuses it. Signed requests pass
// (every key is an owner); anonymous ones need a grant.
func (g *Gateway) authorize(c *fiber.Ctx, req *request) error {
	if !req.anonymous {
		return nil
	}
	denied := apiErr("AccessDenied", "Access Denied")
	action, object := s3Action(req.method, req.bucket, req.key, req.query, c.Get("x-amz-copy-source") != "")
	if action == "" || req.bucket == "" {
		return denied
	}
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	var m *metadata.Manifest
	if object && action == "s3:GetObject" && !aclsDisabled(&b) {
		m, err = g.layer.readManifest(ctx, req.bucket, req.key)
		if err != nil && !errors.Is(err, errNotFound) {
			return err
		}
	}
	if !anonymousAllowed(action, &b, m) {
		return denied
	}
	return nil
}
