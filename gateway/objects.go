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
	"github.com/regen-s3/regen/internal/sigv4"
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

// opContext bounds the metadata work of one request.
func (g *Gateway) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// bodyReader returns the request body, decoded from aws-chunked and checked
// against x-amz-content-sha256 as the signature demands.
func (g *Gateway) bodyReader(c *fiber.Ctx, req *request, size int64) io.Reader {
	var raw io.Reader = c.Context().RequestBodyStream()
	if raw == nil {
		raw = bytes.NewReader(c.Body())
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
		return apiErr("NotImplemented", "CopyObject is not supported yet")
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
	var wantMD5 []byte
	if h := c.Get("Content-MD5"); h != "" {
		if wantMD5, err = base64.StdEncoding.DecodeString(h); err != nil || len(wantMD5) != md5.Size {
			return apiErr("InvalidDigest", "The Content-MD5 you specified is not valid.")
		}
	}
	m := &metadata.Manifest{
		Bucket: req.bucket, Key: req.key,
		ContentType:  c.Get("Content-Type"),
		StorageClass: c.Get("x-amz-storage-class"),
		UserMeta:     map[string]string{},
		Headers:      map[string]string{},
	}
	metaSize := 0
	c.Request().Header.VisitAll(func(k, v []byte) {
		name := strings.ToLower(string(k))
		if meta, ok := strings.CutPrefix(name, "x-amz-meta-"); ok {
			m.UserMeta[meta] = string(v)
			metaSize += len(meta) + len(v)
		}
	})
	if metaSize > maxMetaSize {
		return apiErr("MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size.")
	}
	for _, h := range storedHeaders {
		if v := c.Get(h); v != "" {
			m.Headers[h] = v
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	code, codeName, err := g.codeFor(b.Code, m.StorageClass)
	if err != nil {
		return err
	}
	if m.StorageClass == "" {
		m.StorageClass = "STANDARD"
	}
	m.Code, m.CodecFormat = codeName, codec.FormatVersion

	body := g.bodyReader(c, req, size)
	var sum [md5.Size]byte
	var ok []bool
	if size <= g.cfg.InlineMax {
		sum, err = g.readInline(body, size, m)
	} else {
		sum, ok, err = g.writeStriped(ctx, body, size, code, m)
	}
	if err != nil {
		return err
	}
	g.metrics.bytesIn.Add(float64(size))
	if wantMD5 != nil && !bytes.Equal(wantMD5, sum[:]) {
		g.abandon(m, ok)
		return apiErr("BadDigest", "The Content-MD5 you specified did not match what we received.")
	}
	m.ETag = hex.EncodeToString(sum[:])
	m.Version = g.layer.clock.next()
	m.Modified = time.Unix(0, m.Version.TS).UTC()
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
	if err := g.layer.writeManifest(ctx, m, holders, quorum); err != nil {
		g.abandon(m, ok)
		return err
	}
	c.Set("ETag", `"`+m.ETag+`"`)
	c.Status(fiber.StatusOK)
	return nil
}

// readInline reads a small object into its manifest.
func (g *Gateway) readInline(body io.Reader, size int64, m *metadata.Manifest) ([md5.Size]byte, error) {
	data, err := io.ReadAll(io.LimitReader(body, size+1))
	if err != nil {
		return [md5.Size]byte{}, bodyErr(err)
	}
	if int64(len(data)) != size {
		return [md5.Size]byte{}, apiErr("IncompleteBody", fmt.Sprintf("got %d of %d bytes", len(data), size))
	}
	m.Inline, m.Size = data, size
	ids, _ := g.layer.liveShards()
	code, err := g.layer.code(m.Code)
	if err != nil {
		return [md5.Size]byte{}, err
	}
	m.Placement = placement.Order(placementKey(m.Bucket, m.Key), ids)
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
	mult := int64(code.ShardMultiple())
	m.ChunkSize = (g.cfg.ChunkSize + mult - 1) / mult * mult
	fileID := newFileID()
	res, err := stripe.Write(ctx, g.layer.shards, stripe.WriteParams{
		Code: code, ChunkSize: m.ChunkSize, FileID: fileID,
		Targets: g.layer.targets(m.Placement), Size: size,
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
// servers in the key's rendezvous order; when fewer are alive, known dead
// servers fill the remaining slots so the stripe keeps n distinct owners
// and their shards count as missing until repaired.
func (g *Gateway) placeNew(key string, n int) []string {
	live, _ := g.layer.liveShards()
	out := placement.Order(key, live)
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
// servers' orphan sweep removes whatever this misses.
func (g *Gateway) abandon(m *metadata.Manifest, ok []bool) {
	if len(m.Parts) == 0 || ok == nil {
		return
	}
	targets := g.layer.targets(m.Placement)
	fileID := m.Parts[0].ID
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i, good := range ok {
			if good && targets[i].Addr != "" {
				if err := g.layer.shards.DeleteShard(ctx, targets[i].Addr, fileID, i); err != nil {
					g.log.Warn("abandoned shard not deleted; orphan sweep will", "file", fileID, "shard", i, "err", err)
				}
			}
		}
	}()
}

func (g *Gateway) deleteObject(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	if _, err := g.layer.bucket(ctx, g.buckets, req.bucket); err != nil {
		return bucketErr(err)
	}
	m, err := g.layer.readManifest(ctx, req.bucket, req.key)
	if errors.Is(err, errNotFound) {
		c.Status(fiber.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	tomb := &metadata.Manifest{
		Bucket: m.Bucket, Key: m.Key, Version: g.layer.clock.next(), Deleted: true,
		Code: m.Code, Placement: m.Placement, Modified: time.Now().UTC(),
	}
	quorum := len(m.Placement)/2 + 1
	if code, err := g.layer.code(m.Code); err == nil {
		quorum = min(code.DataShards()+1, len(m.Placement))
	}
	if err := g.layer.writeManifest(ctx, tomb, m.Placement, quorum); err != nil {
		return err
	}
	c.Status(fiber.StatusNoContent)
	return nil
}

// bodyErr maps errors met while reading a request body.
func bodyErr(err error) error {
	var se *sigv4.Error
	switch {
	case errors.As(err, &se):
		return err
	case errors.Is(err, stripe.ErrSize), errors.Is(err, io.ErrUnexpectedEOF):
		return apiErr("IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header.")
	}
	return err
}
