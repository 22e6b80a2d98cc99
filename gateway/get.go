package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/sse"
	"github.com/regen-s3/regen/internal/stripe"
	"github.com/regen-s3/regen/metadata"
)

// byteRange is a resolved, satisfiable range [start, start+length).
type byteRange struct {
	start, length int64
}

// parseRange resolves a Range header against size. It returns nil for no
// range (or one S3 ignores, like a multi-range), and InvalidRange when the
// range cannot be satisfied.
func parseRange(h string, size int64) (*byteRange, error) {
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return nil, nil
	}
	a, b, ok := strings.Cut(spec, "-")
	if !ok {
		return nil, nil
	}
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	invalid := apiErr("InvalidRange", "The requested range is not satisfiable")
	switch {
	case a == "" && b == "":
		return nil, nil
	case a == "": // suffix: the last n bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 0 {
			return nil, nil
		}
		if n == 0 || size == 0 {
			// NB: an empty object has no last bytes: a suffix range of it
			// is as unsatisfiable as bytes=0- is (found by FuzzRange; it
			// resolved to a zero-length range).
			return nil, invalid
		}
		n = min(n, size)
		return &byteRange{start: size - n, length: n}, nil
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 {
		return nil, nil
	}
	end := size - 1
	if b != "" {
		if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
			return nil, nil
		}
		end = min(end, size-1)
	}
	if start >= size {
		return nil, invalid
	}
	return &byteRange{start: start, length: end - start + 1}, nil
}

