package sigv4_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/regen-s3/regen/internal/sigv4"
)

// These tests check the verifier against minio-go, an independent SigV4
// implementation: first its signer functions directly, then a real minio-go
// client talking to a tiny S3 stand-in whose only job is to authenticate and
// decode bodies with this package.

const (
	testAK     = "REGENTESTKEY"
	testSecret = "regen/test+secret=="
)

func testVerifier() *sigv4.Verifier {
	return &sigv4.Verifier{Creds: sigv4.StaticCredentials{testAK: testSecret}}
}

// wireRequest turns a client-side request into what a server sees: the raw
// request-target as it goes on the wire, Host, and headers including
// Content-Length (net/http keeps that out of Header on the client side).
func wireRequest(req *http.Request, now time.Time) *sigv4.Request {
	path, query, _ := strings.Cut(req.URL.RequestURI(), "?")
	h := req.Header.Clone()
	if req.ContentLength > 0 {
		h.Set("Content-Length", strconv.FormatInt(req.ContentLength, 10))
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	return &sigv4.Request{Method: req.Method, Path: path, RawQuery: query, Host: host, Header: h, Now: now}
}

// trickyKeys are object keys whose encoding has tripped S3 servers up.
var trickyKeys = []string{
	"plain.txt",
	"a b c",
	"a+b+c",
	"100%/50%",
	"ключ/файл ü.bin",
	"emoji 😀/x",
	"dir//double//slash",
	"../up/./dot",
	"tilde~!$&'()*,;=:@[]",
	"q?x=1#frag",
	"%2F-literal-percent-2F",
}

func TestMinioSignV4(t *testing.T) {
	queries := []string{"", "list-type=2&prefix=a+b%2Fc&delimiter=%2F", "uploads", "partNumber=3&uploadId=x%2By", "tagging&versionId=null"}
	for _, key := range trickyKeys {
		for _, q := range queries {
			t.Run(key+"?"+q, func(t *testing.T) {
				u := &url.URL{Scheme: "http", Host: "127.0.0.1:9000", Path: "/bucket/" + key, RawQuery: q}
				u.RawPath = "/bucket/" + minioEncodePath(key)
				req, err := http.NewRequest(http.MethodGet, u.String(), nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("X-Amz-Content-Sha256", sigv4.EmptySHA256)
				req.Header.Set("X-Amz-Meta-Note", "  spaced   value  ")
				req.Header.Set("Range", "bytes=0-9")
				signed := signer.SignV4(*req, testAK, testSecret, "", "us-east-1")
				res, err := testVerifier().Verify(wireRequest(signed, time.Now()))
				if err != nil {
					t.Fatalf("Verify: %v\nURI %s", err, signed.URL.RequestURI())
				}
				if res.AccessKey != testAK || res.Region != "us-east-1" || res.PayloadHash != sigv4.EmptySHA256 {
					t.Errorf("result %+v", res)
				}
			})
		}
	}
}

// minioEncodePath is what minio-go puts on the wire for a key (s3utils.EncodePath).
func minioEncodePath(key string) string {
	var b strings.Builder
	for _, c := range []byte(key) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-_.~/", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func TestMinioPreSignV4(t *testing.T) {
	for _, key := range trickyKeys {
		t.Run(key, func(t *testing.T) {
			u := &url.URL{Scheme: "http", Host: "s3.local", Path: "/bucket/" + key, RawPath: "/bucket/" + minioEncodePath(key),
				RawQuery: "response-content-disposition=" + url.QueryEscape(`attachment; filename="x y.txt"`)}
			req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
			signed := signer.PreSignV4(*req, testAK, testSecret, "", "eu-west-3", 600)
			res, err := testVerifier().Verify(wireRequest(signed, time.Now()))
			if err != nil {
				t.Fatalf("Verify: %v\n%s", err, signed.URL)
			}
			if !res.Presigned || res.Region != "eu-west-3" || res.PayloadHash != sigv4.UnsignedPayload {
				t.Errorf("result %+v", res)
			}
			// Expired 601s later (PreSignV4 uses the wall clock).
			_, err = testVerifier().Verify(wireRequest(signed, time.Now().Add(602*time.Second)))
			var se *sigv4.Error
			if !errors.As(err, &se) || se.Code != sigv4.CodeAccessDenied || se.Message != "Request has expired" {
				t.Errorf("expired: %v", err)
			}
			// Tampered query.
			tampered := *signed
			tu := *signed.URL
			tu.RawQuery = strings.Replace(tu.RawQuery, "response-content-disposition=", "response-content-disposition=x", 1)
			tampered.URL = &tu
			_, err = testVerifier().Verify(wireRequest(&tampered, time.Now()))
			if !errors.As(err, &se) || se.Code != sigv4.CodeSignatureDoesNotMatch {
				t.Errorf("tampered: %v", err)
			}
		})
	}
}

// sha256Hasher satisfies minio-go's md5simd.Hasher (a hash.Hash with Close).
type sha256Hasher struct{ hash.Hash }

func (sha256Hasher) Close() {}

func TestMinioStreamingSignV4(t *testing.T) {
	sizes := []int{0, 1, 65535, 65536, 65537, 3*65536 + 17}
	for _, withTrailer := range []bool{false, true} {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("trailer=%v/size=%d", withTrailer, n), func(t *testing.T) {
				data := bytes.Repeat([]byte("regen!"), n/6+1)[:n]
				req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:9000/bucket/"+minioEncodePath("dir/a b+c.bin"), bytes.NewReader(data))
				req.Header.Set("Content-Type", "application/octet-stream")
				if withTrailer {
					req.Trailer = http.Header{"X-Amz-Checksum-Crc32c": []string{"placeholder"}}
				}
				now := time.Now().UTC()
				signed := signer.StreamingSignV4(req, testAK, testSecret, "", "us-east-1", int64(n), now, sha256Hasher{sha256.New()})
				wire, err := io.ReadAll(signed.Body)
				if err != nil {
					t.Fatal(err)
				}
				// (minio-go reports 0 for an empty body's framed length.)
				if n > 0 && int64(len(wire)) != signed.ContentLength {
					t.Fatalf("minio-go framed %d bytes, ContentLength %d", len(wire), signed.ContentLength)
				}
				res, err := testVerifier().Verify(wireRequest(signed, now))
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				want := sigv4.StreamingPayload
				if withTrailer {
					want = sigv4.StreamingPayloadTrailer
				}
				if res.PayloadHash != want {
					t.Fatalf("PayloadHash %q, want %q", res.PayloadHash, want)
				}
				cr := sigv4.NewChunkedReader(bytes.NewReader(wire), res, sigv4.WithDecodedLength(int64(n)))
				got, err := io.ReadAll(cr)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("decoded %d bytes, differ from the %d sent", len(got), n)
				}
				if withTrailer && cr.Trailers().Get("X-Amz-Checksum-Crc32c") != "placeholder" {
					t.Errorf("trailers %v", cr.Trailers())
				}
				// Any flipped byte in the framing or data must be caught.
				if n > 0 {
					for _, pos := range []int{len(wire) / 2, len(wire) - 90} {
						bad := bytes.Clone(wire)
						bad[pos] ^= 0x01
						if _, err := io.ReadAll(sigv4.NewChunkedReader(bytes.NewReader(bad), res)); err == nil {
							t.Errorf("flip at %d of %d went unnoticed", pos, len(wire))
						}
					}
				}
			})
		}
	}
}

