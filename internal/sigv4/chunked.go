package sigv4

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// aws-chunked framing (https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming.html):
//
//	hex-size[;chunk-signature=sig]\r\n
//	data\r\n
//	...
//	0[;chunk-signature=sig]\r\n
//	[trailer-name:value\r\n ...]
//	[x-amz-trailer-signature:sig\r\n]
//	\r\n
//
// Clients disagree on the exact layout after the final chunk: the AWS SDKs
// put trailers right after it, the AWS docs example and minio-go put a blank
// line first, and minio-go ends trailer lines with a bare "\n" and puts
// another blank line before the signature. The decoder therefore reads
// everything after the final chunk up to EOF as lines, ignoring blank ones.
// That relies on r ending at the end of the body, which a Content-Length or
// HTTP-chunked body reader does.

const (
	// DefaultMaxChunkSize caps the size of one chunk. Signed chunks are
	// buffered whole before release (their signature is only checkable at
	// the end), so this is also the per-request memory bound. SDKs send
	// 64 KiB chunks; some tools go up to a few MiB.
	DefaultMaxChunkSize = 16 << 20
	// maxLine bounds a chunk-header or trailer line.
	maxLine = 4096
	// maxTrailerBytes bounds everything after the final chunk.
	maxTrailerBytes = 16 << 10
)

// ChunkedOption configures NewChunkedReader.
type ChunkedOption func(*ChunkedReader)

// WithMaxChunkSize sets the largest chunk accepted (default
// DefaultMaxChunkSize). A larger chunk fails with InvalidRequest.
func WithMaxChunkSize(n int) ChunkedOption {
	return func(c *ChunkedReader) {
		if n > 0 {
			c.maxChunk = n
		}
	}
}

// WithDecodedLength makes the reader check that the decoded body is exactly
// n bytes long (the x-amz-decoded-content-length header); a mismatch fails
// with IncompleteBody. Negative n disables the check (the default).
func WithDecodedLength(n int64) ChunkedOption {
	return func(c *ChunkedReader) { c.wantLen = n }
}

// ChunkedReader decodes an aws-chunked body into the object's bytes. It is
// created by NewChunkedReader and is not safe for concurrent use.
//
// Memory: for signed variants one chunk is held (at most the max chunk size,
// allocated as its bytes arrive); for the unsigned variant data is passed
// through without buffering. Add a 4 KiB read buffer and at most 16 KiB of
// trailers.
type ChunkedReader struct {
	src      *bufio.Reader
	signed   bool // chunk signatures present and verified
	trailer  bool // trailing headers expected
	key      []byte
	amzDate  string
	scope    string
	prevSig  string
	maxChunk int
	wantLen  int64

	buf       []byte // signed mode: verified data of the current chunk
	off       int    // next unread byte of buf
	remaining int64  // unsigned mode: bytes left in the current chunk
	needCRLF  bool   // unsigned mode: chunk data done, CRLF pending
	decoded   int64
	trailers  http.Header
	err       error // sticky; io.EOF once the body is fully verified
}

// NewChunkedReader returns a reader that decodes the aws-chunked body r of a
// request authenticated as res. res.PayloadHash selects the variant:
//
//   - StreamingPayload: each chunk signature is verified, chained from the
//     seed signature; no trailers.
//   - StreamingPayloadTrailer: as above, then the trailers and their
//     x-amz-trailer-signature are verified.
//   - StreamingUnsignedTrailer: chunk signatures are neither required nor
//     checked; trailers are collected.
//
// Any other PayloadHash makes the first Read fail with InvalidArgument.
// Errors are *Error: SignatureDoesNotMatch for a bad chunk or trailer
// signature, IncompleteBody for a body that ends early, InvalidRequest for
// broken framing. Data of a signed chunk is only returned once that chunk's
// signature has checked out; io.EOF is only returned once the final chunk
// and trailers have. Checking trailer checksums (x-amz-checksum-*) against
// the data is left to the caller, see Trailers.
func NewChunkedReader(r io.Reader, res *Result, opts ...ChunkedOption) *ChunkedReader {
	c := &ChunkedReader{
		src:      bufio.NewReaderSize(r, maxLine),
		maxChunk: DefaultMaxChunkSize,
		wantLen:  -1,
	}
	for _, o := range opts {
		o(c)
	}
	switch res.PayloadHash {
	case StreamingPayload:
		c.signed = true
	case StreamingPayloadTrailer:
		c.signed, c.trailer = true, true
	case StreamingUnsignedTrailer:
		c.trailer = true
	default:
		c.err = newError(CodeInvalidArgument, "the request body is not aws-chunked (x-amz-content-sha256 is %q)", res.PayloadHash)
	}
	if c.signed {
		c.key = res.SigningKey
		c.amzDate = res.Date.UTC().Format(amzDateFormat)
		c.scope = res.Scope
		c.prevSig = res.Signature
	}
	return c
}

