package gateway

import (
	"bytes"
	"crypto/md5"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// Request bodies the gateway reads whole (the XML documents of PUT ?acl,
// CreateBucket, DeleteObjects, CompleteMultipartUpload, CORS, tagging and
// ownership controls, and the JSON of PUT ?policy) all go through
// wholeBody: at most maxRequestXML bytes (20 KiB for a policy) are read,
// whatever the client declares, and never more are buffered. Content-Encoding is not decoded
// (S3 takes request bodies as sent; a gzip body is malformed XML, never a
// decompression bomb), and fiber's Ctx.Body, which decodes it without a
// limit, is never called. Objects stream (bodyReader).

// xmlDigests says which digests an XML body is checked against.
type xmlDigests int

const (
	// bodyDigests: Content-MD5 and x-amz-checksum-* when given.
	bodyDigests xmlDigests = iota
	// requiredDigests: one of them must be given (S3's DeleteObjects).
	requiredDigests
	// md5Only: Content-MD5 when given; x-amz-checksum-* describe
	// something else (CompleteMultipartUpload: the whole object's).
	md5Only
)

// xmlBody reads a request's XML body whole (at most maxRequestXML bytes),
// decoded from aws-chunked and checked against x-amz-content-sha256, then
// against the digests d names. An empty body is returned as nil.
func (g *Gateway) xmlBody(c *fiber.Ctx, req *request, d xmlDigests) ([]byte, error) {
	b, err := g.wholeBody(c, req, d, maxRequestXML)
	if errors.Is(err, errBodyTooLarge) {
		return nil, ErrMalformedXML.With("The XML you provided was larger than the maximum allowed size.")
	}
	return b, err
}

// errBodyTooLarge is wholeBody's answer to a body past its limit; each
// caller says it in its operation's S3 error.
var errBodyTooLarge = errors.New("request body larger than its limit")

// wholeBody reads a request body the gateway keeps in memory (an XML
// document, a bucket policy): at most limit bytes, whatever the client
// declares, decoded from aws-chunked and checked against
// x-amz-content-sha256, then against the digests d names. A longer body
// is errBodyTooLarge. An empty body is returned as nil.
func (g *Gateway) wholeBody(c *fiber.Ctx, req *request, d xmlDigests, limit int) ([]byte, error) {
	wantMD5, err := contentMD5(c)
	if err != nil {
		return nil, err
	}
	if err := checkChecksumHeaders(c); err != nil {
		return nil, err
	}
	var body io.Reader
	if d == md5Only {
		body = g.bodyReader(c, req, -1)
	} else {
		algo, _, _, err := requestedChecksum(c)
		if err != nil {
			return nil, err
		}
		if d == requiredDigests && wantMD5 == nil && algo == "" {
			return nil, ErrInvalidRequest.With("Missing required header for this request: Content-MD5")
		}
		var sums map[string]string
		if body, err = g.checkedBody(c, req, -1, &sums); err != nil {
			return nil, err
		}
	}
	// NB: reading to EOF (within the limit) is what runs the
	// x-amz-content-sha256 and checksum checks.
	b, err := g.bodyMem.read(req, body, int64(limit), bodySizeHint(c))
	if err != nil {
		return nil, bodyErr(err) // errBodyTooLarge and SlowDown as they are
	}
	if wantMD5 != nil {
		if sum := md5.Sum(b); !bytes.Equal(sum[:], wantMD5) {
			return nil, ErrBadDigest.With("The Content-MD5 you specified did not match what we received.")
		}
	}
	if len(b) == 0 {
		return nil, nil
	}
	return b, nil
}

// bodySizeHint is the body size a request declares (decoded, for
// aws-chunked), or -1.
func bodySizeHint(c *fiber.Ctx) int64 {
	if v := c.Get("x-amz-decoded-content-length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return n
		}
		return -1
	}
	return int64(max(c.Request().Header.ContentLength(), -1))
}

// decodeXMLBody reads the request's XML body (xmlBody, digests checked
// when given) and parses it into v.
func (g *Gateway) decodeXMLBody(c *fiber.Ctx, req *request, v any) error {
	b, err := g.xmlBody(c, req, bodyDigests)
	if err != nil {
		return err
	}
	return parseXML(b, v)
}

// parseXML parses a request document read by xmlBody. Any failure is
// MalformedXML, which is what S3 answers; an empty body is
// MissingRequestBodyError.
func parseXML(b []byte, v any) error {
	if len(b) == 0 {
		return ErrMissingRequestBodyError.With("")
	}
	if err := xml.Unmarshal(b, v); err != nil {
		return ErrMalformedXML.With("")
	}
	return nil
}

// knownChecksumHeaders are the x-amz-checksum-* headers that name no
// algorithm: they say which to use or how, not a value.
var knownChecksumHeaders = []string{"x-amz-checksum-algorithm", "x-amz-checksum-mode", "x-amz-checksum-type"}

// checkChecksumHeaders refuses a request that asks for a checksum regen
// does not compute: an unknown algorithm in x-amz-checksum-algorithm
// (or the SDKs' x-amz-sdk-checksum-algorithm), or a value header for one.
// Storing it would leave the client believing its data was checked.
func checkChecksumHeaders(c *fiber.Ctx) error {
	for _, h := range []string{"x-amz-checksum-algorithm", "x-amz-sdk-checksum-algorithm"} {
		if v := c.Get(h); v != "" {
			if _, ok := checksumAlgos[strings.ToUpper(v)]; !ok {
				return ErrInvalidRequest.With("Value for " + h + " header is invalid.")
			}
		}
	}
	var bad string
	c.Request().Header.VisitAll(func(k, _ []byte) {
		name := strings.ToLower(string(k))
		algo, ok := strings.CutPrefix(name, "x-amz-checksum-")
		if !ok || bad != "" {
			return
		}
		for _, known := range knownChecksumHeaders {
			if name == known {
				return
			}
		}
		if _, ok := checksumAlgos[strings.ToUpper(algo)]; !ok {
			bad = name
		}
	})
	if bad != "" {
		return ErrInvalidRequest.With("The checksum header " + bad + " names an algorithm regen does not support (CRC32, CRC32C, CRC64NVME, SHA1, SHA256).")
	}
	return nil
}

// isTimeout reports whether a body read failed because the client went
// silent past the guard's read deadline (Limits.ReadTimeout). Shard
// timeouts are context deadlines or dial timeouts, never this.
func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}
