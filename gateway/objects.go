package gateway

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/placement"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/sigv4"
	"github.com/regen-s3/regen/internal/sse"
	"github.com/regen-s3/regen/internal/stripe"
	"github.com/regen-s3/regen/metadata"
)

const (
	maxKeyLen     = 1024
	maxObjectSize = 5 << 40 // 5 TiB, S3's limit for one object
	maxMetaSize   = 2 << 10 // user metadata, as S3
)

// storedHeaders round-trip from PUT to GET as sent.
var storedHeaders = []string{"Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language", "Expires"}

// opContext bounds the metadata work of one operation (Config.OpTimeout).
func (g *Gateway) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), g.cfg.OpTimeout)
}

// bodyReader returns the request body, decoded from aws-chunked and checked
// against x-amz-content-sha256 as the signature demands.
func (g *Gateway) bodyReader(c *fiber.Ctx, req *request, size int64) io.Reader {
	var raw io.Reader = c.Context().RequestBodyStream()
	if raw == nil {
		// NB: the raw body (at most the 1 MiB BodyLimit, already read),
		// never c.Body(): fiber's Body decodes Content-Encoding without
		// a limit.
		raw = bytes.NewReader(c.Request().Body())
	}
	ph := req.auth.PayloadHash
	switch {
	case sigv4.IsStreaming(ph):
		if size >= 0 {
			return sigv4.NewChunkedReader(raw, req.auth, sigv4.WithDecodedLength(size))
		}
		return sigv4.NewChunkedReader(raw, req.auth)
	case ph == "" || ph == "UNSIGNED-PAYLOAD":
		return raw
	default:
		return sigv4.NewSHA256Reader(raw, ph)
	}
}

// declaredSize is the object size the client announced.
func declaredSize(c *fiber.Ctx, req *request) (int64, error) {
	h := c.Get("x-amz-decoded-content-length")
	if h == "" {
		if sigv4.IsStreaming(req.auth.PayloadHash) {
			return 0, apiErr("MissingContentLength", "aws-chunked uploads need x-amz-decoded-content-length")
		}
		n := c.Request().Header.ContentLength()
		if n < 0 {
			return 0, apiErr("MissingContentLength", "You must provide the Content-Length HTTP header.")
		}
		return int64(n), nil
	}
	n, err := strconv.ParseInt(h, 10, 64)
	if err != nil || n < 0 {
		return 0, apiErr("InvalidArgument", "bad x-amz-decoded-content-length")
	}
	return n, nil
}

func newFileID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (g *Gateway) putObject(c *fiber.Ctx, req *request) error {
	if c.Get("x-amz-copy-source") != "" {
		return g.copyObject(c, req)
	}
	if len(req.key) > maxKeyLen {
		return apiErr("KeyTooLongError", "Your key is too long")
	}
	size, err := declaredSize(c, req)
	if err != nil {
		return err
	}
	if size > maxObjectSize {
		return apiErr("EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.")
	}
	wantMD5, err := contentMD5(c)
	if err != nil {
		return err
	}
	m, err := newManifest(c, req.bucket, req.key)
	if err != nil {
		return err
	}
	if err := lockDigestRequired(c, m.Lock); err != nil {
		return err
	}
	ask, err := g.askedSSE(c)
	if err != nil {
		return err
	}
	cond := writeCondOf(c)
	if err := cond.validate(c); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code, seal, err := g.prepareManifest(ctx, m, ask)
	if err != nil {
		return err
	}
	if err := g.precheck(ctx, m.Bucket, m.Key, cond); err != nil {
		return err
	}
	body, err := g.checkedBody(c, req, size, &m.Checksums)
	if err != nil {
		return err
	}
	if err := g.storeObject(ctx, req, m, code, seal, body, size, wantMD5, cond); err != nil {
		return err
	}
	setVersionHeader(c, g.versioningOf(ctx, m.Bucket), m)
	g.metrics.bytesIn.Add(float64(size))
	setChecksumHeaders(c, m.Checksums)
	setSSEHeaders(c, m.SSE, seal)
	c.Set("ETag", `"`+m.ETag+`"`)
	c.Status(fiber.StatusOK)
	return nil
}

