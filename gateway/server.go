package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	md5simd "github.com/minio/md5-simd"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/connguard"
	"github.com/regen-s3/regen/internal/sigv4"
	"github.com/regen-s3/regen/internal/stripe"
)

// Gateway is one S3 front end.
type Gateway struct {
	cfg     Config
	log     *slog.Logger
	app     *fiber.App
	layer   *layer
	buckets *bucketCache
	auth    *sigv4.Verifier
	metrics *metrics
	events  eventLog // recent events for the status page (events.go)
	// keys are the stored access keys (accesskeys.go).
	keys *keyring
	// lifecycle applies buckets' lifecycle rules (lifecycle_service.go).
	lifecycle *LifecycleService
	// policies caches parsed bucket policies (policy.go).
	policies policyCache
	// writeBufs lends every write's stripe buffers (Config.WriteMemory).
	writeBufs *stripe.Buffers
	// bodyMem bounds the request bodies held whole (Config.BodyMemory).
	bodyMem *bodyMemory
	// readMem bounds every read's shard buffers (Config.ReadMemory).
	readMem *stripe.ReadMemory
	// md5 hashes the ETags of concurrent uploads together, several
	// bodies per SIMD pass (md5For); set by Serve before it serves, nil
	// before (g.Test: crypto/md5).
	md5 md5simd.Server
}

// New builds a gateway over the given shard servers and membership.
func New(cfg Config, shards ShardAPI, nodes Membership) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{
		cfg:       cfg,
		log:       cfg.Logger,
		buckets:   &bucketCache{ttl: cfg.BucketCacheTTL},
		auth:      &sigv4.Verifier{Creds: sigv4.StaticCredentials(cfg.Credentials), Region: cfg.Region},
		metrics:   newMetrics(cfg.Registerer),
		writeBufs: stripe.NewBuffers(cfg.WriteMemory),
		bodyMem:   newBodyMemory(cfg.BodyMemory),
		readMem:   stripe.NewReadMemory(cfg.ReadMemory),
	}
	g.layer = &layer{shards: shards, nodes: nodes, log: cfg.Logger, clock: clock{writer: cfg.NodeID, offset: cfg.ClockOffset},
		notify: newNotifier(shards), lookups: newLookups(shards, cfg.OpTimeout),
		writes: newManifestWrites(shards, cfg.OpTimeout)}
	kr, err := newKeyring(cfg, g.layer, shards)
	if err != nil {
		return nil, err
	}
	g.keys = kr
	g.lifecycle = newLifecycleService(g, cfg.Registerer)
	for _, name := range g.codeNames() {
		c, err := g.layer.code(name)
		if err != nil {
			return nil, err
		}
		g.layer.maxN = max(g.layer.maxN, c.TotalShards())
		g.layer.maxK = max(g.layer.maxK, c.DataShards())
		if g.layer.minK == 0 || c.DataShards() < g.layer.minK {
			g.layer.minK = c.DataShards()
		}
	}
	lim := cfg.Limits
	g.app = fiber.New(fiber.Config{
		// Bodies larger than BodyLimit are streamed to the handler
		// instead of being buffered: memory per PUT stays bounded.
		StreamRequestBody:     true,
		BodyLimit:             1 << 20,
		DisableStartupMessage: true,
		// We route on the raw path ourselves: S3 keys may hold any bytes,
		// and SigV4 signs the path exactly as sent.
		UnescapePath:              false,
		DisableKeepalive:          false,
		DisableDefaultContentType: true,
		ErrorHandler:              g.fiberError,
		// The read buffer bounds the request line and headers.
		ReadBufferSize: lim.MaxHeaderBytes,
		// fasthttp's ReadTimeout covers headers and a body up to
		// BodyLimit; streamed bodies and responses are bounded per read
		// and write by the connection guard (listen), since a whole-body
		// deadline would cut off large transfers.
		ReadTimeout: lim.ReadHeaderTimeout,
		IdleTimeout: lim.IdleTimeout,
		// The guard refuses connections over MaxConns with an S3 answer;
		// fasthttp's own cap (a plain-text 503) stays above it.
		Concurrency: lim.MaxConns + maxRefusing,
		// multipart/form-data bodies would be parsed (and spilled to
		// temporary files) before the handler runs; S3 has no use for it.
		DisablePreParseMultipartForm: true,
	})
	srv := g.app.Server()
	srv.SecureErrorLogMessage = true // never quote request bytes in errors
	srv.Logger = fasthttpLogger{log: cfg.Logger}
	g.app.Use(g.serve)
	return g, nil
}

