package gateway

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/sse"
	"github.com/regen-s3/regen/internal/stripe"
	"github.com/regen-s3/regen/metadata"
)

// Multipart upload limits, as S3's.
const (
	minPartSize = 5 << 20 // every part but the last
	maxPartSize = 5 << 30
)

// uploadErr maps layer errors of upload lookups to S3 errors.
func uploadErr(err error) error {
	if errors.Is(err, errNoUpload) {
		return apiErr("NoSuchUpload", "")
	}
	return err
}

// quorumOf is the write quorum of an upload's records: k+1, capped at n.
func (g *Gateway) quorumOf(u *metadata.Upload) (int, int, error) {
	code, err := g.layer.code(u.Code)
	if err != nil {
		return 0, 0, err
	}
	return min(code.DataShards()+1, len(u.Placement)), code.DataShards(), nil
}

func (g *Gateway) createMultipartUpload(c *fiber.Ctx, req *request) error {
	if len(req.key) > maxKeyLen {
		return apiErr("KeyTooLongError", "Your key is too long")
	}
	m, err := newManifest(c, req.bucket, req.key)
	if err != nil {
		return err
	}
	ask, err := g.askedSSE(c)
	if err != nil {
		return err
	}
	ctx, cancel := g.opContext()
	defer cancel()
	code, seal, err := g.prepareManifest(ctx, m, ask)
	if err != nil {
		return err
	}
	n := code.TotalShards()
	u := &metadata.Upload{
		Bucket: req.bucket, Key: req.key, ID: newFileID() + newFileID()[:8], Initiated: time.Now().UTC(),
		Owner: req.auth.AccessKey, ContentType: m.ContentType, UserMeta: m.UserMeta, Headers: m.Headers,
		StorageClass: m.StorageClass, Code: m.Code, CodecFormat: m.CodecFormat,
		ChunkSize: codec.ChunkSize(code, g.cfg.ChunkSize),
		Placement: g.placeNew(placementKey(req.bucket, req.key), n),
		Checksum:  strings.ToUpper(c.Get("x-amz-checksum-algorithm")),
		ACL:       m.ACL,
		Tags:      m.Tags,
		Lock:      m.Lock,
		SSE:       m.SSE,
	}
	if len(u.Placement) < n {
		return fmt.Errorf("%w: only %d shard servers known, %s needs %d", errUnavailable, len(u.Placement), u.Code, n)
	}
	if err := g.layer.createUpload(ctx, u, min(code.DataShards()+1, n)); err != nil {
		return err
	}
	setSSEHeaders(c, u.SSE, seal)
	return sendXML(c, fiber.StatusOK, InitiateMultipartUploadResult{Bucket: req.bucket, Key: req.key, UploadID: u.ID})
}

// partNumber parses the partNumber query parameter.
func partNumber(req *request) (int, error) {
	n, err := strconv.Atoi(req.query.Get("partNumber"))
	if err != nil || n < 1 || n > MaxPartNumber {
		return 0, apiErr("InvalidArgument", fmt.Sprintf("Part number must be an integer between 1 and %d, inclusive", MaxPartNumber))
	}
	return n, nil
}

// openUpload resolves the request's uploadId.
func (g *Gateway) openUpload(ctx context.Context, req *request) (*metadata.Upload, error) {
	if _, err := g.layer.bucket(ctx, g.buckets, req.bucket); err != nil {
		return nil, bucketErr(err)
	}
	u, err := g.layer.getUpload(ctx, req.bucket, req.key, req.query.Get("uploadId"))
	return u, uploadErr(err)
}

