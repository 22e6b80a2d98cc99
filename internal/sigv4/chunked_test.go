package sigv4

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// encodeChunked frames data as aws-chunked the way an SDK would, for tests.
// sizes gives the chunk sizes in order (the rest goes in one last chunk).
// For signed modes res supplies the key and seed signature.
func encodeChunked(data []byte, sizes []int, res *Result, trailers http.Header) []byte {
	var out bytes.Buffer
	signed := res.PayloadHash == StreamingPayload || res.PayloadHash == StreamingPayloadTrailer
	date := res.Date.UTC().Format(amzDateFormat)
	prev := res.Signature
	chunk := func(c []byte) {
		if !signed {
			fmt.Fprintf(&out, "%x\r\n", len(c))
		} else {
			sts := chunkAlgorithm + "\n" + date + "\n" + res.Scope + "\n" + prev + "\n" + EmptySHA256 + "\n" + sha256Hex(c)
			prev = signature(res.SigningKey, sts)
			fmt.Fprintf(&out, "%x;chunk-signature=%s\r\n", len(c), prev)
		}
		if len(c) > 0 {
			out.Write(c)
			out.WriteString("\r\n")
		}
	}
	for _, n := range sizes {
		if n > len(data) {
			n = len(data)
		}
		if n == 0 {
			break
		}
		chunk(data[:n])
		data = data[n:]
	}
	if len(data) > 0 {
		chunk(data)
	}
	chunk(nil)
	var canon []string
	for k, vs := range trailers {
		line := strings.ToLower(k) + ":" + vs[0]
		out.WriteString(line + "\r\n")
		canon = append(canon, line+"\n")
	}
	if res.PayloadHash == StreamingPayloadTrailer {
		sort.Strings(canon)
		sts := trailerAlgo + "\n" + date + "\n" + res.Scope + "\n" + prev + "\n" + sha256Hex([]byte(strings.Join(canon, "")))
		out.WriteString("x-amz-trailer-signature:" + signature(res.SigningKey, sts) + "\r\n")
	}
	out.WriteString("\r\n")
	return out.Bytes()
}

func testResult(mode string) *Result {
	return &Result{
		AccessKey: "AK", Region: "us-east-1", Date: now, PayloadHash: mode,
		SigningKey: SigningKey("SECRET", now, "us-east-1"),
		Signature:  strings.Repeat("ab", 32),
		Scope:      scopeOf(now, "us-east-1"),
	}
}

var allModes = []string{StreamingPayload, StreamingPayloadTrailer, StreamingUnsignedTrailer}

func TestChunkedRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	readers := map[string]func(io.Reader) io.Reader{
		"plain":   func(r io.Reader) io.Reader { return r },
		"onebyte": iotest.OneByteReader,
		"half":    iotest.HalfReader,
	}
	for _, mode := range allModes {
		for rname, wrap := range readers {
			for trial := 0; trial < 8; trial++ {
				n := rng.IntN(200000)
				if trial == 0 {
					n = 0
				}
				data := make([]byte, n)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				var sizes []int
				for s := 0; s < n; {
					c := 1 + rng.IntN(70000)
					sizes = append(sizes, c)
					s += c
				}
				var tr http.Header
				if mode != StreamingPayload {
					tr = http.Header{"X-Amz-Checksum-Crc32": {"abcd"}, "X-Amz-Checksum-Sha256": {"efgh"}}
				}
				res := testResult(mode)
				wire := encodeChunked(data, sizes, res, tr)
				cr := NewChunkedReader(wrap(bytes.NewReader(wire)), res, WithDecodedLength(int64(n)))
				// Read with odd buffer sizes to cross every boundary.
				var got bytes.Buffer
				buf := make([]byte, 1+rng.IntN(5000))
				for {
					k, err := cr.Read(buf)
					got.Write(buf[:k])
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("%s/%s/%d: %v", mode, rname, trial, err)
					}
				}
				if !bytes.Equal(got.Bytes(), data) {
					t.Fatalf("%s/%s/%d: data differs (%d vs %d bytes)", mode, rname, trial, got.Len(), n)
				}
				if mode != StreamingPayload && cr.Trailers().Get("X-Amz-Checksum-Sha256") != "efgh" {
					t.Fatalf("%s: trailers %v", mode, cr.Trailers())
				}
			}
		}
	}
}