// codeNames lists every code a PUT may use.
func (g *Gateway) codeNames() []string {
	names := []string{g.cfg.DefaultCode}
	for _, c := range g.cfg.StorageClasses {
		names = append(names, c)
	}
	return names
}

// maxRefusing is headroom above MaxConns for connections fasthttp may
// still hold while the guard counts them closed.
const maxRefusing = 64

// Serve serves S3 on ln until ctx ends, then shuts down gracefully. ln is
// wrapped in the connection guard of Config.Limits.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	gl, err := g.listen(ln)
	if err != nil {
		return err
	}
	go g.layer.notify.run(ctx)
	g.lifecycle.Start(ctx)
	defer g.lifecycle.Stop()
	g.metrics.listener.Store(gl)
	g.md5 = md5simd.NewServer()
	errc := make(chan error, 1)
	go func() { errc <- g.app.Listener(gl) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		err := g.app.ShutdownWithTimeout(10 * time.Second)
		if err == nil {
			g.md5.Close() // NB: only once no handler can hash any more
		}
		return err
	}
}

// md5MultiMin is the smallest body whose ETag goes to the multi-buffer
// hasher: a hash there costs a round trip to its goroutine, which a small
// body's few blocks do not repay.
const md5MultiMin = 256 << 10

// md5For returns the ETag hash maker for a body of size bytes (-1:
// unknown) for stripe.WriteParams.NewMD5: the multi-buffer hasher for
// large bodies once serving, nil (crypto/md5) otherwise. MD5 was 35% of
// the gateway's CPU on 64 MiB PUTs (BENCHMARKS.md, issue 21); one body at
// a time it runs at one core's MD5 rate whatever the SIMD width.
func (g *Gateway) md5For(size int64) func() hash.Hash {
	if g.md5 == nil || (size >= 0 && size < md5MultiMin) {
		return nil
	}
	return func() hash.Hash { return g.md5.NewHash() }
}

// Test serves one request in memory (for tests of the HTTP surface).
func (g *Gateway) Test(req *http.Request) (*http.Response, error) { return g.app.Test(req, -1) }

// request is what a handler needs from a request, copied out of fiber's
// reused buffers so it may outlive the handler.
type request struct {
	id     string
	method string
	bucket string
	key    string
	query  url.Values
	auth   *sigv4.Result
	// who signed the request (zero when anonymous).
	who principal
	// anonymous is set for a request without any signature; auth then
	// holds no key and an unsigned payload (see authorize).
	anonymous bool
	start     time.Time
	// bodyHeld is the body memory (Gateway.bodyMem) the request holds;
	// serve gives it back when the request ends.
	bodyHeld int64
}

func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// serve is the one entry point: it authenticates, routes on method, bucket,
// key and query, and renders errors as S3 XML.
func (g *Gateway) serve(c *fiber.Ctx) error {
	// The headers are in: from here the connection guard bounds each
	// wait for body bytes (Limits.ReadTimeout).
	connguard.StartBodyOf(c.Context().Conn())
	req := &request{id: newRequestID(), method: c.Method(), start: time.Now()}
	// Header names go out as written: S3 returns user metadata names as
	// stored (lower case), and SDKs compare them case-sensitively.
	c.Response().Header.DisableNormalizing()
	c.Set("x-amz-request-id", req.id)
	c.Set("Server", "regen")
	op := "unknown"
	func() {
		defer g.recoverRequest(c, req, &op)
		err := checkFraming(c)
		if err == nil {
			err = g.route(c, req, &op)
		}
		if err != nil {
			g.writeError(c, req, err)
		}
		g.corsResponse(c, req)
	}()
	g.bodyMem.release(req)
	status, took := c.Response().StatusCode(), time.Since(req.start)
	g.metrics.observe(op, status, took)
	g.logAccess(c, req, op, status, took)
	return nil
}

