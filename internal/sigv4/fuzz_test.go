package sigv4

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// fuzzVerifier knows one key pair, as a gateway would.
var fuzzVerifier = &Verifier{Creds: StaticCredentials{"AK": "SECRET"}, Region: "us-east-1"}

// checkVerify runs Verify and checks what it promises: no panic, failures
// are *Error with a 4xx status, and a success names the one known key.
func checkVerify(t *testing.T, r *Request) {
	t.Helper()
	res, err := fuzzVerifier.Verify(r)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Verify error %T %v is not *Error", err, err)
		}
		if e.HTTPStatus != 0 && (e.HTTPStatus < 400 || e.HTTPStatus >= 500) {
			t.Fatalf("Verify error %s with status %d", e.Code, e.HTTPStatus)
		}
		return
	}
	if res.AccessKey != "AK" {
		t.Fatalf("verified as %q", res.AccessKey)
	}
}

// FuzzVerifyHeader feeds the header-auth parser (Authorization, X-Amz-Date,
// x-amz-content-sha256) arbitrary values, starting from real signatures.
func FuzzVerifyHeader(f *testing.F) {
	for _, target := range []string{"http://h/b/k", "http://h/b/a%20b?list-type=2&prefix=x", "http://h/"} {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		Sign(req, "AK", "SECRET", "us-east-1", now, "")
		f.Add(req.Header.Get("Authorization"), req.Header.Get("X-Amz-Date"), req.Header.Get("X-Amz-Content-Sha256"), req.URL.EscapedPath(), req.URL.RawQuery)
	}
	f.Add("AWS4-HMAC-SHA256 Credential=AK/20260301/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00, Signature=11", "20260301T120000Z", UnsignedPayload, "/b/k", "")
	f.Add("AWS4-HMAC-SHA256 Credential=/////, SignedHeaders=;;;, Signature=", "x", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "/%zz", "a=%zz")
	f.Add("AWS AK:sig", "", "", "/", "")
	f.Fuzz(func(t *testing.T, auth, date, payload, path, query string) {
		h := http.Header{}
		h.Set("Authorization", auth)
		h.Set("X-Amz-Date", date)
		h.Set("X-Amz-Content-Sha256", payload)
		h.Set("Host", "h")
		checkVerify(t, &Request{Method: http.MethodGet, Path: path, RawQuery: query, Host: "h", Header: h, Now: now})
	})
}

// FuzzVerifyQuery feeds the presigned-URL parser arbitrary query strings,
// starting from real presigned URLs (and one with a repeated signature).
func FuzzVerifyQuery(f *testing.F) {
	for _, target := range []string{"http://h/b/k", "http://h/b/k?partNumber=2&uploadId=u%2Bv"} {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		Presign(req, "AK", "SECRET", "us-east-1", now, time.Hour)
		f.Add(req.URL.EscapedPath(), req.URL.RawQuery)
		f.Add(req.URL.EscapedPath(), req.URL.RawQuery+"&X-Amz-Signature="+strings.Repeat("0", 64))
	}
	f.Add("/b/k", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=-1&X-Amz-Credential=%2F%2F%2F%2F")
	f.Add("/b/k", "X-Amz-Signature&X-Amz-Signature=&&&=")
	f.Fuzz(func(t *testing.T, path, query string) {
		checkVerify(t, &Request{Method: http.MethodGet, Path: path, RawQuery: query, Host: "h", Header: http.Header{}, Now: now.Add(time.Minute)})
		// The canonical forms must not panic either, and a query they
		// parse must canonicalize to something that parses again.
		canonicalURI(path)
		if params, err := parseQuery(query); err == nil {
			if _, err := url.ParseQuery(canonicalQuery(params, "")); err != nil {
				t.Fatalf("canonical query of %q does not parse: %v", query, err)
			}
		}
	})
}
