package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/sse"
	"github.com/regen-s3/regen/metadata"
)

// copySource parses x-amz-copy-source: "bucket/key" or "/bucket/key",
// URL-encoded, optionally with "?versionId=" (version is then that ID,
// "null" included; empty for the current version).
func copySource(c *fiber.Ctx) (bucket, key, version string, err error) {
	raw := c.Get("x-amz-copy-source")
	raw, query, _ := strings.Cut(raw, "?")
	if query != "" {
		q, _ := url.ParseQuery(query)
		version = q.Get("versionId")
	}
	raw, err = url.PathUnescape(strings.TrimPrefix(raw, "/"))
	if err != nil {
		return "", "", "", apiErr("InvalidArgument", "Copy Source must mention the source bucket and key: sourcebucket/sourcekey")
	}
	bucket, key, ok := strings.Cut(raw, "/")
	if !ok || bucket == "" || key == "" {
		return "", "", "", apiErr("InvalidArgument", "Copy Source must mention the source bucket and key: sourcebucket/sourcekey")
	}
	if err := checkKey(key); err != nil {
		return "", "", "", err
	}
	return bucket, key, version, nil
}

// readSource resolves the copy source (a version of it when asked, which
// c's response names in x-amz-copy-source-version-id) and applies the
// x-amz-copy-source-if-* preconditions.
func (g *Gateway) readSource(ctx context.Context, c *fiber.Ctx) (*metadata.Manifest, error) {
	bucket, key, version, err := copySource(c)
	if err != nil {
		return nil, err
	}
	b, err := g.layer.bucket(ctx, g.buckets, bucket)
	if err != nil {
		return nil, bucketErr(err)
	}
	var src *metadata.Manifest
	switch {
	case version == "" || version == metadata.NullVersionID && b.Versioning == "":
		src, err = g.layer.readManifest(ctx, bucket, key)
	case b.Versioning == "":
		return nil, apiErr("InvalidArgument", "Invalid version id specified")
	default:
		if _, perr := metadata.ParseVersion(version); perr != nil && version != metadata.NullVersionID {
			return nil, apiErr("InvalidArgument", "Invalid version id specified")
		}
		src, err = g.readVersion(ctx, bucket, key, version, false)
		if dm := (*deleteMarkerError)(nil); errors.As(err, &dm) {
			// S3: a delete marker is no source.
			return nil, apiErr("InvalidRequest", "The source of a copy request may not specifically refer to a delete marker by version id.")
		}
		if errors.Is(err, errNotFound) {
			return nil, apiErr("NoSuchVersion", "The specified version does not exist.")
		}
	}
	if errors.Is(err, errNotFound) {
		return nil, apiErr("NoSuchKey", "The specified key does not exist.")
	}
	if err != nil {
		return nil, err
	}
	if b.Versioning != "" {
		c.Set("x-amz-copy-source-version-id", src.S3VersionID())
	}
	return src, copyConditions(c, src)
}

// copyConditions applies x-amz-copy-source-if-(none-)match and
// -if-(un)modified-since; any failure is 412, as S3 answers for copies.
func copyConditions(c *fiber.Ctx, m *metadata.Manifest) error {
	failed := apiErr("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	matches := func(list string) bool {
		for _, t := range strings.Split(list, ",") {
			t = strings.Trim(strings.TrimSpace(t), `"`)
			if t == "*" || t == m.ETag {
				return true
			}
		}
		return false
	}
	mod := m.Modified.Truncate(time.Second)
	im, inm := c.Get("x-amz-copy-source-if-match"), c.Get("x-amz-copy-source-if-none-match")
	if im != "" && !matches(im) || inm != "" && matches(inm) {
		return failed
	}
	if t, err := http.ParseTime(c.Get("x-amz-copy-source-if-unmodified-since")); err == nil && im == "" && mod.After(t) {
		return failed
	}
	if t, err := http.ParseTime(c.Get("x-amz-copy-source-if-modified-since")); err == nil && inm == "" && !mod.After(t) {
		return failed
	}
	return nil
}

// openObject streams bytes [off, off+length) of the object m describes
// (seal opens its data keys if it is encrypted). Reading stops the
// background fetch when the reader is closed.
func (g *Gateway) openObject(m *metadata.Manifest, seal sse.Sealer, off, length int64) (io.ReadCloser, error) {
	if m.Inline != nil || m.Size == 0 {
		return io.NopCloser(bytes.NewReader(m.Inline[off : off+length])), nil
	}
	code, err := g.layer.code(m.Code)
	if err != nil {
		return nil, fmt.Errorf("object %s/%s has unknown code: %w", m.Bucket, m.Key, err)
	}
	return g.objectBody(m, code, seal, off, length), nil
}