func (g *Gateway) route(c *fiber.Ctx, req *request, op *string) error {
	rawPath := string(c.Request().URI().PathOriginal())
	if i := strings.IndexByte(rawPath, '?'); i >= 0 {
		rawPath = rawPath[:i]
	}
	rawQuery := string(c.Request().URI().QueryString())
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		// S3's answer to a bad %-escape. The message repeats nothing of
		// the query: the bytes after a '%' may be any bytes at all, and
		// the escaped form ParseQuery's error gives them reads as noise.
		return ErrInvalidURI.With("Couldn't parse the specified URI: the query string holds an invalid percent-escape or a semicolon.")
	}
	req.query = q
	if isUIRequest(c, rawPath, q) { // the status page (ui.go); never a signed S3 request
		*op = "ui"
		return g.serveUI(c, rawPath)
	}
	if c.Get("Authorization") == "" && !q.Has("X-Amz-Signature") && g.serveOps(c, rawPath, g.cfg.Gatherer) {
		*op = "ops"
		return nil
	}
	if admin, ok := strings.CutPrefix(rawPath, AdminPrefix); ok {
		defer func() { *op = "admin" }()
		if err := g.authenticate(c, req, rawPath, rawQuery); err != nil {
			return err
		}
		return g.serveAdmin(c, req, admin)
	}
	bucket, key, err := g.splitRequest(string(c.Request().Host()), rawPath)
	if err != nil {
		return err
	}
	req.bucket, req.key = bucket, key
	if req.method == fiber.MethodOptions {
		*op = "PreflightCORS"
		return g.preflight(c, req)
	}

	if err := g.authenticate(c, req, rawPath, rawQuery); err != nil {
		if !errors.Is(err, sigv4.ErrNoAuth) {
			return err
		}
		req.anonymous = true
		req.auth = &sigv4.Result{PayloadHash: sigv4.UnsignedPayload}
	}
	if err := g.authorize(c, req); err != nil {
		return err
	}
	if key != "" {
		if err := checkKey(key); err != nil {
			return err
		}
	}
	if err := checkListParams(req); err != nil {
		return err
	}

	if q.Has("acl") && bucket != "" {
		*op = "ACL"
		if req.method == fiber.MethodPut {
			return g.putACL(c, req)
		}
		if req.method == fiber.MethodGet {
			return g.getACL(c, req)
		}
	}
	switch {
	case bucket == "":
		if req.method == fiber.MethodGet {
			*op = "ListBuckets"
			return g.listBuckets(c, req)
		}
	case key == "":
		return g.routeBucket(c, req, op)
	default:
		return g.routeObject(c, req, op)
	}
	return apiErr("MethodNotAllowed", "")
}

