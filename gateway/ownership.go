package gateway

import (
	"slices"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// Object ownership controls. regen has one owner, so every object belongs
// to the bucket owner whatever the setting; what the setting changes is
// whether ACLs count: BucketOwnerEnforced disables them (no ACL can be set,
// and stored ones grant nothing), as in S3. A bucket without controls
// answers OwnershipControlsNotFoundError, as S3 does for buckets created
// before controls existed.

// objectOwnerships are the values S3 accepts.
var objectOwnerships = []string{"BucketOwnerEnforced", "BucketOwnerPreferred", "ObjectWriter"}

// ownershipControlsInput is the PutBucketOwnershipControls body, matched
// by local name.
type ownershipControlsInput struct {
	Rules []struct {
		ObjectOwnership string `xml:"ObjectOwnership"`
	} `xml:"Rule"`
}

func (g *Gateway) bucketOwnership(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	switch req.method {
	case fiber.MethodGet:
		b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
		if err != nil {
			return bucketErr(err)
		}
		if b.Ownership == "" {
			return apiErr("OwnershipControlsNotFoundError", "")
		}
		out := OwnershipControls{}
		out.Rules = append(out.Rules, struct {
			ObjectOwnership string `xml:"ObjectOwnership"`
		}{b.Ownership})
		return sendXML(c, fiber.StatusOK, out)
	case fiber.MethodPut:
		var in ownershipControlsInput
		if err := g.decodeXMLBody(c, req, &in); err != nil {
			return err
		}
		if len(in.Rules) != 1 {
			return apiErr("MalformedXML", "OwnershipControls must hold exactly one Rule")
		}
		want := in.Rules[0].ObjectOwnership
		if !slices.Contains(objectOwnerships, want) {
			return apiErr("MalformedXML", "ObjectOwnership must be one of BucketOwnerEnforced, BucketOwnerPreferred, ObjectWriter")
		}
		// Not setBucketConfig: the check against the ACL must see the
		// record the update changes, so it runs inside updateBucket.
		err := g.layer.updateBucket(ctx, g.buckets, req.bucket, func(b *metadata.Bucket) error {
			if want == "BucketOwnerEnforced" && b.ACL != "" {
				return apiErr("InvalidBucketAclWithObjectOwnership", "The bucket's ACL grants access ("+b.ACL+"); set it to private before enforcing bucket owner ownership")
			}
			b.Ownership = want
			return nil
		})
		if err != nil {
			return bucketErr(err)
		}
		c.Status(fiber.StatusOK)
		return nil
	case fiber.MethodDelete:
		return g.setBucketConfig(c, req, fiber.StatusNoContent, func(b *metadata.Bucket) { b.Ownership = "" })
	}
	return apiErr("MethodNotAllowed", "")
}