// contentMD5 decodes the Content-MD5 header, nil if absent.
func contentMD5(c *fiber.Ctx) ([]byte, error) {
	h := c.Get("Content-MD5")
	if h == "" {
		return nil, nil
	}
	want, err := base64.StdEncoding.DecodeString(h)
	if err != nil || len(want) != md5.Size {
		return nil, apiErr("InvalidDigest", "The Content-MD5 you specified is not valid.")
	}
	return want, nil
}

// newManifest starts the manifest of a new object from the request's
// content type, storage class, user metadata and stored headers.
func newManifest(c *fiber.Ctx, bucket, key string) (*metadata.Manifest, error) {
	m := &metadata.Manifest{
		Bucket: bucket, Key: key,
		ContentType:  c.Get("Content-Type"),
		StorageClass: c.Get("x-amz-storage-class"),
	}
	var err error
	if m.UserMeta, err = userMeta(c); err != nil {
		return nil, err
	}
	if m.ACL, err = requestACL(c); err != nil {
		return nil, err
	}
	if m.Tags, err = tagsFromHeader(c.Get("x-amz-tagging")); err != nil {
		return nil, err
	}
	if m.Lock, err = lockFromHeaders(c, time.Now()); err != nil {
		return nil, err
	}
	m.Headers = storedHeaderValues(c)
	return m, nil
}

// userMeta collects x-amz-meta-* headers (names lowercased, prefix cut).
func userMeta(c *fiber.Ctx) (map[string]string, error) {
	meta := map[string]string{}
	size := 0
	c.Request().Header.VisitAll(func(k, v []byte) {
		name := strings.ToLower(string(k))
		if key, ok := strings.CutPrefix(name, "x-amz-meta-"); ok {
			meta[key] = string(v)
			size += len(key) + len(v)
		}
	})
	if size > maxMetaSize {
		return nil, apiErr("MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size.")
	}
	return meta, nil
}

func storedHeaderValues(c *fiber.Ctx) map[string]string {
	h := map[string]string{}
	for _, name := range storedHeaders {
		if v := c.Get(name); v != "" {
			h[name] = v
		}
	}
	return h
}

// prepareManifest checks the bucket, picks the object's code and its
// encryption (what ask says, else the bucket's default), and returns the
// sealer of its data keys (nil: not encrypted).
func (g *Gateway) prepareManifest(ctx context.Context, m *metadata.Manifest, ask sseAsk) (codec.Code, sse.Sealer, error) {
	b, err := g.layer.bucket(ctx, g.buckets, m.Bucket)
	if err != nil {
		return nil, nil, bucketErr(err)
	}
	if err := checkACLAllowed(&b, m.ACL); err != nil {
		return nil, nil, err
	}
	// NB: m.Lock holds what the request asked (lockFromHeaders); the
	// bucket decides whether it may and what the default is.
	if err := applyBucketLock(&b, m, m.Lock, time.Now()); err != nil {
		return nil, nil, err
	}
	code, codeName, err := g.codeFor(b.Code, m.StorageClass)
	if err != nil {
		return nil, nil, err
	}
	var seal sse.Sealer
	if m.SSE, seal, err = g.writeEncryption(ask, b.Encryption); err != nil {
		return nil, nil, err
	}
	if m.StorageClass == "" {
		m.StorageClass = "STANDARD"
	}
	m.Code, m.CodecFormat = codeName, codec.FormatVersion
	m.Versioned = b.Versioning == metadata.VersioningEnabled
	return code, seal, nil
}

