package gateway

import (
	"encoding/xml"

	"github.com/gofiber/fiber/v2"
)

// VersioningConfiguration is the GetBucketVersioning response. regen keeps
// one version per key, so buckets are always unversioned: S3 then sends
// an empty configuration. Sync tools (rclone) ask before deleting.
type VersioningConfiguration struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ VersioningConfiguration"`
	Status  string   `xml:"Status,omitempty"`
}

func (g *Gateway) bucketVersioning(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	if _, err := g.layer.bucket(ctx, g.buckets, req.bucket); err != nil {
		return bucketErr(err)
	}
	return sendXML(c, fiber.StatusOK, VersioningConfiguration{})
}
