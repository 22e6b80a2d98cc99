package gateway

import (
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// regen has no ACLs: whoever holds a key has full control. GET ?acl
// answers that (tools like s3cmd read the ACL before copying), and PUT
// ?acl accepts only what matches it.

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

// aclTarget checks that the bucket, and the key if the request names one,
// exist: an ACL is read or set on something.
func (g *Gateway) aclTarget(req *request) error {
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
	return nil
}

func (g *Gateway) getACL(c *fiber.Ctx, req *request) error {
	if err := g.aclTarget(req); err != nil {
		return err
	}
	owner := g.owner(req)
	return sendXML(c, fiber.StatusOK, AccessControlPolicy{Owner: owner, Grants: []Grant{{
		Grantee:    Grantee{XMLNSXSI: "http://www.w3.org/2001/XMLSchema-instance", Type: "CanonicalUser", ID: owner.ID, DisplayName: owner.DisplayName},
		Permission: "FULL_CONTROL",
	}}})
}

// aclInput is a PUT ?acl body: only what decides whether it asks for
// more than regen has (a grant to a group or an e-mail address, or a
// permission short of full control).
type aclInput struct {
	Grants []struct {
		URI        string `xml:"Grantee>URI"`
		Email      string `xml:"Grantee>EmailAddress"`
		Permission string `xml:"Permission"`
	} `xml:"AccessControlList>Grant"`
}

// ownerOnlyACLs are the canned ACLs that grant nothing beyond what every
// access key already has (regen has one owner, who owns every bucket).
var ownerOnlyACLs = []string{"private", "bucket-owner-full-control", "bucket-owner-read"}

// noGrants refuses a write whose x-amz-acl or x-amz-grant-* headers ask
// for access regen cannot give (public-read and the like): storing the
// object while the client believes it public would be a silent failure.
func noGrants(c *fiber.Ctx) error {
	if acl := c.Get("x-amz-acl"); acl != "" && !slices.Contains(ownerOnlyACLs, acl) {
		return apiErr("NotImplemented", fmt.Sprintf("regen has no ACLs: every access key has full control and nothing else can be granted; canned ACL %q is refused (%s are accepted)", acl, strings.Join(ownerOnlyACLs, ", ")))
	}
	if grant := headerWithPrefix(c, "x-amz-grant-"); grant != "" {
		return apiErr("NotImplemented", "regen has no ACLs: every access key has full control and nothing else can be granted ("+grant+")")
	}
	return nil
}

// putACL accepts what regen already has (the canned "private", or a body
// granting full control to canonical users) and refuses the rest: a
// client told that "public-read" or a grant took effect would believe
// something regen does not do (s3cmd setacl --acl-public said so).
func (g *Gateway) putACL(c *fiber.Ctx, req *request) error {
	if err := noGrants(c); err != nil {
		return err
	}
	if len(c.Body()) > 0 || c.Request().Header.ContentLength() > 0 {
		var in aclInput
		if err := DecodeXML(g.bodyReader(c, req, -1), &in); err != nil {
			return err
		}
		for _, gr := range in.Grants {
			if gr.URI != "" || gr.Email != "" || gr.Permission != "FULL_CONTROL" {
				return apiErr("NotImplemented", fmt.Sprintf("regen has no ACLs: every access key has full control and nothing else can be granted (%s to %s)", gr.Permission, gr.URI+gr.Email))
			}
		}
	}
	if err := g.aclTarget(req); err != nil {
		return err
	}
	c.Status(fiber.StatusOK)
	return nil
}