func (g *Gateway) uploadPart(c *fiber.Ctx, req *request) error {
	num, err := partNumber(req)
	if err != nil {
		return err
	}
	if c.Get("x-amz-copy-source") != "" {
		return g.uploadPartCopy(c, req, num)
	}
	size, err := declaredSize(c, req)
	if err != nil {
		return err
	}
	if size > maxPartSize {
		return apiErr("EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.")
	}
	wantMD5, err := contentMD5(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := g.openUpload(ctx, req)
	if err != nil {
		return err
	}
	seal, err := g.sealerFor(c, u.SSE, objectSSE)
	if err != nil {
		return err
	}
	var sums map[string]string
	body, err := g.checkedBody(c, req, size, &sums)
	if err != nil {
		return err
	}
	p, err := g.writePart(ctx, u, num, seal, body, size, wantMD5)
	if err != nil {
		return err
	}
	g.metrics.bytesIn.Add(float64(size))
	setChecksumHeaders(c, p.Checksums)
	setSSEHeaders(c, u.SSE, seal)
	c.Set("ETag", `"`+p.ETag+`"`)
	c.Status(fiber.StatusOK)
	return nil
}

// writePart streams body into the part's own stripe group on the upload's
// placement and records it; an encrypted upload's part is sealed under a
// data key of its own, sealed by seal. The checksums verified while
// reading (if any) are in the returned part.
func (g *Gateway) writePart(ctx context.Context, u *metadata.Upload, num int, seal sse.Sealer, body io.Reader, size int64, wantMD5 []byte) (*metadata.UploadPart, error) {
	code, err := g.layer.code(u.Code)
	if err != nil {
		return nil, err
	}
	p := &metadata.UploadPart{UploadID: u.ID, Number: num, ID: newFileID()}
	m := &metadata.Manifest{Placement: u.Placement, Parts: []metadata.Part{{ID: p.ID}}}
	var sums map[string]string
	if cr, ok := body.(*checksumReader); ok {
		cr.into = &sums
	}
	stored := size
	var sealed *sealing
	if u.SSE != nil {
		if sealed, err = newSealing(seal, body, size); err != nil {
			return nil, err
		}
		body, stored = sealed, sse.SealedSize(size)
	}
	res, err := stripe.Write(ctx, g.layer.shards, stripe.WriteParams{
		Code: code, ChunkSize: u.ChunkSize, FileID: p.ID, Targets: g.layer.targets(u.Placement), Size: stored,
		Buffers: g.writeBufs, NewMD5: g.md5For(stored),
	}, body)
	if err == nil {
		err = drain(body)
	}
	if err != nil {
		if res != nil {
			g.abandon(m, res.OK)
		}
		return nil, bodyErr(err)
	}
	sum, etag := res.MD5, res.MD5
	if sealed != nil {
		sum, etag = sealed.sums(u.SSE.Customer, res.MD5)
		p.SealedKey = sealed.sealedKey
	}
	if wantMD5 != nil && string(wantMD5) != string(sum[:]) {
		g.abandon(m, res.OK)
		return nil, apiErr("BadDigest", "The Content-MD5 you specified did not match what we received.")
	}
	p.Size, p.ETag, p.ShardCRC, p.Checksums = res.Size, hex.EncodeToString(etag[:]), res.ShardCRC, sums
	p.Version = g.layer.clock.next()
	p.Modified = time.Unix(0, p.Version.TS).UTC()
	quorum, _, err := g.quorumOf(u)
	if err != nil {
		return nil, err
	}
	if err := g.layer.putPart(ctx, u, p, quorum); err != nil {
		g.abandon(m, res.OK)
		return nil, err
	}
	return p, nil
}

func (g *Gateway) completeMultipartUpload(c *fiber.Ctx, req *request) error {
	raw, err := g.xmlBody(c, req, md5Only)
	if err != nil {
		return err
	}
	var body CompleteMultipartUpload
	if err := parseXML(raw, &body); err != nil {
		return err
	}
	if err := body.Validate(); err != nil {
		return err
	}
	cond := writeCondOf(c)
	if err := cond.validate(c); err != nil {
		return err
	}
	ctx, cancel := g.opContext()
	defer cancel()
	u, err := g.openUpload(ctx, req)
	if err != nil {
		return err
	}
	quorum, k, err := g.quorumOf(u)
	if err != nil {
		return err
	}
	have, err := g.layer.listParts(ctx, u, k)
	if err != nil {
		return err
	}
	m, err := assemble(u, body.Parts, have)
	if err != nil {
		return err
	}
	keep := make([]string, len(m.Parts))
	for i, p := range m.Parts {
		keep[i] = p.ID
	}
	// The bucket's versioning when the upload completes decides, as in S3.
	state := g.versioningOf(ctx, req.bucket)
	m.Versioned = state == metadata.VersioningEnabled
	if err := g.commit(ctx, m, u.Placement, quorum, cond); err != nil {
		if errors.Is(err, errStayed) {
			// The object is visible with these parts: the upload is
			// over, or an abort (or its expiry) would delete its data.
			g.layer.finishUpload(ctx, u, keep)
		}
		return err
	}
	g.layer.finishUpload(ctx, u, keep)
	if u.SSE != nil && !u.SSE.Customer {
		c.Set(hdrSSE, sseAES256)
	}
	setVersionHeader(c, state, m)
	return sendXML(c, fiber.StatusOK, CompleteMultipartUploadResult{
		Location: "/" + req.bucket + "/" + req.key, Bucket: req.bucket, Key: req.key,
		ETag: `"` + m.ETag + `"`, Checksums: checksumsXML(m.Checksums),
	})
}

// assemble builds the completed object's manifest from the client's part
// list and the stored parts: every listed part must exist with the given
// ETag (InvalidPart), and all but the last must be at least 5 MiB
// (EntityTooSmall). The ETag is the MD5 of the parts' binary MD5s, "-N".
func assemble(u *metadata.Upload, want []CompletePart, have []metadata.UploadPart) (*metadata.Manifest, error) {
	byNum := make(map[int]*metadata.UploadPart, len(have))
	for i := range have {
		byNum[have[i].Number] = &have[i]
	}
	m := &metadata.Manifest{
		Bucket: u.Bucket, Key: u.Key, ContentType: u.ContentType, UserMeta: u.UserMeta, Headers: u.Headers,
		StorageClass: u.StorageClass, Code: u.Code, CodecFormat: u.CodecFormat, ChunkSize: u.ChunkSize,
		Placement: u.Placement, Parts: []metadata.Part{}, ACL: u.ACL, Tags: u.Tags,
		Lock: u.Lock,
	}
	if u.SSE != nil {
		e := *u.SSE
		m.SSE = &e
	}
	for _, w := range want {
		if p := byNum[w.PartNumber]; p == nil || strings.Trim(w.ETag, `" `) != p.ETag {
			return nil, apiErr("InvalidPart", fmt.Sprintf("Part %d was not uploaded or its ETag does not match.", w.PartNumber))
		}
	}
	etags := md5.New()
	for i, w := range want {
		p := byNum[w.PartNumber]
		part := metadata.Part{Number: p.Number, ID: p.ID, Size: p.Size, ETag: p.ETag, ShardCRC: p.ShardCRC, Checksums: p.Checksums, SealedKey: p.SealedKey}
		if (m.SSE != nil) != (p.SealedKey != nil) {
			return nil, apiErr("InvalidPart", fmt.Sprintf("Part %d was not uploaded with the upload's encryption.", p.Number))
		}
		plain := partPlainSize(part)
		if i < len(want)-1 && plain < minPartSize {
			return nil, apiErr("EntityTooSmall", fmt.Sprintf("Part %d is %d bytes; every part but the last must be at least 5 MiB.", p.Number, plain))
		}
		raw, _ := hex.DecodeString(p.ETag)
		etags.Write(raw)
		m.Size += plain
		if m.SSE != nil {
			m.SSE.Overhead += p.Size - plain
		}
		m.Parts = append(m.Parts, part)
	}
	if m.Size > maxObjectSize {
		return nil, apiErr("EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.")
	}
	m.ETag = hex.EncodeToString(etags.Sum(nil)) + "-" + strconv.Itoa(len(want))
	m.Checksums = compositeChecksums(u.Checksum, want, byNum)
	return m, nil
}

// compositeChecksums is S3's checksum of a multipart object: the checksum
// of the concatenated binary part checksums, "-N". Only when every part
// carries one of the upload's algorithm.
func compositeChecksums(algo string, want []CompletePart, byNum map[int]*metadata.UploadPart) map[string]string {
	newHash, ok := checksumAlgos[algo]
	if !ok {
		return nil
	}
	h := newHash()
	for _, w := range want {
		v, ok := byNum[w.PartNumber].Checksums[algo]
		if !ok {
			return nil
		}
		raw, err := decodeB64(v)
		if err != nil {
			return nil
		}
		h.Write(raw)
	}
	return map[string]string{algo: encodeB64(h.Sum(nil)) + "-" + strconv.Itoa(len(want))}
}

func (g *Gateway) abortMultipartUpload(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	u, err := g.openUpload(ctx, req)
	if err != nil {
		return err
	}
	if g.layer.finishUpload(ctx, u, nil) == 0 {
		return errUnavailable
	}
	c.Status(fiber.StatusNoContent)
	return nil
}

func (g *Gateway) listParts(c *fiber.Ctx, req *request) error {
	maxParts, marker := 1000, 0
	if v := req.query.Get("max-parts"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return apiErr("InvalidArgument", "max-parts must be a non-negative integer")
		}
		maxParts = min(n, 1000)
	}
	if v := req.query.Get("part-number-marker"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return apiErr("InvalidArgument", "part-number-marker must be a non-negative integer")
		}
		marker = n
	}
	ctx, cancel := g.opContext()
	defer cancel()
	u, err := g.openUpload(ctx, req)
	if err != nil {
		return err
	}
	_, k, err := g.quorumOf(u)
	if err != nil {
		return err
	}
	parts, err := g.layer.listParts(ctx, u, k)
	if err != nil {
		return err
	}
	owner := &CanonicalUser{ID: u.Owner, DisplayName: u.Owner}
	out := ListPartsResult{
		Bucket: req.bucket, Key: req.key, UploadID: u.ID, Initiator: owner, Owner: owner,
		StorageClass: u.StorageClass, PartNumberMarker: marker, MaxParts: maxParts, ChecksumAlgorithm: u.Checksum,
	}
	if u.Checksum != "" {
		out.ChecksumType = "COMPOSITE"
	}
	for _, p := range parts {
		if p.Number <= marker {
			continue
		}
		if len(out.Parts) == maxParts {
			out.IsTruncated = true
			break
		}
		out.Parts = append(out.Parts, PartEntry{
			PartNumber: p.Number, LastModified: ts(p.Modified), ETag: `"` + p.ETag + `"`, Size: partPlainSize(metadata.Part{Size: p.Size, SealedKey: p.SealedKey}),
			Checksums: checksumsXML(p.Checksums),
		})
		out.NextPartNumberMarker = p.Number
	}
	return sendXML(c, fiber.StatusOK, out)
}