// checkConditions applies If-Match, If-None-Match, If-Modified-Since and
// If-Unmodified-Since in RFC 7232's order, as S3 does.
func checkConditions(c *fiber.Ctx, m *metadata.Manifest) error {
	etag := `"` + m.ETag + `"`
	matches := func(list string) bool {
		for _, t := range strings.Split(list, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || t == etag || t == m.ETag || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
		return false
	}
	mod := m.Modified.Truncate(time.Second)
	im, inm := c.Get("If-Match"), c.Get("If-None-Match")
	if im != "" && !matches(im) {
		return apiErr("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	}
	if im == "" {
		if t, err := http.ParseTime(c.Get("If-Unmodified-Since")); err == nil && mod.After(t) {
			return apiErr("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
		}
	}
	if inm != "" && matches(inm) {
		return errNotModified
	}
	if inm == "" {
		if t, err := http.ParseTime(c.Get("If-Modified-Since")); err == nil && !mod.After(t) {
			return errNotModified
		}
	}
	return nil
}

var errNotModified = errors.New("not modified")

// partRange resolves ?partNumber=N: the bytes of part N of a multipart
// object, counted in the order of the completed upload, and the whole
// object as its only part otherwise. A multipart object's response says
// how many parts it has (x-amz-mp-parts-count), so a client can fetch
// them all in parallel.
func partRange(c *fiber.Ctx, req *request, m *metadata.Manifest) (*byteRange, error) {
	n, err := partNumber(req)
	if err != nil {
		return nil, err
	}
	if c.Get("Range") != "" {
		return nil, apiErr("InvalidRequest", "Cannot specify both Range header and partNumber query parameter.")
	}
	if !isMultipart(m) {
		if n != 1 {
			return nil, apiErr("InvalidPartNumber", "")
		}
		if m.Size == 0 {
			return nil, nil // no byte range to name: a plain 200
		}
		return &byteRange{start: 0, length: m.Size}, nil
	}
	if n > len(m.Parts) {
		return nil, apiErr("InvalidPartNumber", "")
	}
	c.Set("x-amz-mp-parts-count", strconv.Itoa(len(m.Parts)))
	var start int64
	for _, p := range m.Parts[:n-1] {
		start += partPlainSize(p)
	}
	return &byteRange{start: start, length: partPlainSize(m.Parts[n-1])}, nil
}

// isMultipart reports whether m was completed from a multipart upload; its
// ETag then ends in -N, the number of parts.
func isMultipart(m *metadata.Manifest) bool {
	i := strings.LastIndexByte(m.ETag, '-')
	return i >= 0 && i < len(m.ETag)-1 && strings.Trim(m.ETag[i+1:], "0123456789") == ""
}

// responseOverrides are the GET query parameters that replace response
// headers.
var responseOverrides = map[string]string{
	"response-content-type":        "Content-Type",
	"response-content-language":    "Content-Language",
	"response-expires":             "Expires",
	"response-cache-control":       "Cache-Control",
	"response-content-disposition": "Content-Disposition",
	"response-content-encoding":    "Content-Encoding",
}

// setObjectHeaders sets the headers of a GET or HEAD of m. whole is false
// for a range: the stored checksums are of the whole object, and clients
// that asked for them would check them against the part they got, as S3
// never sends them for a range. part is the ?partNumber asked for (0:
// none); that part's checksum is sent for it.
func (g *Gateway) setObjectHeaders(c *fiber.Ctx, req *request, m *metadata.Manifest, whole bool, part int) {
	ct := m.ContentType
	if ct == "" {
		ct = "binary/octet-stream"
	}
	c.Set("Content-Type", ct)
	c.Set("ETag", `"`+m.ETag+`"`)
	c.Set("Last-Modified", m.Modified.UTC().Format(http.TimeFormat))
	c.Set("Accept-Ranges", "bytes")
	for k, v := range m.UserMeta {
		c.Set("x-amz-meta-"+k, v)
	}
	for k, v := range m.Headers {
		c.Set(k, v)
	}
	if strings.EqualFold(c.Get("x-amz-checksum-mode"), "ENABLED") {
		switch {
		case whole && len(m.Checksums) > 0:
			setChecksumHeaders(c, m.Checksums)
			if isMultipart(m) {
				c.Set("x-amz-checksum-type", "COMPOSITE")
			} else {
				c.Set("x-amz-checksum-type", "FULL_OBJECT")
			}
		case part > 0 && isMultipart(m) && len(m.Parts[part-1].Checksums) > 0:
			// A part read by ?partNumber carries that part's own
			// checksum, which is what a client fetching parts checks.
			setChecksumHeaders(c, m.Parts[part-1].Checksums)
			c.Set("x-amz-checksum-type", "COMPOSITE")
		}
	}
	setTaggingCount(c, m)
	setLockHeaders(c, m)
	if m.StorageClass != "" && m.StorageClass != "STANDARD" {
		c.Set("x-amz-storage-class", m.StorageClass)
	}
	for q, h := range responseOverrides {
		if v := req.query.Get(q); v != "" {
			c.Set(h, v)
		}
	}
}

func (g *Gateway) getObject(c *fiber.Ctx, req *request, head bool) error {
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	id, byID, err := versionIDParam(req, b.Versioning)
	if err != nil {
		return err
	}
	var m *metadata.Manifest
	switch {
	case byID:
		m, err = g.readVersion(ctx, req.bucket, req.key, id, head)
	case b.Versioning != "":
		m, err = g.layer.lookupWhere(ctx, req.bucket, req.key, !head, nil)
	case head:
		m, err = g.layer.readHead(ctx, req.bucket, req.key)
	default:
		m, err = g.layer.readManifest(ctx, req.bucket, req.key)
	}
	if dm := (*deleteMarkerError)(nil); b.Versioning != "" && errors.As(err, &dm) {
		markerHeaders(c, dm.m, byID)
		if byID {
			// S3: a delete marker has no data to GET or HEAD.
			return apiErr("MethodNotAllowed", "The specified method is not allowed against this resource.")
		}
	}
	if errors.Is(err, errNotFound) {
		if byID {
			return apiErr("NoSuchVersion", "The specified version does not exist.")
		}
		return apiErr("NoSuchKey", "The specified key does not exist.")
	}
	if err != nil {
		return err
	}
	setVersionHeader(c, b.Versioning, m)
	seal, err := g.sealerFor(c, m.SSE, objectSSE)
	if err != nil {
		return err
	}
	if seal != nil && !head {
		if err := checkSealedKeys(m, seal); err != nil {
			return err
		}
	}
	if err := checkConditions(c, m); err != nil {
		if errors.Is(err, errNotModified) {
			c.Set("ETag", `"`+m.ETag+`"`)
			c.Set("Last-Modified", m.Modified.UTC().Format(http.TimeFormat))
			c.Status(fiber.StatusNotModified)
			return nil
		}
		return err
	}
	var rng *byteRange
	part := 0
	if req.query.Has("partNumber") {
		if rng, err = partRange(c, req, m); err != nil {
			return err
		}
		part, _ = partNumber(req)
	} else if rng, err = parseRange(c.Get("Range"), m.Size); err != nil {
		c.Set("Content-Range", fmt.Sprintf("bytes */%d", m.Size))
		return err
	}
	g.setObjectHeaders(c, req, m, rng == nil || (part > 0 && !isMultipart(m)), part)
	setSSEHeaders(c, m.SSE, seal)
	off, length, status := int64(0), m.Size, fiber.StatusOK
	if rng != nil {
		off, length, status = rng.start, rng.length, fiber.StatusPartialContent
		c.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+length-1, m.Size))
	}
	c.Status(status)
	if head {
		c.Response().Header.SetContentLength(int(length))
		c.Response().SkipBody = true
		return nil
	}
	g.metrics.bytesOut.Add(float64(length))
	if m.Inline != nil || m.Size == 0 {
		return c.Send(m.Inline[off : off+length])
	}
	code, err := g.layer.code(m.Code)
	if err != nil {
		return fmt.Errorf("object %s/%s has unknown code: %w", m.Bucket, m.Key, err)
	}
	body := g.objectBody(m, code, seal, off, length)
	body.logf = func(err error) {
		g.log.Warn("GET failed mid-stream", "request", req.id, "bucket", m.Bucket, "key", m.Key, "err", err)
	}
	// fasthttp copies the body with io.CopyBuffer into the connection's
	// writer, which takes body.WriteTo: the stripes are written from the
	// shard buffers into the socket, with no pipe or copy between. It
	// closes the body when the response is done or the client went away.
	c.Context().SetBodyStream(body, int(length))
	return nil
}

// objectBody returns the bytes [off, off+length) of the striped object m
// as a stream; seal opens the data keys of an encrypted object's parts.
func (g *Gateway) objectBody(m *metadata.Manifest, code codec.Code, seal sse.Sealer, off, length int64) *objectBody {
	ctx, cancel := context.WithCancel(context.Background())
	targets := g.layer.targets(m.Placement)
	return &objectBody{ctx: ctx, cancel: cancel, read: func(ctx context.Context, w io.Writer) error {
		return g.readParts(ctx, m, code, seal, targets, off, length, w)
	}}
}

// objectBody streams an object's range. WriteTo reads the stripes straight
// into its writer; Read, for consumers that want a reader (CopyObject's
// stripe writer), runs the same read into a pipe. Close stops either.
type objectBody struct {
	ctx    context.Context
	cancel context.CancelFunc
	read   func(ctx context.Context, w io.Writer) error
	logf   func(error) // reports a failed read, if set

	once sync.Once
	pr   *io.PipeReader
}

// WriteTo writes the whole range to w (once; use either WriteTo or Read).
func (b *objectBody) WriteTo(w io.Writer) (int64, error) {
	defer b.cancel()
	cw := &countingWriter{w: w}
	err := b.read(b.ctx, cw)
	if err != nil && b.logf != nil {
		b.logf(err)
	}
	return cw.n, err
}

func (b *objectBody) Read(p []byte) (int, error) {
	b.once.Do(func() {
		pr, pw := io.Pipe()
		b.pr = pr
		go func() {
			defer b.cancel()
			err := b.read(b.ctx, pw)
			if err != nil && b.logf != nil {
				b.logf(err)
			}
			pw.CloseWithError(err)
		}()
	})
	return b.pr.Read(p)
}

func (b *objectBody) Close() error {
	b.cancel()
	if b.pr != nil {
		return b.pr.Close()
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// readParts streams [off, off+length) of a striped object across its
// parts; an encrypted part is read by its sealed packages that cover the
// range, opened with the part's data key (seal opens it).
func (g *Gateway) readParts(ctx context.Context, m *metadata.Manifest, code codec.Code, seal sse.Sealer, targets []stripe.Target, off, length int64, w io.Writer) error {
	var partStart int64
	for _, p := range m.Parts {
		plain := partPlainSize(p)
		partEnd := partStart + plain
		if off < partEnd && off+length > partStart {
			from := max(off, partStart) - partStart
			to := min(off+length, partEnd) - partStart
			pw := w
			var opened *sse.Writer
			if p.SealedKey != nil {
				if seal == nil {
					return fmt.Errorf("part %d: encrypted, and no key to open it", p.Number)
				}
				dk, err := seal.Open(p.SealedKey)
				if err != nil {
					return fmt.Errorf("part %d: opening its data key: %w", p.Number, err)
				}
				var span sse.Span
				opened, span = sse.NewWriter(dk, plain, from, to-from, w)
				pw, from, to = opened, span.Off, span.Off+span.Len
			}
			err := stripe.Read(ctx, g.layer.shards, stripe.ReadParams{
				Code: code, ChunkSize: m.ChunkSize, FileID: p.ID, Size: p.Size,
				Targets: targets, ShardTimeout: g.cfg.ShardTimeout, Memory: g.readMem,
				OnDegraded: func(d stripe.Degraded) {
					g.metrics.degraded.Inc()
					g.metrics.degradedBytes.WithLabelValues(d.Method).Add(float64(d.Bytes))
					for _, i := range d.Corrupt {
						g.metrics.corruptShards.Inc()
						g.log.Warn("shard failed its checksum on read", "file", p.ID, "shard", i, "node", targets[i].Node)
					}
				},
			}, from, to-from, pw)
			if err == nil && opened != nil {
				err = opened.Close()
			}
			if err != nil {
				return fmt.Errorf("part %d: %w", p.Number, err)
			}
		}
		partStart = partEnd
	}
	return nil
}