func (g *Gateway) routeBucket(c *fiber.Ctx, req *request, op *string) error {
	q := req.query
	switch req.method {
	case fiber.MethodPut, fiber.MethodDelete:
		if q.Has("policy") {
			*op = "PutBucketPolicy"
			if req.method == fiber.MethodDelete {
				*op = "DeleteBucketPolicy"
			}
			return g.bucketPolicy(c, req)
		}
		if q.Has("lifecycle") {
			*op = "PutBucketLifecycleConfiguration"
			if req.method == fiber.MethodDelete {
				*op = "DeleteBucketLifecycle"
			}
			return g.bucketLifecycle(c, req)
		}
		if q.Has("cors") {
			*op = "PutBucketCors"
			if req.method == fiber.MethodDelete {
				*op = "DeleteBucketCors"
			}
			return g.bucketCors(c, req)
		}
		if q.Has("tagging") {
			*op = "PutBucketTagging"
			if req.method == fiber.MethodDelete {
				*op = "DeleteBucketTagging"
			}
			return g.bucketTagging(c, req)
		}
		if q.Has("encryption") {
			*op = "PutBucketEncryption"
			if req.method == fiber.MethodDelete {
				*op = "DeleteBucketEncryption"
			}
			return g.bucketEncryption(c, req)
		}
		if q.Has("object-lock") && req.method == fiber.MethodPut {
			*op = "PutObjectLockConfiguration"
			return g.bucketObjectLock(c, req)
		}
		if q.Has("versioning") && req.method == fiber.MethodPut {
			*op = "PutBucketVersioning"
			return g.bucketVersioning(c, req)
		}
		if q.Has("ownershipControls") {
			*op = "PutBucketOwnershipControls"
			if req.method == fiber.MethodDelete {
				*op = "DeleteBucketOwnershipControls"
			}
			return g.bucketOwnership(c, req)
		}
		// PUT ?tagging or DELETE ?policy must not create or delete the
		// bucket itself.
		if err := onlyParams(q); err != nil {
			return err
		}
	}
	switch req.method {
	case fiber.MethodPut:
		*op = "CreateBucket"
		return g.createBucket(c, req)
	case fiber.MethodHead:
		*op = "HeadBucket"
		return g.headBucket(c, req)
	case fiber.MethodDelete:
		*op = "DeleteBucket"
		return g.deleteBucket(c, req)
	case fiber.MethodPost:
		if q.Has("delete") {
			*op = "DeleteObjects"
			return g.deleteObjects(c, req)
		}
	case fiber.MethodGet:
		switch {
		case q.Has("uploads"):
			*op = "ListMultipartUploads"
			return g.listMultipartUploads(c, req)
		case q.Has("policy"):
			*op = "GetBucketPolicy"
			return g.bucketPolicy(c, req)
		case q.Has("policyStatus"):
			*op = "GetBucketPolicyStatus"
			return g.bucketPolicy(c, req)
		case q.Has("lifecycle"):
			*op = "GetBucketLifecycleConfiguration"
			return g.bucketLifecycle(c, req)
		case q.Has("cors"):
			*op = "GetBucketCors"
			return g.bucketCors(c, req)
		case q.Has("tagging"):
			*op = "GetBucketTagging"
			return g.bucketTagging(c, req)
		case q.Has("encryption"):
			*op = "GetBucketEncryption"
			return g.bucketEncryption(c, req)
		case q.Has("ownershipControls"):
			*op = "GetBucketOwnershipControls"
			return g.bucketOwnership(c, req)
		case q.Has("versions"):
			*op = "ListObjectVersions"
			return g.listObjectVersions(c, req)
		case q.Has("object-lock"):
			*op = "GetObjectLockConfiguration"
			return g.bucketObjectLock(c, req)
		case q.Has("versioning"):
			*op = "GetBucketVersioning"
			return g.bucketVersioning(c, req)
		case q.Has("location"):
			*op = "GetBucketLocation"
			return g.bucketLocation(c, req)
		case q.Get("list-type") == "2":
			*op = "ListObjectsV2"
			return g.listObjectsV2(c, req)
		case onlyParams(q, "prefix", "delimiter", "marker", "max-keys", "encoding-type") == nil:
			*op = "ListObjects"
			return g.listObjectsV1(c, req)
		}
		return apiErr("NotImplemented", "this bucket sub-resource is not supported")
	}
	return apiErr("MethodNotAllowed", "")
}