func TestMinioUnsignedTrailer(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 20000)
	req, _ := http.NewRequest(http.MethodPut, "https://s3.local/bucket/obj", bytes.NewReader(data))
	req.ContentLength = int64(len(data))
	req.Header.Set("X-Amz-Content-Sha256", sigv4.StreamingUnsignedTrailer)
	signed := signer.SignV4Trailer(*req, testAK, testSecret, "", "us-east-1", http.Header{"X-Amz-Checksum-Crc32": []string{"AAAAAA=="}})
	wire, err := io.ReadAll(signed.Body)
	if err != nil {
		t.Fatal(err)
	}
	res, err := testVerifier().Verify(wireRequest(signed, time.Now()))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	cr := sigv4.NewChunkedReader(bytes.NewReader(wire), res, sigv4.WithDecodedLength(int64(len(data))))
	got, err := io.ReadAll(cr)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("decode: %v (%d bytes)", err, len(got))
	}
	if cr.Trailers().Get("X-Amz-Checksum-Crc32") != "AAAAAA==" {
		t.Errorf("trailers %v", cr.Trailers())
	}
}

// fakeS3 is the smallest server a minio-go client will talk to: it
// authenticates every request with sigv4, decodes the body the way the
// Result says, and keeps objects in a map.
type fakeS3 struct {
	v       *sigv4.Verifier
	mu      sync.Mutex
	objects map[string][]byte
	modes   map[string]bool // payload hashes seen
	trailer map[string]http.Header
}

