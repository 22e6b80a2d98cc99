package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/s3policy"
	"github.com/regen-s3/regen/metadata"
)

// Bucket policies: stored as put (metadata.Bucket.Policy), parsed and
// checked by internal/s3policy (which refuses what regen cannot enforce),
// evaluated for every request on the bucket (access.go).

// policyCache keeps parsed policies by bucket and document, so a request
// does not parse its bucket's policy again.
type policyCache struct {
	mu sync.Mutex
	m  map[string]policyEntry
}

type policyEntry struct {
	doc string
	p   *s3policy.Policy
	err error
}

// get returns the parsed policy of bucket b.
func (pc *policyCache) get(b *metadata.Bucket) (*s3policy.Policy, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if e, ok := pc.m[b.Name]; ok && e.doc == b.Policy {
		return e.p, e.err
	}
	p, err := s3policy.Parse([]byte(b.Policy), b.Name)
	if pc.m == nil {
		pc.m = map[string]policyEntry{}
	}
	pc.m[b.Name] = policyEntry{doc: b.Policy, p: p, err: err}
	return p, err
}

// PolicyStatus is the GetBucketPolicyStatus response.
type PolicyStatus struct {
	XMLName  struct{} `xml:"http://s3.amazonaws.com/doc/2006-03-01/ PolicyStatus"`
	IsPublic bool     `xml:"IsPublic"`
}

// bucketPolicy answers Get/Put/DeleteBucketPolicy and
// GetBucketPolicyStatus.
func (g *Gateway) bucketPolicy(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	switch req.method {
	case fiber.MethodGet:
		b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
		if err != nil {
			return bucketErr(err)
		}
		if b.Policy == "" {
			return apiErr("NoSuchBucketPolicy", "")
		}
		if req.query.Has("policyStatus") {
			p, err := g.policies.get(&b)
			if err != nil {
				return err
			}
			return sendXML(c, fiber.StatusOK, PolicyStatus{IsPublic: p.IsPublic()})
		}
		c.Set("Content-Type", "application/json")
		return c.Status(fiber.StatusOK).SendString(b.Policy)
	case fiber.MethodPut:
		doc, err := g.wholeBody(c, req, bodyDigests, s3policy.MaxSize)
		if errors.Is(err, errBodyTooLarge) {
			return apiErr("MalformedPolicy", fmt.Sprintf("policies must be at most %d bytes", s3policy.MaxSize))
		}
		if err != nil {
			return err
		}
		if len(doc) == 0 {
			return apiErr("MissingRequestBodyError", "")
		}
		p, err := s3policy.Parse(doc, req.bucket)
		if err != nil {
			var pe *s3policy.Error
			if errors.As(err, &pe) {
				return apiErr("MalformedPolicy", pe.Reason)
			}
			return err
		}
		if err := g.checkPrincipals(ctx, p.Principals()); err != nil {
			return err
		}
		return g.setBucketConfig(c, req, fiber.StatusNoContent, func(b *metadata.Bucket) { b.Policy = string(doc) })
	case fiber.MethodDelete:
		return g.setBucketConfig(c, req, fiber.StatusNoContent, func(b *metadata.Bucket) { b.Policy = "" })
	}
	return apiErr("MethodNotAllowed", "")
}

// checkPrincipals refuses a policy naming an access key that does not
// exist (a configured key of this gateway, or a live stored key), as S3
// refuses an invalid principal: a typo would otherwise grant or deny
// nothing, silently. A key deleted after the policy was put leaves its
// statements applying to no one: access key IDs are never given again.
func (g *Gateway) checkPrincipals(ctx context.Context, ids []string) error {
	var stored map[string]*storedKey
	for _, id := range ids {
		if _, ok := g.cfg.Credentials[id]; ok {
			continue
		}
		if stored == nil && g.keys.enabled() {
			var err error
			if stored, err = g.keys.all(ctx); err != nil {
				return err
			}
		}
		if k := stored[id]; k == nil || k.rec.Deleted {
			return apiErr("MalformedPolicy", fmt.Sprintf("Invalid principal in policy: no access key %q (name keys by their access key ID, as regen admin key list shows it, not by their name)", id))
		}
	}
	return nil
}
