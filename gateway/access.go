package gateway

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/s3policy"
	"github.com/regen-s3/regen/metadata"
)

// Who may do what. A signed request is allowed when its key is an
// administrator (a configured key, or a stored one with the admin flag) or
// holds the bucket right the action needs (rightFor: read, write or
// owner, from the bucket record's grants), and the bucket's policy does
// not explicitly deny it. A right on a prefix of the bucket counts for
// the objects whose keys begin with it and for listings whose prefix
// begins with it (a listing outside it could show other keys), never for
// the bucket's configuration. A caller without the right, signed or not,
// is allowed exactly where the bucket's policy allows the action to it
// (Principal "*", or its access key ID) or a canned ACL grants it
// (public-read to everyone, authenticated-read to every key), and
// refused with AccessDenied everywhere else. An explicit Deny of the
// policy wins over every right, except that the bucket's owners may
// always read and replace the policy itself.

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
			{"retention", "s3:GetObjectRetention", "s3:PutObjectRetention", ""},
			{"legal-hold", "s3:GetObjectLegalHold", "s3:PutObjectLegalHold", ""},
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
		case get && q.Has("versionId"):
			return "s3:GetObjectVersion", true
		case del && q.Has("versionId"):
			// NB: removes a version for good, which S3 grants apart
			// from DeleteObject (a delete marker).
			return "s3:DeleteObjectVersion", true
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
		{"lifecycle", "s3:GetLifecycleConfiguration", "s3:PutLifecycleConfiguration", "s3:PutLifecycleConfiguration"},
		{"tagging", "s3:GetBucketTagging", "s3:PutBucketTagging", "s3:PutBucketTagging"},
		{"ownershipControls", "s3:GetBucketOwnershipControls", "s3:PutBucketOwnershipControls", "s3:PutBucketOwnershipControls"},
		{"encryption", "s3:GetEncryptionConfiguration", "s3:PutEncryptionConfiguration", "s3:PutEncryptionConfiguration"},
		{"versioning", "s3:GetBucketVersioning", "s3:PutBucketVersioning", ""},
		{"object-lock", "s3:GetBucketObjectLockConfiguration", "s3:PutBucketObjectLockConfiguration", ""},
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
// to every holder of an access key, whatever its rights on the bucket.
var cannedACLs = []string{"private", "public-read", "authenticated-read", "bucket-owner-full-control", "bucket-owner-read"}

// storedACL is how a canned ACL is recorded: "" for the ones that grant
// nothing beyond the owners' rights.
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

// aclAllows decides what the canned ACLs grant: listing the bucket
// (the bucket's ACL) or reading an object (the object's ACL; m is its
// manifest, nil when there is none), to everyone (public-read) or to
// every signed caller (authenticated-read).
func aclAllows(action string, signed bool, b *metadata.Bucket, m *metadata.Manifest) bool {
	if aclsDisabled(b) {
		return false
	}
	grants := func(acl string) bool { return acl == "public-read" || signed && acl == "authenticated-read" }
	switch action {
	case "s3:ListBucket":
		return grants(b.ACL)
	case "s3:GetObject", "s3:GetObjectVersion":
		return m != nil && grants(m.ACL)
	}
	return false
}

// need is the bucket right an action needs.
type need int

const (
	// needAny: any right on the bucket will do. For what tells no more
	// than that the bucket exists (HeadBucket, GetBucketLocation), so
	// that a write-only key's client can check its bucket.
	needAny need = iota
	needRead
	needWrite
	needOwner
	// needAdmin: no bucket right grants it (an action regen does not
	// know).
	needAdmin
)

func (n need) String() string {
	return [...]string{"any", "read", "write", "owner", "admin"}[n]
}

// has reports whether r grants n.
func has(r metadata.Rights, n need) bool {
	switch n {
	case needAny:
		return r.Any()
	case needRead:
		return r.Read
	case needWrite:
		return r.Write
	case needOwner:
		return r.Owner
	}
	return false
}