func newFakeS3() *fakeS3 {
	return &fakeS3{v: testVerifier(), objects: map[string][]byte{}, modes: map[string]bool{}, trailer: map[string]http.Header{}}
}

func (f *fakeS3) fail(w http.ResponseWriter, err error) {
	var se *sigv4.Error
	if !errors.As(err, &se) {
		se = &sigv4.Error{Code: "InternalError", Message: err.Error(), HTTPStatus: 500}
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(se.HTTPStatus)
	fmt.Fprintf(w, "<Error><Code>%s</Code><Message>%s</Message></Error>", se.Code, se.Message)
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, query, _ := strings.Cut(r.RequestURI, "?")
	h := r.Header.Clone()
	if r.ContentLength >= 0 && r.Header.Get("Content-Length") == "" && (r.ContentLength > 0 || r.Method == http.MethodPut) {
		h.Set("Content-Length", strconv.FormatInt(r.ContentLength, 10))
	}
	res, err := f.v.Verify(&sigv4.Request{Method: r.Method, Path: path, RawQuery: query, Host: r.Host, Header: h, Now: time.Now()})
	if err != nil {
		f.fail(w, err)
		return
	}
	key, _ := url.PathUnescape(path)
	f.mu.Lock()
	f.modes[res.PayloadHash] = true
	f.mu.Unlock()
	switch r.Method {
	case http.MethodPut:
		var body io.Reader = r.Body
		var cr *sigv4.ChunkedReader
		switch {
		case sigv4.IsStreaming(res.PayloadHash):
			dl, _ := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
			cr = sigv4.NewChunkedReader(r.Body, res, sigv4.WithDecodedLength(dl))
			body = cr
		case res.PayloadHash != sigv4.UnsignedPayload:
			body = sigv4.NewSHA256Reader(r.Body, res.PayloadHash)
		}
		data, err := io.ReadAll(body)
		if err != nil {
			f.fail(w, err)
			return
		}
		f.mu.Lock()
		f.objects[key] = data
		if cr != nil {
			f.trailer[key] = cr.Trailers()
		}
		f.mu.Unlock()
		sum := md5.Sum(data)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	case http.MethodGet, http.MethodHead:
		if strings.Contains(query, "list-type=2") {
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bucket</Name><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`)
			return
		}
		f.mu.Lock()
		data, ok := f.objects[key]
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		sum := md5.Sum(data)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Header().Set("Content-Type", "application/octet-stream")
		if r.Method == http.MethodGet {
			w.Write(data)
		}
	case http.MethodDelete:
		f.mu.Lock()
		delete(f.objects, key)
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

func TestMinioClientEndToEnd(t *testing.T) {
	type setup struct {
		name string
		tls  bool
		opts minio.PutObjectOptions
		mode string
	}
	setups := []setup{
		{"http streaming signed", false, minio.PutObjectOptions{}, sigv4.StreamingPayload},
		{"http streaming signed + trailer", false, minio.PutObjectOptions{Checksum: minio.ChecksumCRC32C}, sigv4.StreamingPayloadTrailer},
		{"http unsigned payload", false, minio.PutObjectOptions{DisableContentSha256: true, SendContentMd5: true}, sigv4.UnsignedPayload},
		{"https unsigned trailer", true, minio.PutObjectOptions{Checksum: minio.ChecksumCRC32C}, sigv4.StreamingUnsignedTrailer},
		{"https unsigned payload", true, minio.PutObjectOptions{}, sigv4.UnsignedPayload},
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			fake := newFakeS3()
			var srv *httptest.Server
			if s.tls {
				srv = httptest.NewTLSServer(fake)
			} else {
				srv = httptest.NewServer(fake)
			}
			defer srv.Close()
			u, _ := url.Parse(srv.URL)
			clnt, err := minio.New(u.Host, &minio.Options{
				Creds:           credentials.NewStaticV4(testAK, testSecret, ""),
				Secure:          s.tls,
				Transport:       srv.Client().Transport,
				Region:          "us-east-1",
				TrailingHeaders: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i, key := range trickyKeys {
				data := bytes.Repeat([]byte{byte(i)}, 70000+i)
				if _, err := clnt.PutObject(ctx, "bucket", key, bytes.NewReader(data), int64(len(data)), s.opts); err != nil {
					t.Fatalf("PutObject(%q): %v", key, err)
				}
				obj, err := clnt.GetObject(ctx, "bucket", key, minio.GetObjectOptions{})
				if err != nil {
					t.Fatalf("GetObject(%q): %v", key, err)
				}
				got, err := io.ReadAll(obj)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("GetObject(%q): %v, %d bytes", key, err, len(got))
				}
				if _, err := clnt.StatObject(ctx, "bucket", key, minio.StatObjectOptions{}); err != nil {
					t.Fatalf("StatObject(%q): %v", key, err)
				}
				for range clnt.ListObjects(ctx, "bucket", minio.ListObjectsOptions{Prefix: key, Recursive: false}) {
				}
				// Presigned GET and PUT, used by plain HTTP clients.
				pu, err := clnt.PresignedGetObject(ctx, "bucket", key, time.Minute, url.Values{"response-content-type": {"text/plain; charset=utf-8"}})
				if err != nil {
					t.Fatal(err)
				}
				resp, err := srv.Client().Get(pu.String())
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("presigned GET %q: %s", key, resp.Status)
				}
				pp, err := clnt.PresignedPutObject(ctx, "bucket", key+".p", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				preq, _ := http.NewRequest(http.MethodPut, pp.String(), strings.NewReader("presigned"))
				resp, err = srv.Client().Do(preq)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("presigned PUT %q: %s", key, resp.Status)
				}
				if err := clnt.RemoveObject(ctx, "bucket", key, minio.RemoveObjectOptions{}); err != nil {
					t.Fatalf("RemoveObject(%q): %v", key, err)
				}
			}
			if !fake.modes[s.mode] {
				t.Errorf("payload modes seen %v, want %s among them", fake.modes, s.mode)
			}
			if s.mode == sigv4.StreamingUnsignedTrailer || s.mode == sigv4.StreamingPayloadTrailer {
				for k, tr := range fake.trailer {
					if tr.Get("X-Amz-Checksum-Crc32c") == "" {
						t.Errorf("%q: no crc32c trailer: %v", k, tr)
					}
				}
			}
			// A wrong secret is refused with the S3 code.
			bad, _ := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(testAK, "wrong", ""), Secure: s.tls, Transport: srv.Client().Transport, Region: "us-east-1"})
			_, err = bad.StatObject(ctx, "bucket", "x", minio.StatObjectOptions{})
			if minio.ToErrorResponse(err).StatusCode != 403 {
				t.Errorf("wrong secret: %v", err)
			}
			_, err = bad.PutObject(ctx, "bucket", "x", strings.NewReader("x"), 1, minio.PutObjectOptions{})
			if code := minio.ToErrorResponse(err).Code; code != sigv4.CodeSignatureDoesNotMatch {
				t.Errorf("wrong secret PUT: code %q (%v)", code, err)
			}
		})
	}
}