func (g *Gateway) copyObject(c *fiber.Ctx, req *request) error {
	if len(req.key) > maxKeyLen {
		return apiErr("KeyTooLongError", "Your key is too long")
	}
	cond := writeCondOf(c)
	if err := cond.validate(c); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := g.readSource(ctx, c)
	if err != nil {
		return err
	}
	srcSeal, err := g.sealerFor(c, src.SSE, copySourceSSE)
	if err != nil {
		return err
	}
	ask, err := g.askedSSE(c)
	if err != nil {
		return err
	}
	m := &metadata.Manifest{Bucket: req.bucket, Key: req.key, StorageClass: c.Get("x-amz-storage-class")}
	// As in S3, a copy does not take the source's ACL: it gets the one
	// the request asks for, private by default.
	if m.ACL, err = requestACL(c); err != nil {
		return err
	}
	// Nor its lock: the copy is a new version, locked as its request
	// and its bucket say (prepareManifest).
	if m.Lock, err = lockFromHeaders(c, time.Now()); err != nil {
		return err
	}
	switch strings.ToUpper(c.Get("x-amz-metadata-directive")) {
	case "", "COPY":
		if src.Bucket == req.bucket && src.Key == req.key && m.StorageClass == "" && !ask.s3 && ask.customer == nil {
			return apiErr("InvalidRequest", "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
		}
		m.ContentType, m.UserMeta, m.Headers = src.ContentType, src.UserMeta, src.Headers
	case "REPLACE":
		if m.UserMeta, err = userMeta(c); err != nil {
			return err
		}
		m.ContentType, m.Headers = c.Get("Content-Type"), storedHeaderValues(c)
	default:
		return apiErr("InvalidArgument", "Unknown metadata directive.")
	}
	switch strings.ToUpper(c.Get("x-amz-tagging-directive")) {
	case "", "COPY":
		m.Tags = src.Tags
	case "REPLACE":
		if m.Tags, err = tagsFromHeader(c.Get("x-amz-tagging")); err != nil {
			return err
		}
	default:
		return apiErr("InvalidArgument", "Unknown tagging directive.")
	}
	if m.StorageClass == "" {
		m.StorageClass = src.StorageClass
	}
	code, seal, err := g.prepareManifest(ctx, m, ask)
	if err != nil {
		return err
	}
	if err := g.precheck(ctx, m.Bucket, m.Key, cond); err != nil {
		return err
	}
	body, err := g.openObject(src, srcSeal, 0, src.Size)
	if err != nil {
		return err
	}
	defer body.Close()
	if err := g.storeObject(ctx, req, m, code, seal, body, src.Size, nil, cond); err != nil {
		return err
	}
	setVersionHeader(c, g.versioningOf(ctx, m.Bucket), m)
	setSSEHeaders(c, m.SSE, seal)
	return sendXML(c, fiber.StatusOK, CopyObjectResult{ETag: `"` + m.ETag + `"`, LastModified: ts(m.Modified)})
}

func (g *Gateway) uploadPartCopy(c *fiber.Ctx, req *request, num int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := g.openUpload(ctx, req)
	if err != nil {
		return err
	}
	src, err := g.readSource(ctx, c)
	if err != nil {
		return err
	}
	srcSeal, err := g.sealerFor(c, src.SSE, copySourceSSE)
	if err != nil {
		return err
	}
	seal, err := g.sealerFor(c, u.SSE, objectSSE)
	if err != nil {
		return err
	}
	off, length := int64(0), src.Size
	if h := c.Get("x-amz-copy-source-range"); h != "" {
		rng, err := parseCopyRange(h, src.Size)
		if err != nil {
			return err
		}
		off, length = rng.start, rng.length
	}
	if length > maxPartSize {
		return apiErr("EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.")
	}
	body, err := g.openObject(src, srcSeal, off, length)
	if err != nil {
		return err
	}
	defer body.Close()
	p, err := g.writePart(ctx, u, num, seal, body, length, nil)
	if err != nil {
		return err
	}
	setSSEHeaders(c, u.SSE, seal)
	return sendXML(c, fiber.StatusOK, CopyPartResult{ETag: `"` + p.ETag + `"`, LastModified: ts(p.Modified)})
}

// parseCopyRange reads x-amz-copy-source-range, which, unlike Range, must
// be exactly one explicit "bytes=first-last" (InvalidArgument otherwise:
// no suffix, open or multiple ranges, nothing after it) inside the source
// (InvalidRange otherwise).
func parseCopyRange(h string, size int64) (*byteRange, error) {
	malformed := apiErr("InvalidArgument", "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy")
	spec, ok := strings.CutPrefix(h, "bytes=")
	a, b, ok2 := strings.Cut(spec, "-")
	if !ok || !ok2 || !allDigits(a) || !allDigits(b) {
		return nil, malformed
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || last < first {
		return nil, malformed
	}
	if last >= size {
		return nil, apiErr("InvalidRange", "The requested range is not satisfiable")
	}
	return &byteRange{start: first, length: last - first + 1}, nil
}

// allDigits reports whether s is a non-empty run of ASCII digits.
func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