// Trailers returns the trailing headers (canonical keys, e.g.
// "X-Amz-Checksum-Crc32c"), without x-amz-trailer-signature. It is nil until
// Read has returned io.EOF.
func (c *ChunkedReader) Trailers() http.Header {
	if c.err != io.EOF {
		return nil
	}
	return c.trailers
}

// Read implements io.Reader.
func (c *ChunkedReader) Read(p []byte) (int, error) {
	for {
		if c.off < len(c.buf) {
			n := copy(p, c.buf[c.off:])
			c.off += n
			return n, nil
		}
		if c.err != nil {
			return 0, c.err
		}
		if len(p) == 0 {
			return 0, nil
		}
		if c.remaining > 0 {
			return c.readUnsigned(p)
		}
		if err := c.next(); err != nil {
			c.err = err
		}
	}
}

// readUnsigned passes chunk data straight through.
func (c *ChunkedReader) readUnsigned(p []byte) (int, error) {
	if int64(len(p)) > c.remaining {
		p = p[:c.remaining]
	}
	n, err := c.src.Read(p)
	c.remaining -= int64(n)
	if c.remaining == 0 {
		c.needCRLF = true
	}
	if err != nil && c.remaining > 0 {
		c.err = truncated(err)
		if n == 0 {
			return 0, c.err
		}
	}
	return n, nil
}

// truncated turns an error from the body into IncompleteBody.
func truncated(err error) *Error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return wrapError(err, CodeIncompleteBody, "The request body terminated unexpectedly")
}

func malformed(format string, args ...any) *Error {
	return newError(CodeInvalidRequest, "malformed aws-chunked body: "+format, args...)
}

// next consumes the framing up to the next chunk's data: the CRLF closing
// the previous chunk, the next header, and for signed chunks the data itself.
// At the final chunk it consumes the trailers and returns io.EOF.
func (c *ChunkedReader) next() error {
	if c.needCRLF {
		if err := c.readCRLF(); err != nil {
			return err
		}
		c.needCRLF = false
	}
	line, err := c.readLine()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return truncated(io.ErrUnexpectedEOF)
		}
		return err
	}
	size, sig, err := c.parseHeader(line)
	if err != nil {
		return err
	}
	if c.wantLen >= 0 && c.decoded+size > c.wantLen {
		return newError(CodeIncompleteBody, "the decoded body is longer than x-amz-decoded-content-length (%d)", c.wantLen)
	}
	if !c.signed {
		if size == 0 {
			return c.finish()
		}
		c.remaining = size
		c.decoded += size
		return nil
	}
	if err := c.readChunk(int(size)); err != nil {
		return err
	}
	if size > 0 {
		if err := c.readCRLF(); err != nil {
			return err
		}
	}
	sum := sha256.Sum256(c.buf)
	sts := chunkAlgorithm + "\n" + c.amzDate + "\n" + c.scope + "\n" + c.prevSig + "\n" + EmptySHA256 + "\n" + hex.EncodeToString(sum[:])
	want := signature(c.key, sts)
	if !hmac.Equal([]byte(want), []byte(strings.ToLower(sig))) {
		c.buf = c.buf[:0]
		return newError(CodeSignatureDoesNotMatch, msgSignatureDoesNotMatch)
	}
	c.prevSig = want
	c.off = 0
	c.decoded += size
	if size == 0 {
		return c.finish()
	}
	return nil
}

// parseHeader reads "hex-size[;ext...]" and returns the size and, for signed
// variants, the chunk-signature extension.
func (c *ChunkedReader) parseHeader(line string) (int64, string, error) {
	sizeStr, exts, _ := strings.Cut(line, ";")
	sizeStr = strings.TrimSpace(sizeStr)
	if sizeStr == "" || len(sizeStr) > 16 {
		return 0, "", malformed("bad chunk size %q", truncate(sizeStr))
	}
	size, err := strconv.ParseUint(sizeStr, 16, 64)
	if err != nil {
		return 0, "", malformed("bad chunk size %q", truncate(sizeStr))
	}
	if size > uint64(c.maxChunk) {
		return 0, "", newError(CodeInvalidRequest, "chunk of %d bytes exceeds the maximum chunk size of %d bytes", size, c.maxChunk)
	}
	if !c.signed {
		return int64(size), "", nil
	}
	for ext := range strings.SplitSeq(exts, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(ext), "=")
		if k == "chunk-signature" {
			if len(v) != 64 {
				return 0, "", malformed("bad chunk-signature")
			}
			return int64(size), v, nil
		}
	}
	return 0, "", malformed("chunk without chunk-signature")
}