// actionNeeds maps every action s3Action names in a bucket to the right
// it needs. Reading an object's ACL is reading; changing it publishes
// the object, which is the owner's call, as is all bucket configuration.
var actionNeeds = map[string]need{
	"s3:GetObject":                  needRead,
	"s3:GetObjectVersion":           needRead,
	"s3:DeleteObjectVersion":        needWrite,
	"s3:GetObjectTagging":           needRead,
	"s3:GetObjectAttributes":        needRead,
	"s3:GetObjectAcl":               needRead,
	"s3:ListBucket":                 needRead,
	"s3:ListBucketVersions":         needRead,
	"s3:GetBucketVersioning":        needRead,
	"s3:GetBucketLocation":          needAny,
	"s3:PutObject":                  needWrite,
	"s3:DeleteObject":               needWrite,
	"s3:PutObjectTagging":           needWrite,
	"s3:DeleteObjectTagging":        needWrite,
	"s3:AbortMultipartUpload":       needWrite,
	"s3:ListMultipartUploadParts":   needWrite,
	"s3:ListBucketMultipartUploads": needWrite,
	"s3:PutObjectAcl":               needOwner,
	"s3:GetBucketAcl":               needOwner,
	"s3:PutBucketAcl":               needOwner,
	"s3:GetBucketPolicy":            needOwner,
	"s3:PutBucketPolicy":            needOwner,
	"s3:DeleteBucketPolicy":         needOwner,
	"s3:GetBucketPolicyStatus":      needOwner,
	"s3:GetBucketCORS":              needOwner,
	"s3:PutBucketCORS":              needOwner,
	"s3:GetLifecycleConfiguration":  needOwner,
	"s3:PutLifecycleConfiguration":  needOwner,
	"s3:GetBucketTagging":           needOwner,
	"s3:PutBucketTagging":           needOwner,
	"s3:GetBucketOwnershipControls": needOwner,
	"s3:PutBucketOwnershipControls": needOwner,
	"s3:GetEncryptionConfiguration": needOwner,
	"s3:PutEncryptionConfiguration": needOwner,
	"s3:PutBucketVersioning":        needOwner,
	// NB: extending a retention is a writer's call; shortening one needs
	// the bypass, which is the owner's (bypassAllowed). Releasing a
	// legal hold makes a version deletable, so holds are the owner's.
	"s3:GetObjectRetention":               needRead,
	"s3:GetObjectLegalHold":               needRead,
	"s3:PutObjectRetention":               needWrite,
	"s3:PutObjectLegalHold":               needOwner,
	"s3:GetBucketObjectLockConfiguration": needRead,
	"s3:PutBucketObjectLockConfiguration": needOwner,
	"s3:DeleteBucket":                     needOwner,
}

// rightFor returns the right a request needs in its bucket. A write that
// sets a canned ACL granting more than the owners have (public-read,
// authenticated-read) publishes the object: that needs owner.
func rightFor(method, key, action, cannedACL string) need {
	if method == fiber.MethodHead && key == "" {
		return needAny // HeadBucket
	}
	n, ok := actionNeeds[action]
	if !ok {
		return needAdmin
	}
	if n == needWrite && action == "s3:PutObject" && storedACL(cannedACL) != "" {
		return needOwner
	}
	return n
}

// decision is what decides one action of one caller in one bucket.
type decision struct {
	anonymous bool
	admin     bool
	// rights are the caller's rights where the action acts: on the
	// object's key, on the listing's prefix, else on the whole bucket.
	rights metadata.Rights
	// someRight: the caller has a right on the bucket or on a prefix of
	// it, which is enough for needAny.
	someRight bool
	need      need
	policy    s3policy.Decision
	// policyAdmin: the action reads or replaces the bucket policy, which
	// the policy cannot deny to the bucket's owners (policyAdmin).
	policyAdmin bool
	// acl: a canned ACL grants the action to this caller (aclAllows).
	acl bool
}

