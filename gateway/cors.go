package gateway

import (
	"encoding/xml"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// CORS as S3 does it: a bucket's rules answer browsers' preflight OPTIONS
// requests (without authentication), and every response to a request with
// an Origin that a rule allows, errors included, carries the
// Access-Control-* headers of the first such rule.

// maxCORSRules is S3's limit of rules per configuration.
const maxCORSRules = 100

// corsMethods are the methods a CORS rule may allow.
var corsMethods = []string{"GET", "PUT", "POST", "DELETE", "HEAD"}

// CORSConfiguration is the PutBucketCors body and GetBucketCors response.
type CORSConfiguration struct {
	XMLName xml.Name  `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CORSConfiguration"`
	Rules   []CORSXML `xml:"CORSRule"`
}

// CORSXML is one CORSRule element.
type CORSXML struct {
	ID             string   `xml:"ID,omitempty"`
	AllowedHeaders []string `xml:"AllowedHeader"`
	AllowedMethods []string `xml:"AllowedMethod"`
	AllowedOrigins []string `xml:"AllowedOrigin"`
	ExposeHeaders  []string `xml:"ExposeHeader"`
	MaxAgeSeconds  *int     `xml:"MaxAgeSeconds,omitempty"`
}

// corsInput is the PutBucketCors body as clients send it.
type corsInput struct {
	XMLName xml.Name  `xml:"CORSConfiguration"`
	Rules   []CORSXML `xml:"CORSRule"`
}

// corsRules checks a configuration as S3 does and returns its rules.
func corsRules(in *corsInput) ([]metadata.CORSRule, error) {
	if len(in.Rules) == 0 || len(in.Rules) > maxCORSRules {
		return nil, apiErr("MalformedXML", fmt.Sprintf("A CORS configuration holds 1 to %d CORSRule elements", maxCORSRules))
	}
	out := make([]metadata.CORSRule, 0, len(in.Rules))
	for _, r := range in.Rules {
		if len(r.AllowedOrigins) == 0 || len(r.AllowedMethods) == 0 {
			return nil, apiErr("MalformedXML", "Every CORSRule needs at least one AllowedOrigin and one AllowedMethod")
		}
		for _, m := range r.AllowedMethods {
			if !slices.Contains(corsMethods, m) {
				return nil, apiErr("InvalidRequest", "Found unsupported HTTP method in CORS config. Unsupported method is "+m)
			}
		}
		for _, o := range r.AllowedOrigins {
			if strings.Count(o, "*") > 1 {
				return nil, apiErr("InvalidRequest", `AllowedOrigin "`+o+`" can not have more than one wildcard.`)
			}
		}
		for _, h := range r.AllowedHeaders {
			if strings.Count(h, "*") > 1 {
				return nil, apiErr("InvalidRequest", `AllowedHeader "`+h+`" can not have more than one wildcard.`)
			}
		}
		if r.MaxAgeSeconds != nil && *r.MaxAgeSeconds < 0 {
			return nil, apiErr("MalformedXML", "MaxAgeSeconds must not be negative")
		}
		out = append(out, metadata.CORSRule{
			ID: r.ID, AllowedOrigins: r.AllowedOrigins, AllowedMethods: r.AllowedMethods,
			AllowedHeaders: r.AllowedHeaders, ExposeHeaders: r.ExposeHeaders, MaxAgeSeconds: r.MaxAgeSeconds,
		})
	}
	return out, nil
}

// wildcardMatch matches s against a pattern with at most one '*'.
// foldCase compares without case (header names).
func wildcardMatch(pattern, s string, foldCase bool) bool {
	if foldCase {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	pre, post, wild := strings.Cut(pattern, "*")
	if !wild {
		return pattern == s
	}
	return len(s) >= len(pre)+len(post) && strings.HasPrefix(s, pre) && strings.HasSuffix(s, post)
}

// matchCORS returns the first rule allowing origin, method and every
// header in headers (the preflight's Access-Control-Request-Headers; nil
// for an actual request), or nil.
func matchCORS(rules []metadata.CORSRule, origin, method string, headers []string) *metadata.CORSRule {
	for i := range rules {
		r := &rules[i]
		if !slices.Contains(r.AllowedMethods, method) {
			continue
		}
		if !slices.ContainsFunc(r.AllowedOrigins, func(p string) bool { return wildcardMatch(p, origin, false) }) {
			continue
		}
		allHeaders := true
		for _, h := range headers {
			if !slices.ContainsFunc(r.AllowedHeaders, func(p string) bool { return wildcardMatch(p, h, true) }) {
				allHeaders = false
				break
			}
		}
		if allHeaders {
			return r
		}
	}
	return nil
}

// requestedHeaders splits Access-Control-Request-Headers.
func requestedHeaders(h string) []string {
	var out []string
	for _, f := range strings.Split(h, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, strings.ToLower(f))
		}
	}
	return out
}