func (g *Gateway) routeObject(c *fiber.Ctx, req *request, op *string) error {
	if err := writableAsAsked(c, req.method); err != nil {
		return err
	}
	if req.query.Has("uploads") || req.query.Has("uploadId") {
		return g.routeMultipart(c, req, op)
	}
	if req.query.Has("tagging") {
		*op = map[string]string{fiber.MethodGet: "GetObjectTagging", fiber.MethodPut: "PutObjectTagging", fiber.MethodDelete: "DeleteObjectTagging"}[req.method]
		if *op == "" {
			return apiErr("MethodNotAllowed", "")
		}
		if err := onlyParams(req.query, "tagging", "versionId"); err != nil {
			return err
		}
		return g.objectTagging(c, req)
	}
	for _, s := range []struct{ param, get, put string }{
		{"retention", "GetObjectRetention", "PutObjectRetention"},
		{"legal-hold", "GetObjectLegalHold", "PutObjectLegalHold"},
	} {
		if !req.query.Has(s.param) {
			continue
		}
		*op = map[string]string{fiber.MethodGet: s.get, fiber.MethodPut: s.put}[req.method]
		if *op == "" {
			return apiErr("MethodNotAllowed", "")
		}
		if err := onlyParams(req.query, s.param, "versionId"); err != nil {
			return err
		}
		if s.param == "retention" {
			return g.objectRetention(c, req)
		}
		return g.objectLegalHold(c, req)
	}
	if err := onlyParams(req.query, objectParams[req.method]...); err != nil {
		return err
	}
	// NB: ?versionId is checked by each operation against the bucket's
	// versioning (versionIDParam).
	switch req.method {
	case fiber.MethodPut:
		*op = "PutObject"
		if c.Get("x-amz-copy-source") != "" {
			*op = "CopyObject"
		}
		return g.putObject(c, req)
	case fiber.MethodGet:
		if req.query.Has("attributes") {
			*op = "GetObjectAttributes"
			return g.getObjectAttributes(c, req)
		}
		*op = "GetObject"
		return g.getObject(c, req, false)
	case fiber.MethodHead:
		*op = "HeadObject"
		return g.getObject(c, req, true)
	case fiber.MethodDelete:
		*op = "DeleteObject"
		return g.deleteObject(c, req)
	}
	return apiErr("MethodNotAllowed", "")
}

// objectParams are the query parameters each object operation takes
// besides the neutral ones. Any other names a sub-resource regen does not
// have (tagging, retention, attributes, torrent, ...), and must not fall
// through to the plain operation: PUT ?tagging would overwrite the object
// with the tag set's XML, DELETE ?tagging would delete the object.
var objectParams = map[string][]string{
	fiber.MethodGet:    {"partNumber", "versionId", "attributes"},
	fiber.MethodHead:   {"partNumber", "versionId"},
	fiber.MethodDelete: {"versionId"},
}

// writableAsAsked refuses object writes that ask for what regen does not
// do: ACL grants it cannot enforce (requestACL). Storing the object while
// the client believes it writable by anyone would be worse than failing.
// (Server-side encryption and object lock headers are read by each write
// that takes them, sse.go and lockFromHeaders; SSE-KMS is refused there,
// lock headers in a bucket without object lock too.)
func writableAsAsked(c *fiber.Ctx, method string) error {
	if method != fiber.MethodPut && method != fiber.MethodPost {
		return nil
	}
	if _, err := requestACL(c); err != nil {
		return err
	}
	if err := checkChecksumHeaders(c); err != nil {
		return err
	}
	return nil
}

// headerWithPrefix returns the first request header (lower case) whose
// name starts with one of prefixes (lower case), or "".
func headerWithPrefix(c *fiber.Ctx, prefixes ...string) string {
	var found string
	c.Request().Header.VisitAll(func(k, _ []byte) {
		if found != "" {
			return
		}
		h := strings.ToLower(string(k))
		for _, p := range prefixes {
			if strings.HasPrefix(h, p) {
				found = h
				return
			}
		}
	})
	return found
}

