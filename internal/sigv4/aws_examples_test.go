package sigv4

import (
	"bytes"
	"encoding/base64"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Known-answer tests from the AWS S3 API reference:
//   - sig-v4-header-based-auth.html, "Examples: Signature Calculations"
//   - sigv4-query-string-auth.html, "An Example"
//   - sigv4-streaming.html, "Example: PUT Object"
//   - sigv4-streaming-trailers.html, "Example: PUT Object"
// All use the documentation's example credentials and 20130524T000000Z.

const (
	exampleAK     = "AKIAIOSFODNN7EXAMPLE"
	exampleSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

var exampleTime = time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)

func exampleVerifier() *Verifier {
	return &Verifier{Creds: StaticCredentials{exampleAK: exampleSecret}, Region: "us-east-1"}
}

func authHeader(signed, sig string) string {
	return "AWS4-HMAC-SHA256 Credential=" + exampleAK + "/20130524/us-east-1/s3/aws4_request,SignedHeaders=" + signed + ",Signature=" + sig
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestAWSHeaderExamples(t *testing.T) {
	const emptyHash = EmptySHA256
	cases := []struct {
		name   string
		req    Request
		wantPH string
	}{
		{
			name: "GET object with Range",
			req: Request{Method: "GET", Path: "/test.txt", Host: "examplebucket.s3.amazonaws.com", Header: hdr(
				"Range", "bytes=0-9",
				"X-Amz-Content-Sha256", emptyHash,
				"X-Amz-Date", "20130524T000000Z",
				"Authorization", authHeader("host;range;x-amz-content-sha256;x-amz-date", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"))},
			wantPH: emptyHash,
		},
		{
			name: "PUT object, key with $ escaped on the wire",
			req: Request{Method: "PUT", Path: "/test%24file.text", Host: "examplebucket.s3.amazonaws.com", Header: hdr(
				"Date", "Fri, 24 May 2013 00:00:00 GMT",
				"X-Amz-Storage-Class", "REDUCED_REDUNDANCY",
				"X-Amz-Content-Sha256", "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
				"X-Amz-Date", "20130524T000000Z",
				"Authorization", authHeader("date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class", "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"))},
			wantPH: "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
		},
		{
			name: "PUT object, key with $ bare on the wire",
			req: Request{Method: "PUT", Path: "/test$file.text", Host: "examplebucket.s3.amazonaws.com", Header: hdr(
				"Date", "Fri, 24 May 2013 00:00:00 GMT",
				"X-Amz-Storage-Class", "REDUCED_REDUNDANCY",
				"X-Amz-Content-Sha256", "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
				"X-Amz-Date", "20130524T000000Z",
				"Authorization", authHeader("date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class", "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"))},
			wantPH: "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
		},
		{
			name: "GET bucket lifecycle (valueless query parameter)",
			req: Request{Method: "GET", Path: "/", RawQuery: "lifecycle", Host: "examplebucket.s3.amazonaws.com", Header: hdr(
				"X-Amz-Content-Sha256", emptyHash,
				"X-Amz-Date", "20130524T000000Z",
				"Authorization", authHeader("host;x-amz-content-sha256;x-amz-date", "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"))},
			wantPH: emptyHash,
		},
		{
			name: "GET bucket list objects (query sorted)",
			req: Request{Method: "GET", Path: "/", RawQuery: "max-keys=2&prefix=J", Host: "examplebucket.s3.amazonaws.com", Header: hdr(
				"X-Amz-Content-Sha256", emptyHash,
				"X-Amz-Date", "20130524T000000Z",
				"Authorization", authHeader("host;x-amz-content-sha256;x-amz-date", "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"))},
			wantPH: emptyHash,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.req.Now = exampleTime.Add(time.Minute)
			res, err := exampleVerifier().Verify(&c.req)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if res.AccessKey != exampleAK || res.Region != "us-east-1" || res.Presigned || res.PayloadHash != c.wantPH {
				t.Errorf("result = %+v", res)
			}
			if res.Scope != "20130524/us-east-1/s3/aws4_request" || !res.Date.Equal(exampleTime) {
				t.Errorf("scope/date = %q %v", res.Scope, res.Date)
			}
		})
	}
}

func TestAWSPresignedExample(t *testing.T) {
	q := "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
	req := func(now time.Time) *Request {
		return &Request{Method: "GET", Path: "/test.txt", RawQuery: q, Host: "examplebucket.s3.amazonaws.com", Header: http.Header{}, Now: now}
	}
	res, err := exampleVerifier().Verify(req(exampleTime.Add(23 * time.Hour)))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !res.Presigned || res.PayloadHash != UnsignedPayload {
		t.Errorf("result = %+v", res)
	}
	_, err = exampleVerifier().Verify(req(exampleTime.Add(86401 * time.Second)))
	var se *Error
	if !errors.As(err, &se) || se.Code != CodeAccessDenied || se.Message != "Request has expired" || se.HTTPStatus != 403 {
		t.Errorf("expired: err = %v", err)
	}
}

// The chunked-upload example: 64 KiB + 1 KiB of 'a', three signed chunks.
func awsChunkedBody() string {
	return "10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n" + strings.Repeat("a", 65536) + "\r\n" +
		"400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n" + strings.Repeat("a", 1024) + "\r\n" +
		"0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n"
}

func awsChunkedRequest() *Request {
	return &Request{Method: "PUT", Path: "/examplebucket/chunkObject.txt", Host: "s3.amazonaws.com", Now: exampleTime, Header: hdr(
		"X-Amz-Date", "20130524T000000Z",
		"X-Amz-Storage-Class", "REDUCED_REDUNDANCY",
		"X-Amz-Content-Sha256", StreamingPayload,
		"Content-Encoding", "aws-chunked",
		"X-Amz-Decoded-Content-Length", "66560",
		"Content-Length", "66824",
		"Authorization", authHeader("content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class",
			"4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"))}
}

func TestAWSChunkedExample(t *testing.T) {
	res, err := exampleVerifier().Verify(awsChunkedRequest())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if res.PayloadHash != StreamingPayload {
		t.Fatalf("PayloadHash = %q", res.PayloadHash)
	}
	body := awsChunkedBody()
	if len(body) != 66824 {
		t.Fatalf("example body is %d bytes, Content-Length says 66824", len(body))
	}
	cr := NewChunkedReader(strings.NewReader(body), res, WithDecodedLength(66560))
	got, err := io.ReadAll(cr)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	if string(got) != strings.Repeat("a", 66560) {
		t.Errorf("decoded %d bytes, not the example's 66560 'a'", len(got))
	}
	if cr.Trailers() != nil {
		t.Errorf("Trailers = %v, want nil", cr.Trailers())
	}
}

func TestAWSChunkedExampleTampered(t *testing.T) {
	res, err := exampleVerifier().Verify(awsChunkedRequest())
	if err != nil {
		t.Fatal(err)
	}
	good := awsChunkedBody()
	// Flip one byte of the second chunk: the first chunk's 64 KiB must still
	// come out (it verified), then the error, and none of the bad chunk.
	i := strings.Index(good, "400;")
	bad := []byte(good)
	bad[i+100] = 'b'
	got, err := io.ReadAll(NewChunkedReader(bytes.NewReader(bad), res))
	assertCode(t, err, CodeSignatureDoesNotMatch)
	if len(got) != 65536 {
		t.Errorf("released %d bytes before the bad chunk, want 65536", len(got))
	}
	// Wrong decoded length.
	_, err = io.ReadAll(NewChunkedReader(strings.NewReader(good), res, WithDecodedLength(66561)))
	assertCode(t, err, CodeIncompleteBody)
	_, err = io.ReadAll(NewChunkedReader(strings.NewReader(good), res, WithDecodedLength(1000)))
	assertCode(t, err, CodeIncompleteBody)
	// Chunks reordered: the chain breaks.
	last := strings.Index(good, "\r\n0;chunk") + 2
	first := good[:i]
	second := good[i:last]
	_, err = io.ReadAll(NewChunkedReader(strings.NewReader(second+first+good[last:]), res))
	assertCode(t, err, CodeSignatureDoesNotMatch)
	// Final chunk dropped.
	_, err = io.ReadAll(NewChunkedReader(strings.NewReader(good[:last]), res))
	assertCode(t, err, CodeIncompleteBody)
	// Chunk larger than the cap.
	_, err = io.ReadAll(NewChunkedReader(strings.NewReader(good), res, WithMaxChunkSize(1024)))
	assertCode(t, err, CodeInvalidRequest)
}

func awsTrailerRequest() *Request {
	return &Request{Method: "PUT", Path: "/examplebucket/chunkObject.txt", Host: "s3.amazonaws.com", Now: exampleTime, Header: hdr(
		"X-Amz-Date", "20130524T000000Z",
		"X-Amz-Storage-Class", "REDUCED_REDUNDANCY",
		"X-Amz-Content-Sha256", StreamingPayloadTrailer,
		"Content-Encoding", "aws-chunked",
		"X-Amz-Decoded-Content-Length", "66560",
		"X-Amz-Trailer", "x-amz-checksum-crc32c",
		"Authorization", authHeader("content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class;x-amz-trailer",
			"106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e"))}
}

func awsTrailerChunks() string {
	return "10000;chunk-signature=b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2\r\n" + strings.Repeat("a", 65536) + "\r\n" +
		"400;chunk-signature=1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7\r\n" + strings.Repeat("a", 1024) + "\r\n" +
		"0;chunk-signature=2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992\r\n"
}

func TestAWSTrailerExample(t *testing.T) {
	res, err := exampleVerifier().Verify(awsTrailerRequest())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	const sig = "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435"
	framings := map[string]string{
		"docs (blank line first)": "\r\nx-amz-checksum-crc32c:sOO8/Q==\r\nx-amz-trailer-signature:" + sig + "\r\n",
		"SDK (RFC 7230 trailer)":  "x-amz-checksum-crc32c:sOO8/Q==\r\nx-amz-trailer-signature:" + sig + "\r\n\r\n",
		"minio-go (LF, blank)":    "x-amz-checksum-crc32c:sOO8/Q==\n\r\nx-amz-trailer-signature:" + sig + "\r\n\r\n",
	}
	for name, tail := range framings {
		t.Run(name, func(t *testing.T) {
			cr := NewChunkedReader(strings.NewReader(awsTrailerChunks()+tail), res, WithDecodedLength(66560))
			got, err := io.ReadAll(cr)
			if err != nil {
				t.Fatalf("ReadAll: %v", err)
			}
			if len(got) != 66560 {
				t.Fatalf("decoded %d bytes", len(got))
			}
			// The example's checksum really is the CRC32C of the data.
			want := crc32.Checksum(got, crc32.MakeTable(crc32.Castagnoli))
			tr := cr.Trailers()
			if v := tr.Get("X-Amz-Checksum-Crc32c"); v != base64.StdEncoding.EncodeToString([]byte{byte(want >> 24), byte(want >> 16), byte(want >> 8), byte(want)}) || v != "sOO8/Q==" {
				t.Errorf("trailer = %q (crc32c of data %08x)", v, want)
			}
			if tr.Get("X-Amz-Trailer-Signature") != "" {
				t.Errorf("trailer signature leaked into Trailers: %v", tr)
			}
		})
	}
	// A changed trailer value breaks the trailer signature.
	tail := "x-amz-checksum-crc32c:AAAAAA==\r\nx-amz-trailer-signature:" + sig + "\r\n\r\n"
	_, err = io.ReadAll(NewChunkedReader(strings.NewReader(awsTrailerChunks()+tail), res))
	assertCode(t, err, CodeSignatureDoesNotMatch)
	// So does dropping the signature.
	_, err = io.ReadAll(NewChunkedReader(strings.NewReader(awsTrailerChunks()+"x-amz-checksum-crc32c:sOO8/Q==\r\n\r\n"), res))
	assertCode(t, err, CodeSignatureDoesNotMatch)
}

func assertCode(t *testing.T, err error, code string) {
	t.Helper()
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want *Error %s", err, code)
	}
	if se.Code != code {
		t.Fatalf("code = %s (%v), want %s", se.Code, err, code)
	}
	if se.HTTPStatus != statusOf[code] || se.HTTPStatus == 0 {
		t.Fatalf("status = %d for %s", se.HTTPStatus, code)
	}
	if !errors.Is(err, &Error{Code: code}) {
		t.Fatalf("errors.Is by code failed for %v", err)
	}
}