// setCORSHeaders sends the Access-Control-* headers of rule r for origin.
// A rule allowing every origin answers "*"; any other echoes the origin
// and allows credentials, as S3 does.
func setCORSHeaders(c *fiber.Ctx, r *metadata.CORSRule, origin string) {
	if slices.Contains(r.AllowedOrigins, "*") {
		c.Set("Access-Control-Allow-Origin", "*")
	} else {
		c.Set("Access-Control-Allow-Origin", origin)
		c.Set("Access-Control-Allow-Credentials", "true")
	}
	c.Set("Access-Control-Allow-Methods", strings.Join(r.AllowedMethods, ", "))
	if len(r.ExposeHeaders) > 0 {
		c.Set("Access-Control-Expose-Headers", strings.Join(r.ExposeHeaders, ", "))
	}
	if r.MaxAgeSeconds != nil {
		c.Set("Access-Control-Max-Age", strconv.Itoa(*r.MaxAgeSeconds))
	}
}

// corsVary tells caches that the answer depends on the CORS request
// headers, whenever the bucket has CORS rules.
func corsVary(c *fiber.Ctx) {
	c.Set("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
}

// preflight answers an OPTIONS request from the bucket's rules. It needs
// no signature: browsers send none.
func (g *Gateway) preflight(c *fiber.Ctx, req *request) error {
	origin := c.Get("Origin")
	method := c.Get("Access-Control-Request-Method")
	switch {
	case req.bucket == "":
		return apiErr("MethodNotAllowed", "")
	case origin == "":
		return apiErr("BadRequest", "Insufficient information. Origin request header needed.")
	case method == "":
		return apiErr("BadRequest", "Invalid Access-Control-Request-Method: null")
	}
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	if len(b.CORS) == 0 {
		return apiErr("CORSForbidden", "CORSResponse: CORS is not enabled for this bucket.")
	}
	corsVary(c)
	headers := requestedHeaders(c.Get("Access-Control-Request-Headers"))
	r := matchCORS(b.CORS, origin, method, headers)
	if r == nil {
		return apiErr("CORSForbidden", "")
	}
	setCORSHeaders(c, r, origin)
	if len(headers) > 0 {
		c.Set("Access-Control-Allow-Headers", strings.Join(headers, ", "))
	}
	c.Status(fiber.StatusOK)
	return nil
}

// corsResponse adds the CORS headers to the response of an actual
// (non-preflight) request that carries an Origin, success or error, when
// a rule of the bucket allows it. It never fails the request.
func (g *Gateway) corsResponse(c *fiber.Ctx, req *request) {
	origin := c.Get("Origin")
	if origin == "" || req.bucket == "" || req.method == fiber.MethodOptions {
		return
	}
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil || len(b.CORS) == 0 {
		return
	}
	corsVary(c)
	if r := matchCORS(b.CORS, origin, req.method, nil); r != nil {
		setCORSHeaders(c, r, origin)
	}
}

// bucketCors answers Get/Put/DeleteBucketCors.
func (g *Gateway) bucketCors(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	switch req.method {
	case fiber.MethodGet:
		b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
		if err != nil {
			return bucketErr(err)
		}
		if len(b.CORS) == 0 {
			return apiErr("NoSuchCORSConfiguration", "")
		}
		out := CORSConfiguration{}
		for _, r := range b.CORS {
			out.Rules = append(out.Rules, CORSXML{ID: r.ID, AllowedHeaders: r.AllowedHeaders, AllowedMethods: r.AllowedMethods,
				AllowedOrigins: r.AllowedOrigins, ExposeHeaders: r.ExposeHeaders, MaxAgeSeconds: r.MaxAgeSeconds})
		}
		return sendXML(c, fiber.StatusOK, out)
	case fiber.MethodPut:
		var in corsInput
		if err := g.decodeXMLBody(c, req, &in); err != nil {
			return err
		}
		rules, err := corsRules(&in)
		if err != nil {
			return err
		}
		return g.setBucketConfig(c, req, fiber.StatusOK, func(b *metadata.Bucket) { b.CORS = rules })
	case fiber.MethodDelete:
		return g.setBucketConfig(c, req, fiber.StatusNoContent, func(b *metadata.Bucket) { b.CORS = nil })
	}
	return apiErr("MethodNotAllowed", "")
}