// allowed applies the rules at the top of this file.
func (d decision) allowed() bool {
	owner := !d.anonymous && (d.admin || d.rights.Owner)
	if d.policy == s3policy.Deny && !(d.policyAdmin && owner) {
		return false
	}
	if !d.anonymous && (d.admin || has(d.rights, d.need) || d.need == needAny && d.someRight) {
		return true
	}
	return d.policy == s3policy.Allow || d.acl
}

// listingActions are the bucket actions that list keys: a right on a
// prefix covers the listings whose prefix parameter begins with it.
var listingActions = []string{"s3:ListBucket", "s3:ListBucketVersions", "s3:ListBucketMultipartUploads"}

// scopedRights returns the caller's rights where action acts: on key for
// an object action, on the listing's prefix for a listing, on the whole
// bucket for everything else.
func scopedRights(req *request, b *metadata.Bucket, action, key string, object bool) metadata.Rights {
	switch {
	case object:
		return req.who.rightsOn(b, key)
	case slices.Contains(listingActions, action):
		return req.who.rightsOn(b, req.query.Get("prefix"))
	}
	return req.who.rights(b)
}

// policyAdmin are the actions a bucket policy cannot deny to the bucket's
// owners: they must always be able to read and replace a policy that
// locks them out, as S3's account root can.
var policyAdmin = []string{"s3:GetBucketPolicy", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"}

// policyRequest describes the request to a policy: its action, the ARN of
// bucket or of its object key, and the condition keys regen fills in.
func policyRequest(c *fiber.Ctx, req *request, bucket, action, key string, object bool) s3policy.Request {
	resource := "arn:aws:s3:::" + bucket
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
	r := s3policy.Request{Action: action, Resource: resource, Context: ctxKeys}
	if !req.anonymous {
		r.Principal = req.who.accessKey
	}
	return r
}

// policyDecision evaluates the policy of bucket b, if it has one. A
// stored policy this gateway cannot parse (put through a newer version)
// denies every caller but an administrator: it may hold a Deny.
func (g *Gateway) policyDecision(c *fiber.Ctx, req *request, b *metadata.Bucket, action, key string, object bool) s3policy.Decision {
	if b.Policy == "" || action == "" {
		return s3policy.NoMatch
	}
	p, err := g.policies.get(b)
	if err != nil {
		g.log.Warn("bucket policy cannot be evaluated", "bucket", b.Name, "err", err)
		if req.anonymous || !req.who.admin {
			return s3policy.Deny
		}
		return s3policy.NoMatch
	}
	return p.Evaluate(policyRequest(c, req, b.Name, action, key, object))
}

// allowedOn decides action (on key, when object) in bucket b for the
// request's caller, needing right n.
func (g *Gateway) allowedOn(ctx context.Context, c *fiber.Ctx, req *request, b *metadata.Bucket, action, key string, object bool, n need) (bool, error) {
	d := decision{
		anonymous:   req.anonymous,
		admin:       req.who.admin,
		rights:      scopedRights(req, b, action, key, object),
		someRight:   req.who.anyRights(b),
		need:        n,
		policy:      g.policyDecision(c, req, b, action, key, object),
		policyAdmin: slices.Contains(policyAdmin, action),
	}
	if d.allowed() || d.policy == s3policy.Deny {
		return d.allowed(), nil
	}
	// Only now, when nothing else allows it, read what an ACL grants:
	// an object's ACL is in its manifest.
	var m *metadata.Manifest
	if object && (action == "s3:GetObject" || action == "s3:GetObjectVersion") && !aclsDisabled(b) {
		var err error
		m, err = g.aclVersion(ctx, req, b, key, action)
		if err != nil && !errors.Is(err, errNotFound) {
			return false, err
		}
	}
	d.acl = aclAllows(action, !req.anonymous, b, m)
	return d.allowed(), nil
}

// aclVersion reads the manifest whose ACL decides a read of key: for
// s3:GetObjectVersion the version the request names (each version has
// its own ACL, as in S3), else the current version. A version ID that
// does not parse grants nothing (the operation refuses it after).
func (g *Gateway) aclVersion(ctx context.Context, req *request, b *metadata.Bucket, key, action string) (*metadata.Manifest, error) {
	if action == "s3:GetObjectVersion" {
		id, byID, err := versionIDParam(req, b.Versioning)
		if err != nil {
			return nil, errNotFound
		}
		if byID {
			return g.readVersion(ctx, b.Name, key, id, true)
		}
	}
	return g.layer.readManifest(ctx, b.Name, key)
}

// authorize lets the request through or refuses it with AccessDenied
// (the rules at the top of this file).
func (g *Gateway) authorize(c *fiber.Ctx, req *request) error {
	denied := apiErr("AccessDenied", "Access Denied")
	if req.bucket == "" {
		if req.anonymous {
			return denied
		}
		return nil // ListBuckets lists the caller's buckets
	}
	copying := c.Get("x-amz-copy-source") != ""
	action, object := s3Action(req.method, req.bucket, req.key, req.query, copying)
	if action == "s3:CreateBucket" && !req.anonymous {
		if req.who.createBuckets {
			return nil // it becomes the bucket's owner
		}
		return denied
	}
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		if req.anonymous || !req.who.admin {
			return bucketErr(err)
		}
		return nil // the operation reports it
	}
	if req.method == fiber.MethodPost && req.query.Has("delete") {
		return nil // DeleteObjects: decided per key (keyAllowed)
	}
	if copying && object {
		if req.anonymous {
			return denied // a copy reads another object too
		}
		if err := g.authorizeCopySource(ctx, c, req); err != nil {
			return err
		}
		action = "s3:PutObject"
	}
	n := rightFor(req.method, req.key, action, c.Get("x-amz-acl"))
	ok, err := g.allowedOn(ctx, c, req, &b, action, req.key, object, n)
	if !ok && err == nil && !req.anonymous && g.buckets.age() > keyRetry {
		// A right granted through another gateway within the cache's
		// TTL is not in our cached record: look once more before
		// refusing (at most every keyRetry, so refused requests cannot
		// make every one a read of all servers).
		g.buckets.invalidate()
		if b, err = g.layer.bucket(ctx, g.buckets, req.bucket); err != nil {
			return bucketErr(err)
		}
		ok, err = g.allowedOn(ctx, c, req, &b, action, req.key, object, n)
	}
	if err != nil {
		return err
	}
	if !ok {
		return denied
	}
	return nil
}

