package gateway

import (
	"encoding/xml"
	"errors"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// validBucketName applies S3's naming rules for new buckets.
func validBucketName(name string) bool {
	if len(name) < 3 || len(name) > 63 {
		return false
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.'
		if !ok {
			return false
		}
		if (i == 0 || i == len(name)-1) && (r == '-' || r == '.') {
			return false
		}
	}
	if strings.Contains(name, "..") || strings.Contains(name, ".-") || strings.Contains(name, "-.") {
		return false
	}
	if net.ParseIP(name) != nil {
		return false
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	for _, s := range []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3"} {
		if strings.HasSuffix(name, s) {
			return false
		}
	}
	return true
}

func (g *Gateway) createBucket(c *fiber.Ctx, req *request) error {
	if !validBucketName(req.bucket) {
		return apiErr("InvalidBucketName", "The specified bucket is not valid.")
	}
	// NB: the whole body is read (within xmlBody's limit): stopping
	// short of its end would skip the x-amz-content-sha256 check, which
	// runs at EOF.
	body, err := g.xmlBody(c, req, bodyDigests)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		var conf CreateBucketConfiguration
		if err := xml.Unmarshal(body, &conf); err != nil {
			return apiErr("MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.")
		}
		if conf.LocationConstraint != "" && g.cfg.Region != "" && conf.LocationConstraint != g.cfg.Region {
			return apiErr("InvalidLocationConstraint", "The specified location-constraint is not valid for this endpoint ("+g.cfg.Region+").")
		}
	}
	acl, err := requestACL(c)
	if err != nil {
		return err
	}
	ownership := c.Get("x-amz-object-ownership")
	if ownership != "" && !slices.Contains(objectOwnerships, ownership) {
		return apiErr("InvalidArgument", "Invalid x-amz-object-ownership header: "+ownership)
	}
	if ownership == "BucketOwnerEnforced" && acl != "" {
		return apiErr("InvalidBucketAclWithObjectOwnership", "")
	}
	var lock bool
	switch strings.ToLower(c.Get(hdrBucketLock)) {
	case "":
	case "true":
		lock = true
	case "false":
	default:
		return apiErr("InvalidArgument", "x-amz-bucket-object-lock-enabled must be true or false")
	}
	ctx, cancel := g.opContext()
	defer cancel()
	if old, err := g.layer.bucket(ctx, g.buckets, req.bucket); err == nil {
		if !req.who.admin && !req.who.rights(&old).Owner {
			return apiErr("BucketAlreadyExists", "")
		}
		return apiErr("BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded and you already own it.")
	} else if !errors.Is(err, errNotFound) {
		return err
	}
	now := time.Now().UTC()
	b := &metadata.Bucket{Name: req.bucket, Created: now, Version: g.layer.clock.next(), ACL: acl, Ownership: ownership}
	if lock {
		// Object lock keeps versions, so it needs versioning, for good
		// (bucketVersioning refuses to suspend it).
		b.ObjectLock, b.Versioning = true, metadata.VersioningEnabled
	}
	if !req.who.configured {
		// A stored key owns what it creates (a configured key is an
		// administrator and needs no grant).
		b.Grants = map[string]metadata.Rights{req.who.accessKey: {Read: true, Write: true, Owner: true}}
	}
	if err := g.layer.putBucket(ctx, g.buckets, b); err != nil {
		return err
	}
	c.Set("Location", "/"+req.bucket)
	c.Status(fiber.StatusOK)
	return nil
}

func (g *Gateway) headBucket(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	if _, err := g.layer.bucket(ctx, g.buckets, req.bucket); err != nil {
		return bucketErr(err)
	}
	c.Set("x-amz-bucket-region", g.region())
	c.Status(fiber.StatusOK)
	return nil
}

func (g *Gateway) deleteBucket(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	// Under the record's lease, like every other change of an existing
	// bucket: a settings update that read the live record cannot land
	// after the tombstone and bring the bucket back.
	err := g.layer.updateBucket(ctx, g.buckets, req.bucket, func(b *metadata.Bucket) error {
		// NB: a versioned bucket is empty only without noncurrent
		// versions and delete markers too, as in S3: deleting it would
		// orphan them.
		res, err := g.layer.list(ctx, listParams{Bucket: req.bucket, Max: 1, Versions: b.Versioning != ""})
		if err != nil {
			return err
		}
		if len(res.Objects) > 0 {
			e := res.Objects[0]
			g.log.Info("delete bucket refused: not empty", "bucket", req.bucket, "key", e.Key, "version", e.Version.String())
			return apiErr("BucketNotEmpty", "The bucket you tried to delete is not empty.")
		}
		b.Deleted = true
		return nil
	})
	if err != nil {
		return bucketErr(err)
	}
	c.Status(fiber.StatusNoContent)
	return nil
}

func (g *Gateway) listBuckets(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	bs, err := g.layer.listBuckets(ctx, g.buckets)
	if err != nil {
		return err
	}
	out := ListBucketsOutput{Owner: g.owner(req)}
	for _, b := range bs {
		if !req.who.admin && !req.who.anyRights(&b) {
			continue // a key lists the buckets it has rights on
		}
		out.Buckets.Bucket = append(out.Buckets.Bucket, BucketEntry{Name: b.Name, CreationDate: ts(b.Created)})
	}
	return sendXML(c, fiber.StatusOK, out)
}

func (g *Gateway) bucketLocation(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	if _, err := g.layer.bucket(ctx, g.buckets, req.bucket); err != nil {
		return bucketErr(err)
	}
	loc := g.cfg.Region
	if loc == "us-east-1" {
		loc = "" // S3 reports the default region as an empty constraint
	}
	return sendXML(c, fiber.StatusOK, LocationConstraintOutput{Location: loc})
}

func (g *Gateway) region() string {
	if g.cfg.Region == "" {
		return "us-east-1"
	}
	return g.cfg.Region
}

func bucketErr(err error) error {
	if errors.Is(err, errNotFound) {
		return apiErr("NoSuchBucket", "The specified bucket does not exist")
	}
	return err
}