// storeObject streams body (size bytes) into a new version of the object m
// describes: inline or striped, checked against wantMD5 if set, then its
// manifest written (under the key's lease when cond is set). On error
// nothing becomes visible. An encrypted object (m.SSE, its data key sealed
// by seal) is never inline: its manifest holds no data.
func (g *Gateway) storeObject(ctx context.Context, req *request, m *metadata.Manifest, code codec.Code, seal sse.Sealer, body io.Reader, size int64, wantMD5 []byte, cond *writeCond) error {
	var sum [md5.Size]byte
	var ok []bool
	var err error
	var sealed *sealing
	if m.SSE != nil && size > 0 {
		if sealed, err = newSealing(seal, body, size); err != nil {
			return err
		}
		body = sealed
	}
	if size <= g.cfg.InlineMax && sealed == nil {
		sum, err = g.readInline(req, body, size, m)
	} else if sealed != nil {
		sum, ok, err = g.writeStriped(ctx, body, sse.SealedSize(size), code, m)
	} else {
		sum, ok, err = g.writeStriped(ctx, body, size, code, m)
	}
	if err == nil {
		err = drain(body)
	}
	if err != nil {
		g.abandon(m, ok)
		return err
	}
	etag := sum
	if sealed != nil {
		sum, etag = sealed.sums(m.SSE.Customer, sum)
		m.SSE.Overhead = m.Size - size
		m.Size = size
		m.Parts[0].SealedKey = sealed.sealedKey
	}
	if wantMD5 != nil && !bytes.Equal(wantMD5, sum[:]) {
		g.abandon(m, ok)
		return apiErr("BadDigest", "The Content-MD5 you specified did not match what we received.")
	}
	m.ETag = hex.EncodeToString(etag[:])
	holders := m.Placement
	if ok != nil {
		holders = nil
		for i, good := range ok {
			if good {
				holders = append(holders, m.Placement[i])
			}
		}
	}
	quorum := min(code.DataShards()+1, len(m.Placement))
	if err := g.commit(ctx, m, holders, quorum, cond); err != nil {
		// NB: a write that stayed (errStayed) keeps its shards: its
		// manifest is visible, and the shards are its data.
		if !errors.Is(err, errStayed) {
			g.abandon(m, ok)
		}
		return err
	}
	return nil
}

// drain reads body to its end once the announced bytes are in, so that
// what is checked at EOF (aws-chunked trailers and their signature,
// trailing checksums) is checked before anything is committed.
func drain(body io.Reader) error {
	n, err := io.Copy(io.Discard, io.LimitReader(body, 1))
	if err != nil {
		return bodyErr(err)
	}
	if n > 0 {
		return apiErr("IncompleteBody", "The request body is longer than its declared length.")
	}
	return nil
}

// readInline reads a small object into its manifest.
func (g *Gateway) readInline(req *request, body io.Reader, size int64, m *metadata.Manifest) ([md5.Size]byte, error) {
	data, err := g.bodyMem.read(req, body, size, size)
	if errors.Is(err, errBodyTooLarge) {
		return [md5.Size]byte{}, apiErr("IncompleteBody", "The request body is longer than its declared length.")
	}
	if err != nil {
		return [md5.Size]byte{}, bodyErr(err)
	}
	if int64(len(data)) != size {
		return [md5.Size]byte{}, apiErr("IncompleteBody", fmt.Sprintf("got %d of %d bytes", len(data), size))
	}
	m.Inline, m.Size = data, size
	code, err := g.layer.code(m.Code)
	if err != nil {
		return [md5.Size]byte{}, err
	}
	m.Placement = g.layer.newPlacement(placementKey(m.Bucket, m.Key))
	m.Placement = m.Placement[:min(len(m.Placement), code.TotalShards())]
	if len(m.Placement) < min(code.DataShards()+1, code.TotalShards()) {
		return [md5.Size]byte{}, fmt.Errorf("%w: %d shard servers alive, a %s object needs %d", errUnavailable, len(m.Placement), m.Code, code.DataShards()+1)
	}
	if m.Inline == nil {
		m.Inline = []byte{}
	}
	return md5.Sum(data), nil
}