// onlyParams returns NotImplemented if q has a parameter that is neither
// in allowed nor neutral: a presigned URL's X-Amz-* signing parameters,
// the x-id operation hint some SDKs add, and GET's response-* overrides.
func onlyParams(q url.Values, allowed ...string) error {
	keys := slices.Sorted(maps.Keys(q))
	for _, k := range keys {
		lk := strings.ToLower(k)
		if slices.Contains(allowed, k) || lk == "x-id" || strings.HasPrefix(lk, "x-amz-") || strings.HasPrefix(lk, "response-") {
			continue
		}
		return apiErr("NotImplemented", fmt.Sprintf("regen does not implement the %q sub-resource or parameter of this request", k))
	}
	return nil
}

func (g *Gateway) routeMultipart(c *fiber.Ctx, req *request, op *string) error {
	switch {
	case req.method == fiber.MethodPost && req.query.Has("uploads"):
		*op = "CreateMultipartUpload"
		return g.createMultipartUpload(c, req)
	case req.method == fiber.MethodPost:
		*op = "CompleteMultipartUpload"
		return g.completeMultipartUpload(c, req)
	case req.method == fiber.MethodPut && c.Get("x-amz-copy-source") != "":
		*op = "UploadPartCopy"
		return g.uploadPart(c, req)
	case req.method == fiber.MethodPut:
		*op = "UploadPart"
		return g.uploadPart(c, req)
	case req.method == fiber.MethodGet:
		*op = "ListParts"
		return g.listParts(c, req)
	case req.method == fiber.MethodDelete:
		*op = "AbortMultipartUpload"
		return g.abortMultipartUpload(c, req)
	}
	return apiErr("MethodNotAllowed", "")
}

// authenticate verifies the request's SigV4 signature.
func (g *Gateway) authenticate(c *fiber.Ctx, req *request, rawPath, rawQuery string) error {
	hdr := http.Header{}
	c.Request().Header.VisitAll(func(k, v []byte) { hdr.Add(string(k), string(v)) })
	ctx, cancel := g.opContext()
	defer cancel()
	creds := &requestCreds{g: g, ctx: ctx}
	v := *g.auth
	v.Creds = creds
	res, err := v.Verify(&sigv4.Request{
		Method: req.method, Path: rawPath, RawQuery: rawQuery,
		Host: string(c.Request().Host()), Header: hdr, Now: time.Now(),
	})
	if err != nil {
		if creds.err != nil {
			return creds.err
		}
		return err
	}
	req.auth, req.who = res, creds.who
	return nil
}

// splitPath turns a raw path-style path into bucket and key. The key is
// unescaped once (S3 clients escape each byte once); '+' stays '+'.
func splitPath(raw string) (string, string, error) {
	p := strings.TrimPrefix(raw, "/")
	b, k, _ := strings.Cut(p, "/")
	bucket, err := url.PathUnescape(b)
	if err != nil {
		return "", "", apiErr("InvalidURI", "cannot unescape bucket name")
	}
	key, err := url.PathUnescape(k)
	if err != nil {
		return "", "", apiErr("InvalidURI", "cannot unescape object key")
	}
	return bucket, key, nil
}

// codeFor picks the code of a new object: the storage class's, else the
// bucket's, else the default.
func (g *Gateway) codeFor(bucketCode, class string) (codec.Code, string, error) {
	name := g.cfg.DefaultCode
	if bucketCode != "" {
		name = bucketCode
	}
	if class != "" && class != "STANDARD" {
		mapped, ok := g.cfg.StorageClasses[class]
		if !ok {
			return nil, "", apiErr("InvalidStorageClass", fmt.Sprintf("storage class %s is not configured", class))
		}
		name = mapped
	} else if mapped, ok := g.cfg.StorageClasses["STANDARD"]; ok && class == "STANDARD" {
		name = mapped
	}
	c, err := g.layer.code(name)
	return c, name, err
}
