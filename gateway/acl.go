package gateway

import (
	"encoding/xml"
	"errors"

	"github.com/gofiber/fiber/v2"
)

// regen has no ACLs: whoever holds a key has full control. GET ?acl
// answers that (tools like s3cmd read the ACL before copying), and PUT
// ?acl accepts only the canned "private" that matches it.

// AccessControlPolicy is the GetObjectAcl / GetBucketAcl response.
type AccessControlPolicy struct {
	XMLName xml.Name       `xml:"http://s3.amazonaws.com/doc/2006-03-01/ AccessControlPolicy"`
	Owner   *CanonicalUser `xml:"Owner"`
	Grants  []Grant        `xml:"AccessControlList>Grant"`
}

// Grant is one grant of an ACL.
type Grant struct {
	Grantee    Grantee `xml:"Grantee"`
	Permission string  `xml:"Permission"`
}

// Grantee is a grant's canonical user.
type Grantee struct {
	XMLNSXSI    string `xml:"xmlns:xsi,attr"`
	Type        string `xml:"xsi:type,attr"`
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName,omitempty"`
}

func (g *Gateway) getACL(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	if _, err := g.layer.bucket(ctx, g.buckets, req.bucket); err != nil {
		return bucketErr(err)
	}
	if req.key != "" {
		if _, err := g.layer.readManifest(ctx, req.bucket, req.key); errors.Is(err, errNotFound) {
			return apiErr("NoSuchKey", "The specified key does not exist.")
		} else if err != nil {
			return err
		}
	}
	owner := g.owner(req)
	return sendXML(c, fiber.StatusOK, AccessControlPolicy{Owner: owner, Grants: []Grant{{
		Grantee:    Grantee{XMLNSXSI: "http://www.w3.org/2001/XMLSchema-instance", Type: "CanonicalUser", ID: owner.ID, DisplayName: owner.DisplayName},
		Permission: "FULL_CONTROL",
	}}})
}

func (g *Gateway) putACL(c *fiber.Ctx, req *request) error {
	if acl := c.Get("x-amz-acl"); acl != "" && acl != "private" {
		return apiErr("NotImplemented", "regen has no ACLs; only the canned ACL private is accepted")
	}
	c.Status(fiber.StatusOK)
	return nil
}