// writeStriped streams the body into a new stripe group and fills in the
// manifest's placement and part.
func (g *Gateway) writeStriped(ctx context.Context, body io.Reader, size int64, code codec.Code, m *metadata.Manifest) ([md5.Size]byte, []bool, error) {
	m.Placement = g.placeNew(placementKey(m.Bucket, m.Key), code.TotalShards())
	if len(m.Placement) < code.TotalShards() {
		return [md5.Size]byte{}, nil, fmt.Errorf("%w: only %d shard servers known, %s needs %d", errUnavailable, len(m.Placement), m.Code, code.TotalShards())
	}
	m.ChunkSize = codec.ChunkSize(code, g.cfg.ChunkSize)
	fileID := newFileID()
	res, err := stripe.Write(ctx, g.layer.shards, stripe.WriteParams{
		Code: code, ChunkSize: m.ChunkSize, FileID: fileID,
		Targets: g.layer.targets(m.Placement), Size: size, Buffers: g.writeBufs,
		NewMD5: g.md5For(size),
	}, body)
	if err != nil {
		m.Parts = []metadata.Part{{ID: fileID}}
		if res != nil {
			g.abandon(m, res.OK)
		}
		return [md5.Size]byte{}, nil, bodyErr(err)
	}
	m.Size = res.Size
	m.Parts = []metadata.Part{{Number: 1, ID: fileID, Size: res.Size, ShardCRC: res.ShardCRC}}
	return res.MD5, res.OK, nil
}

// placeNew chooses the servers of a new stripe group: the first n live
// servers in the key's rendezvous order (draining ones last, see
// newPlacement); when fewer are alive, known dead servers fill the
// remaining slots so the stripe keeps n distinct owners and their shards
// count as missing until repaired.
func (g *Gateway) placeNew(key string, n int) []string {
	out := g.layer.newPlacement(key)
	if len(out) >= n {
		return out[:n]
	}
	var dead []string
	for _, mb := range g.layer.nodes.Members() {
		if mb.Role == "shard" && !mb.Alive() {
			dead = append(dead, mb.ID)
		}
	}
	out = append(out, placement.Order(key, dead)...)
	return out[:min(n, len(out))]
}

// abandon deletes the shard files a failed PUT left behind. It runs in the
// background: the client's answer does not wait for cleanup, and the shard
// servers' orphan sweep removes whatever this misses. Every position is
// deleted, not only those ok says were stored: a server may have
// committed a shard whose answer the failed write never read (deleting
// an absent shard succeeds).
func (g *Gateway) abandon(m *metadata.Manifest, ok []bool) {
	if len(m.Parts) == 0 || ok == nil {
		return
	}
	targets := g.layer.targets(m.Placement)
	fileID := m.Parts[0].ID
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := range ok {
			if targets[i].Addr != "" {
				if err := g.layer.shards.DeleteShard(ctx, targets[i].Addr, fileID, i); err != nil && ok[i] {
					g.log.Warn("abandoned shard not deleted; orphan sweep will", "file", fileID, "shard", i, "err", err)
				}
			}
		}
	}()
}

func (g *Gateway) deleteObject(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	if b.Versioning != "" {
		return g.deleteInVersioned(c, req, &b)
	}
	if _, _, err := versionIDParam(req, b.Versioning); err != nil {
		return err
	}
	if err := g.deleteKey(ctx, req.bucket, req.key); err != nil {
		return err
	}
	c.Status(fiber.StatusNoContent)
	return nil
}

// deleteKey writes a tombstone over the key's current version, on a
// write quorum of its placement, before it reports success; deleting a
// key that is provably absent succeeds, as in S3. When too few servers
// answer to tell, it fails with errUnavailable (503), never with a
// success that did nothing.
func (g *Gateway) deleteKey(ctx context.Context, bucket, key string) error {
	return g.layer.fenced(ctx, func() error {
		m, err := g.layer.readHead(ctx, bucket, key)
		if errors.Is(err, errNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		tomb := g.layer.tombstone(m)
		return g.layer.writeManifest(ctx, tomb, m.Placement, g.layer.writeQuorum(m), shardrpc.NoLease)
	})
}

// bodyErr maps errors met while reading a request body.
func bodyErr(err error) error {
	var se *sigv4.Error
	switch {
	case errors.As(err, &se):
		return err
	case isTimeout(err):
		return ErrRequestTimeout.With("")
	case errors.Is(err, stripe.ErrSize), errors.Is(err, io.ErrUnexpectedEOF):
		return apiErr("IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header.")
	}
	return err
}
