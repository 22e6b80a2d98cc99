package gateway

import (
	"encoding/xml"
	"fmt"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// ACLs: access keys get their rights from the bucket record (read, write,
// owner; access.go), so what an ACL can add is a grant to everyone
// (public-read) or to every caller with a valid key (authenticated-read).
// Buckets and objects keep their canned ACL; requests without the right
// are decided from it (access.go), and GET ?acl reports it as grants.

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

// Grantee is a grant's canonical user or group.
type Grantee struct {
	XMLNSXSI    string `xml:"xmlns:xsi,attr"`
	Type        string `xml:"xsi:type,attr"`
	ID          string `xml:"ID,omitempty"`
	DisplayName string `xml:"DisplayName,omitempty"`
	URI         string `xml:"URI,omitempty"`
}

// The groups S3's ACLs grant to.
const (
	allUsersURI  = "http://acs.amazonaws.com/groups/global/AllUsers"
	authUsersURI = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
	xsiNamespace = "http://www.w3.org/2001/XMLSchema-instance"
)

// requestACL reads the canned ACL a write asks for (x-amz-acl) and returns
// it as stored (storedACL). Grants regen cannot enforce are refused:
// storing the object while the client believes it writable by anyone
// would be a silent failure.
func requestACL(c *fiber.Ctx) (string, error) {
	if grant := headerWithPrefix(c, "x-amz-grant-"); grant != "" {
		return "", apiErr("NotImplemented", "regen takes canned ACLs (x-amz-acl: "+strings.Join(cannedACLs, ", ")+") but no x-amz-grant-* headers ("+grant+")")
	}
	acl := c.Get("x-amz-acl")
	switch {
	case acl == "" || slices.Contains(cannedACLs, acl):
		return storedACL(acl), nil
	case acl == "public-read-write":
		return "", apiErr("NotImplemented", "regen does not let anonymous callers write: canned ACL public-read-write is refused (accepted: "+strings.Join(cannedACLs, ", ")+")")
	case acl == "aws-exec-read" || acl == "log-delivery-write":
		return "", apiErr("NotImplemented", fmt.Sprintf("regen has no %s canned ACL (accepted: %s)", acl, strings.Join(cannedACLs, ", ")))
	}
	return "", apiErr("InvalidArgument", fmt.Sprintf("unknown canned ACL %q", acl))
}

// checkACLAllowed refuses an ACL grant on a bucket whose ownership
// controls disable ACLs, as S3 does.
func checkACLAllowed(b *metadata.Bucket, acl string) error {
	if acl != "" && aclsDisabled(b) {
		return apiErr("AccessControlListNotSupported", "The bucket does not allow ACLs (its object ownership is BucketOwnerEnforced)")
	}
	return nil
}

// grantsOf turns a stored canned ACL into the grants S3 reports for it.
func grantsOf(owner *CanonicalUser, acl string) []Grant {
	grants := []Grant{{
		Grantee:    Grantee{XMLNSXSI: xsiNamespace, Type: "CanonicalUser", ID: owner.ID, DisplayName: owner.DisplayName},
		Permission: "FULL_CONTROL",
	}}
	switch acl {
	case "public-read":
		grants = append(grants, Grant{Grantee: Grantee{XMLNSXSI: xsiNamespace, Type: "Group", URI: allUsersURI}, Permission: "READ"})
	case "authenticated-read":
		grants = append(grants, Grant{Grantee: Grantee{XMLNSXSI: xsiNamespace, Type: "Group", URI: authUsersURI}, Permission: "READ"})
	}
	return grants
}

// getACL reports a bucket's ACL, or that of the object version the
// request names (its versionId, else the current version).
func (g *Gateway) getACL(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	acl := b.ACL
	if req.key != "" {
		// The ACL of the version the request names (its versionId, else
		// the current version).
		m, _, err := g.namedVersion(ctx, req, &b)
		if err != nil {
			return err
		}
		setVersionHeader(c, b.Versioning, m)
		acl = m.ACL
	}
	if aclsDisabled(&b) {
		acl = ""
	}
	owner := g.owner(req)
	return sendXML(c, fiber.StatusOK, AccessControlPolicy{Owner: owner, Grants: grantsOf(owner, acl)})
}

// aclInput is a PUT ?acl body: the grants, to be matched to a canned ACL.
type aclInput struct {
	Grants []struct {
		URI        string `xml:"Grantee>URI"`
		Email      string `xml:"Grantee>EmailAddress"`
		Permission string `xml:"Permission"`
	} `xml:"AccessControlList>Grant"`
}

// cannedOf matches an ACL body to the canned ACL it amounts to: full
// control for canonical users (regen's owners) plus, optionally, READ for
// all users or for authenticated users. Anything else cannot be enforced
// and is refused.
func (in *aclInput) cannedOf() (string, error) {
	acl := ""
	for _, gr := range in.Grants {
		switch {
		case gr.URI == "" && gr.Email == "" && gr.Permission == "FULL_CONTROL":
		case gr.URI == allUsersURI && gr.Permission == "READ" && acl != "authenticated-read":
			acl = "public-read"
		case gr.URI == authUsersURI && gr.Permission == "READ" && acl != "public-read":
			acl = "authenticated-read"
		default:
			return "", apiErr("NotImplemented", fmt.Sprintf("regen cannot enforce this grant (%s to %s): it takes full control for access keys, READ for all users (public-read) or for authenticated users (authenticated-read)", gr.Permission, gr.URI+gr.Email))
		}
	}
	return acl, nil
}

// putACL sets a bucket's ACL, or that of the object version the request
// names (its versionId, else the current version), from x-amz-acl or from
// an AccessControlPolicy body.
func (g *Gateway) putACL(c *fiber.Ctx, req *request) error {
	acl, err := requestACL(c)
	if err != nil {
		return err
	}
	// NB: the body is read (bounded, checked) even when x-amz-acl says
	// it all, so its payload hash and digests are verified.
	body, err := g.xmlBody(c, req, bodyDigests)
	if err != nil {
		return err
	}
	if c.Get("x-amz-acl") == "" && body != nil {
		var in aclInput
		if err := parseXML(body, &in); err != nil {
			return err
		}
		if acl, err = in.cannedOf(); err != nil {
			return err
		}
	}
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	if err := checkACLAllowed(&b, acl); err != nil {
		return err
	}
	if req.key == "" {
		err = g.layer.updateBucket(ctx, g.buckets, req.bucket, func(b *metadata.Bucket) error {
			if err := checkACLAllowed(b, acl); err != nil {
				return err
			}
			b.ACL = acl
			return nil
		})
		if err != nil {
			return bucketErr(err)
		}
	} else {
		m, err := g.updateNamed(ctx, req, &b, func(m *metadata.Manifest) error {
			m.ACL = acl
			return nil
		})
		if err != nil {
			return err
		}
		setVersionHeader(c, b.Versioning, m)
	}
	c.Status(fiber.StatusOK)
	return nil
}