// authorizeCopySource decides the read of a copy's source object
// (CopyObject, UploadPartCopy) as a GetObject of it.
func (g *Gateway) authorizeCopySource(ctx context.Context, c *fiber.Ctx, req *request) error {
	bucket, key, _, err := copySource(c)
	if err != nil {
		return err
	}
	b, err := g.layer.bucket(ctx, g.buckets, bucket)
	if err != nil {
		return bucketErr(err)
	}
	ok, err := g.allowedOn(ctx, c, req, &b, "s3:GetObject", key, true, needRead)
	if err != nil {
		return err
	}
	if !ok {
		return apiErr("AccessDenied", "Access Denied (reading the copy source "+bucket+"/"+key+")")
	}
	return nil
}

// keyAllowed decides one key of a DeleteObjects request as authorize
// decides a DeleteObject.
func (g *Gateway) keyAllowed(c *fiber.Ctx, req *request, b *metadata.Bucket, key string) error {
	return g.keyActionAllowed(c, req, b, key, "s3:DeleteObject")
}

// keyActionAllowed is keyAllowed for action (s3:DeleteObjectVersion for
// a key given with its version ID).
func (g *Gateway) keyActionAllowed(c *fiber.Ctx, req *request, b *metadata.Bucket, key, action string) error {
	ctx, cancel := g.opContext()
	defer cancel()
	ok, err := g.allowedOn(ctx, c, req, b, action, key, true, needWrite)
	if err != nil {
		return err
	}
	if !ok {
		return apiErr("AccessDenied", "Access Denied")
	}
	return nil
}