func (g *Gateway) listMultipartUploads(c *fiber.Ctx, req *request) error {
	q := req.query
	maxUploads := 1000
	if v := q.Get("max-uploads"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return apiErr("InvalidArgument", "max-uploads must be a non-negative integer")
		}
		maxUploads = min(n, 1000)
	}
	encode := q.Get("encoding-type") == "url"
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	ctx, cancel := g.opContext()
	defer cancel()
	if _, err := g.layer.bucket(ctx, g.buckets, req.bucket); err != nil {
		return bucketErr(err)
	}
	uq := metadata.UploadQuery{Bucket: req.bucket, Prefix: prefix, KeyMarker: q.Get("key-marker"), IDMarker: q.Get("upload-id-marker")}
	us, truncated, err := g.layer.listUploads(ctx, uq, maxUploads)
	if err != nil {
		return err
	}
	out := ListMultipartUploadsResult{
		Bucket: req.bucket, KeyMarker: s3Escape(uq.KeyMarker, encode), UploadIDMarker: uq.IDMarker,
		Prefix: s3Escape(prefix, encode), Delimiter: s3Escape(delim, encode), MaxUploads: maxUploads, IsTruncated: truncated,
	}
	if encode {
		out.EncodingType = "url"
	}
	seen := map[string]bool{}
	for _, u := range us {
		if delim != "" {
			if i := strings.Index(u.Key[len(prefix):], delim); i >= 0 {
				cp := u.Key[:len(prefix)+i+len(delim)]
				if !seen[cp] {
					seen[cp] = true
					out.CommonPrefixes = append(out.CommonPrefixes, PrefixEntry{Prefix: s3Escape(cp, encode)})
				}
				continue
			}
		}
		owner := &CanonicalUser{ID: u.Owner, DisplayName: u.Owner}
		out.Uploads = append(out.Uploads, UploadEntry{
			Key: s3Escape(u.Key, encode), UploadID: u.ID, Initiator: owner, Owner: owner,
			StorageClass: u.StorageClass, Initiated: ts(u.Initiated), ChecksumAlgorithm: u.Checksum,
		})
	}
	if truncated && len(us) > 0 {
		last := us[len(us)-1]
		out.NextKeyMarker, out.NextUploadIDMarker = s3Escape(last.Key, encode), last.ID
	}
	return sendXML(c, fiber.StatusOK, out)
}
