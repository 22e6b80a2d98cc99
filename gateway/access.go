package gateway

import (
	"errors"
	"net/url"
	"slices"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/s3policy"
	"github.com/regen-s3/regen/metadata"
)

// Who may do what. Every access key has full control of every bucket
// (regen has one owner), unless the bucket's policy explicitly denies it.
// A request without any signature is anonymous: it is allowed exactly
// where the bucket's policy allows it or a canned ACL (public-read on the
// bucket for listing, on the object for reading) grants it, and refused
// with AccessDenied everywhere else, and wherever the policy denies it.

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
	return "", false // POST ?delete: decided per key (keyAllowed)
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

// policyAdmin are the actions a bucket policy cannot deny to an access
// key: the owner must always be able to read and replace a policy that
// locks it out, as S3's account root can.
var policyAdmin = []string{"s3:GetBucketPolicy", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"}

// policyRequest describes the request to a policy: its action, the ARN of
// its bucket or object, and the condition keys regen fills in.
func policyRequest(c *fiber.Ctx, req *request, action, key string, object bool) s3policy.Request {
	resource := "arn:aws:s3:::" + req.bucket
	if object {
		resource += "/" + key
	}
	ctxKeys := map[string]string{
		"aws:securetransport": strconv.FormatBool(c.Context().IsTLS()),
		"aws:sourceip":        c.Context().RemoteIP().String(),
	}
	if v := c.Get("Referer"); v != "" {
		ctxKeys["aws:referer"] = v
	}
	if v := c.Get("User-Agent"); v != "" {
		ctxKeys["aws:useragent"] = v
	}
	if !object {
		for _, k := range []string{"prefix", "delimiter"} {
			if req.query.Has(k) {
				ctxKeys["s3:"+k] = req.query.Get(k)
			}
		}
	}
	return s3policy.Request{Action: action, Resource: resource, Context: ctxKeys}
}

// policyDecision evaluates the bucket's policy, if it has one. A stored
// policy this gateway cannot parse (put through a newer version) denies
// anonymous callers and nobody else.
func (g *Gateway) policyDecision(c *fiber.Ctx, req *request, b *metadata.Bucket, action, key string, object bool) s3policy.Decision {
	if b.Policy == "" || action == "" {
		return s3policy.NoMatch
	}
	p, err := g.policies.get(b)
	if err != nil {
		g.log.Warn("bucket policy cannot be evaluated", "bucket", b.Name, "err", err)
		if req.anonymous {
			return s3policy.Deny
		}
		return s3policy.NoMatch
	}
	return p.Evaluate(policyRequest(c, req, action, key, object))
}

// authorize lets the request through or refuses it with AccessDenied.
// A signed request (every key is an owner) is refused only by an explicit
// Deny of the bucket's policy; an anonymous one needs an Allow of the
// policy or a canned ACL's grant, and no Deny.
func (g *Gateway) authorize(c *fiber.Ctx, req *request) error {
	denied := apiErr("AccessDenied", "Access Denied")
	if req.bucket == "" {
		if req.anonymous {
			return denied
		}
		return nil
	}
	action, object := s3Action(req.method, req.bucket, req.key, req.query, c.Get("x-amz-copy-source") != "")
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		if req.anonymous {
			return bucketErr(err)
		}
		return nil // the operation reports it (CreateBucket needs no bucket)
	}
	if req.method == fiber.MethodPost && req.query.Has("delete") {
		return nil // DeleteObjects: decided per key (keyAllowed)
	}
	decision := g.policyDecision(c, req, &b, action, req.key, object)
	if !req.anonymous {
		if decision == s3policy.Deny && !slices.Contains(policyAdmin, action) {
			return denied
		}
		return nil
	}
	switch {
	case action == "" || decision == s3policy.Deny:
		return denied
	case decision == s3policy.Allow:
		return nil
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

// keyAllowed decides one key of a DeleteObjects request as authorize
// decides a DeleteObject.
func (g *Gateway) keyAllowed(c *fiber.Ctx, req *request, b *metadata.Bucket, key string) error {
	d := g.policyDecision(c, req, b, "s3:DeleteObject", key, true)
	if d == s3policy.Deny || (req.anonymous && d != s3policy.Allow) {
		return apiErr("AccessDenied", "Access Denied")
	}
	return nil
}
