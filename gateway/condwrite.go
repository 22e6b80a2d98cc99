package gateway

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// writeCond is the precondition of a conditional write (PutObject,
// CopyObject, CompleteMultipartUpload): If-None-Match: * (create only) or
// If-Match: <etag> (replace only that version).
type writeCond struct {
	ifMatch     string // ETag without quotes
	ifNoneMatch bool
}

// writeCondOf reads the request's write precondition; nil when it has
// none.
func writeCondOf(c *fiber.Ctx) *writeCond {
	im, inm := strings.TrimSpace(c.Get("If-Match")), strings.TrimSpace(c.Get("If-None-Match"))
	if im == "" && inm == "" {
		return nil
	}
	return &writeCond{ifMatch: strings.Trim(strings.TrimPrefix(im, "W/"), `"`), ifNoneMatch: inm != ""}
}

// validate rejects preconditions S3 does not accept on writes.
func (w *writeCond) validate(c *fiber.Ctx) error {
	if w == nil {
		return nil
	}
	if inm := strings.TrimSpace(c.Get("If-None-Match")); inm != "" && inm != "*" {
		return apiErr("NotImplemented", "If-None-Match on writes only accepts *")
	}
	return nil
}

// check applies w to the current manifest (nil: the key has no object).
func (w *writeCond) check(cur *metadata.Manifest) error {
	switch {
	case w.ifNoneMatch && cur != nil:
		return apiErr("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	case w.ifMatch != "" && cur == nil:
		return apiErr("NoSuchKey", "The specified key does not exist.")
	case w.ifMatch != "" && w.ifMatch != "*" && w.ifMatch != cur.ETag:
		return apiErr("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	}
	return nil
}

// current returns the key's current manifest, nil when there is none.
func (l *layer) current(ctx context.Context, bucket, key string) (*metadata.Manifest, error) {
	m, err := l.readManifest(ctx, bucket, key)
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	return m, err
}

// precheck fails a conditional write early, before its body is read; the
// decisive check is repeated under the key's lease in commit.
func (g *Gateway) precheck(ctx context.Context, bucket, key string, w *writeCond) error {
	if w == nil {
		return nil
	}
	cur, err := g.layer.current(ctx, bucket, key)
	if err != nil {
		return err
	}
	return w.check(cur)
}

// commit gives m a version and writes its manifest to holders. With a
// precondition, the key's lease is held from reading the current manifest
// to writing the new one, so concurrent conditional writers through any
// gateway serialise.
func (g *Gateway) commit(ctx context.Context, m *metadata.Manifest, holders []string, quorum int, w *writeCond) error {
	if w != nil {
		kl, err := g.layer.lockKey(ctx, m.Bucket, m.Key)
		if err != nil {
			return err
		}
		defer kl.release()
		cur, err := g.layer.current(ctx, m.Bucket, m.Key)
		if err != nil {
			return err
		}
		if err := w.check(cur); err != nil {
			return err
		}
	}
	m.Version = g.layer.clock.next()
	m.Modified = time.Unix(0, m.Version.TS).UTC()
	return g.layer.writeManifest(ctx, m, holders, quorum)
}