func TestChunkedMalformed(t *testing.T) {
	res := testResult(StreamingUnsignedTrailer)
	cases := []struct {
		name, body, code string
	}{
		{"empty body", "", CodeIncompleteBody},
		{"bad size", "zz\r\nabc\r\n0\r\n\r\n", CodeInvalidRequest},
		{"negative size", "-1\r\n", CodeInvalidRequest},
		{"huge size", "ffffffffffffffffff\r\n", CodeInvalidRequest},
		{"over cap", strconv.FormatInt(DefaultMaxChunkSize+1, 16) + "\r\n", CodeInvalidRequest},
		{"short data", "10\r\nabc", CodeIncompleteBody},
		{"no CRLF after data", "3\r\nabcXY0\r\n\r\n", CodeInvalidRequest},
		{"no final chunk", "3\r\nabc\r\n", CodeIncompleteBody},
		{"header without newline", "3", CodeIncompleteBody},
		{"long header line", strings.Repeat("1", 5000) + "\r\n", CodeInvalidRequest},
		{"bad trailer", "3\r\nabc\r\n0\r\nnot a header\r\n\r\n", CodeInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := io.ReadAll(NewChunkedReader(strings.NewReader(c.body), res))
			assertCode(t, err, c.code)
		})
	}
	// Data after the final chunk is refused when no trailers are expected.
	signed := testResult(StreamingPayload)
	wire := encodeChunked([]byte("hello"), nil, signed, nil)
	_, err := io.ReadAll(NewChunkedReader(bytes.NewReader(append(wire, "x-amz-foo:bar\r\n"...)), signed))
	assertCode(t, err, CodeInvalidRequest)
	// A signed chunk without its signature.
	_, err = io.ReadAll(NewChunkedReader(strings.NewReader("5\r\nhello\r\n0\r\n\r\n"), signed))
	assertCode(t, err, CodeInvalidRequest)
	// Not an aws-chunked payload at all.
	_, err = io.ReadAll(NewChunkedReader(strings.NewReader(""), testResult(UnsignedPayload)))
	assertCode(t, err, CodeInvalidArgument)
}

// FuzzChunkedReader feeds arbitrary bodies to the decoder in every mode. It
// must never panic, never return more bytes than it was given, and never
// hold a chunk buffer larger than the cap.
func FuzzChunkedReader(f *testing.F) {
	// Seeds stay small: the 66 KiB AWS examples (tested above) would make the
	// engine spend its whole minimisation budget on every input derived
	// from them.
	for i, mode := range allModes {
		f.Add(encodeChunked([]byte("hello, world"), []int{5}, testResult(mode), http.Header{"X-Amz-Checksum-Crc32": {"x"}}), uint8(i))
	}
	f.Add([]byte("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:abc\r\n\r\n"), uint8(2))
	f.Add([]byte("fffff;chunk-signature=00\r\n"), uint8(0))
	const maxChunk = 1 << 16
	f.Fuzz(func(t *testing.T, body []byte, m uint8) {
		res := testResult(allModes[int(m)%len(allModes)])
		cr := NewChunkedReader(bytes.NewReader(body), res, WithMaxChunkSize(maxChunk))
		buf := make([]byte, 1+int(m)*37)
		total := 0
		for {
			n, err := cr.Read(buf)
			total += n
			if cap(cr.buf) > maxChunk {
				t.Fatalf("chunk buffer grew to %d", cap(cr.buf))
			}
			if err != nil {
				if err != io.EOF {
					if _, ok := err.(*Error); !ok {
						t.Fatalf("non-*Error error %T: %v", err, err)
					}
				}
				break
			}
			if n == 0 {
				t.Fatalf("Read returned 0, nil")
			}
		}
		if total > len(body) {
			t.Fatalf("decoded %d bytes from %d", total, len(body))
		}
	})
}
