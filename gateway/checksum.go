package gateway

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/sigv4"
)

// S3 additional checksums (x-amz-checksum-*): the client sends the value
// in a header, or names it in x-amz-trailer and sends it after an
// aws-chunked body. Either way it is checked as the body streams through
// and stored in the manifest, so GET and HEAD can return it with
// x-amz-checksum-mode: ENABLED.

// checksumAlgos maps S3's algorithm names to hash constructors.
var checksumAlgos = map[string]func() hash.Hash{
	"CRC32":     func() hash.Hash { return crc32.NewIEEE() },
	"CRC32C":    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	"CRC64NVME": func() hash.Hash { return crc64.New(crc64.MakeTable(crc64NVMEPoly)) },
	"SHA1":      sha1.New,
	"SHA256":    sha256.New,
}

// crc64NVMEPoly is the CRC-64/NVME polynomial in reversed form (Go's
// crc64 tables are reflected; the init and final inversion match).
const crc64NVMEPoly = 0x9a6c9329ac4bc9b5

func checksumHeader(algo string) string { return "x-amz-checksum-" + strings.ToLower(algo) }

// checksumReader hashes a body and, at EOF, compares the digest with the
// value the client sent (in a header, or in the aws-chunked trailer).
type checksumReader struct {
	r       io.Reader
	algo    string
	h       hash.Hash
	want    string // base64; empty: take it from the trailer
	trailer *sigv4.ChunkedReader
	into    *map[string]string
	done    bool
}

func (cr *checksumReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	cr.h.Write(p[:n])
	if err == io.EOF && !cr.done {
		cr.done = true
		if verr := cr.verify(); verr != nil {
			return n, verr
		}
	}
	return n, err
}

func (cr *checksumReader) verify() error {
	got := base64.StdEncoding.EncodeToString(cr.h.Sum(nil))
	want := cr.want
	if want == "" && cr.trailer != nil {
		want = cr.trailer.Trailers().Get(checksumHeader(cr.algo))
	}
	if want == "" {
		// Announced in x-amz-trailer but never sent.
		return apiErr("InvalidRequest", "The "+checksumHeader(cr.algo)+" trailer is missing.")
	}
	if want != got {
		return apiErr("BadDigest", "The "+cr.algo+" you specified did not match the calculated checksum.")
	}
	if *cr.into == nil {
		*cr.into = map[string]string{}
	}
	(*cr.into)[cr.algo] = got
	return nil
}

// checkedBody returns the request body decoded (aws-chunked), verified
// against x-amz-content-sha256 and against an x-amz-checksum-* value if
// the client sent one; a verified checksum is stored into *into at EOF.
func (g *Gateway) checkedBody(c *fiber.Ctx, req *request, size int64, into *map[string]string) (io.Reader, error) {
	body := g.bodyReader(c, req, size)
	algo, want, fromTrailer, err := requestedChecksum(c)
	if err != nil || algo == "" {
		return body, err
	}
	cr := &checksumReader{r: body, algo: algo, h: checksumAlgos[algo](), want: want, into: into}
	if fromTrailer {
		chunked, ok := body.(*sigv4.ChunkedReader)
		if !ok {
			return nil, apiErr("InvalidRequest", "x-amz-trailer needs an aws-chunked body")
		}
		cr.trailer = chunked
	}
	return cr, nil
}

// requestedChecksum finds the checksum a request carries: the algorithm,
// the expected base64 value (empty when it comes in the trailer) and
// whether it comes in the trailer.
func requestedChecksum(c *fiber.Ctx) (algo, want string, fromTrailer bool, err error) {
	if t := strings.ToLower(strings.TrimSpace(c.Get("x-amz-trailer"))); t != "" {
		name, ok := strings.CutPrefix(t, "x-amz-checksum-")
		algo = strings.ToUpper(name)
		if _, known := checksumAlgos[algo]; !ok || !known {
			return "", "", false, apiErr("InvalidRequest", "unsupported trailer "+t)
		}
		return algo, "", true, nil
	}
	for name := range checksumAlgos {
		if v := c.Get(checksumHeader(name)); v != "" {
			if algo != "" {
				return "", "", false, apiErr("InvalidRequest", "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
			}
			algo, want = name, v
		}
	}
	return algo, want, false, nil
}

// setChecksumHeaders sends stored checksums as x-amz-checksum-* headers.
func setChecksumHeaders(c *fiber.Ctx, sums map[string]string) {
	for algo, v := range sums {
		c.Set(checksumHeader(algo), v)
	}
}

// checksumsXML fills S3's XML checksum fields.
func checksumsXML(sums map[string]string) Checksums {
	return Checksums{
		ChecksumCRC32: sums["CRC32"], ChecksumCRC32C: sums["CRC32C"], ChecksumCRC64NVME: sums["CRC64NVME"],
		ChecksumSHA1: sums["SHA1"], ChecksumSHA256: sums["SHA256"],
	}
}

func decodeB64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
func encodeB64(b []byte) string          { return base64.StdEncoding.EncodeToString(b) }