// readChunk fills c.buf with exactly n bytes, growing it only as data
// arrives so a client that announces a large chunk and stalls does not pin
// the whole allocation.
func (c *ChunkedReader) readChunk(n int) error {
	c.buf = c.buf[:0]
	c.off = 0
	for len(c.buf) < n {
		if len(c.buf) == cap(c.buf) {
			grow := max(cap(c.buf), 64<<10)
			c.buf = append(c.buf[:cap(c.buf)], make([]byte, min(grow, n-cap(c.buf)))...)[:len(c.buf)]
		}
		end := min(cap(c.buf), n)
		m, err := c.src.Read(c.buf[len(c.buf):end])
		c.buf = c.buf[:len(c.buf)+m]
		if err != nil && len(c.buf) < n {
			c.buf = c.buf[:0]
			return truncated(err)
		}
	}
	return nil
}

// readLine returns the next line without its "\n" or "\r\n".
func (c *ChunkedReader) readLine() (string, error) {
	line, err := c.src.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return "", malformed("line longer than %d bytes", maxLine)
	}
	if err != nil {
		if len(line) > 0 && err == io.EOF {
			return "", truncated(io.ErrUnexpectedEOF)
		}
		if err == io.EOF {
			return "", io.EOF
		}
		return "", truncated(err)
	}
	line = bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'})
	return string(line), nil
}

// readCRLF consumes the "\r\n" that ends chunk data.
func (c *ChunkedReader) readCRLF() error {
	var b [2]byte
	if _, err := io.ReadFull(c.src, b[:]); err != nil {
		return truncated(err)
	}
	if b != [2]byte{'\r', '\n'} {
		return malformed("chunk data not followed by CRLF")
	}
	return nil
}

// finish reads what follows the final chunk, verifies the trailer signature
// if there is one, checks the decoded length and ends the stream.
func (c *ChunkedReader) finish() error {
	rest, err := io.ReadAll(io.LimitReader(c.src, maxTrailerBytes+1))
	if err != nil {
		return truncated(err)
	}
	if len(rest) > maxTrailerBytes {
		return malformed("more than %d bytes of trailers", maxTrailerBytes)
	}
	trailers := http.Header{}
	var canon []string
	var trailerSig string
	for raw := range strings.SplitSeq(string(rest), "\n") {
		line := strings.TrimSuffix(raw, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if !c.trailer {
			return malformed("data after the final chunk")
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.ToLower(strings.TrimSpace(name))
		if !ok || name == "" {
			return malformed("bad trailer line %q", truncate(line))
		}
		value = strings.TrimSpace(value)
		if name == "x-amz-trailer-signature" {
			trailerSig = value
			continue
		}
		trailers.Add(name, value)
		canon = append(canon, name+":"+value+"\n")
	}
	if c.signed && c.trailer {
		if trailerSig == "" {
			return newError(CodeSignatureDoesNotMatch, "The trailing headers are not signed (missing x-amz-trailer-signature).")
		}
		// The signed form is "name:value\n" per trailer, sorted by name (the
		// AWS SDKs sort; the docs example and minio-go send one trailer).
		sort.Strings(canon)
		sts := trailerAlgo + "\n" + c.amzDate + "\n" + c.scope + "\n" + c.prevSig + "\n" + sha256Hex([]byte(strings.Join(canon, "")))
		if !hmac.Equal([]byte(signature(c.key, sts)), []byte(strings.ToLower(trailerSig))) {
			return newError(CodeSignatureDoesNotMatch, msgSignatureDoesNotMatch)
		}
	}
	if c.wantLen >= 0 && c.decoded != c.wantLen {
		return newError(CodeIncompleteBody, "the decoded body is %d bytes, x-amz-decoded-content-length says %d", c.decoded, c.wantLen)
	}
	if len(trailers) > 0 {
		c.trailers = trailers
	}
	return io.EOF
}

// truncate shortens attacker-controlled text before it goes into a message.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
