package sigv4

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func toRequest(req *http.Request, at time.Time) *Request {
	h := req.Header.Clone()
	return &Request{Method: req.Method, Path: req.URL.EscapedPath(), RawQuery: req.URL.RawQuery, Host: req.URL.Host, Header: h, Now: at}
}

func signedGet(t *testing.T, target string, mutate func(*http.Request)) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(req)
	}
	Sign(req, "AK", "SECRET", "us-east-1", now, "")
	return req
}

func TestSignVerifyRoundTrip(t *testing.T) {
	v := &Verifier{Creds: StaticCredentials{"AK": "SECRET"}, Region: "us-east-1"}
	targets := []string{
		"http://h/b/k",
		"http://h/b/a%20b%2Bc",
		"http://h/b/%D0%BA%D0%BB%D1%8E%D1%87",
		"http://h/b/dir//x/../y/./z",
		"http://h/b?list-type=2&prefix=a%20b&delimiter=%2F&continuation-token=abc%3D%3D",
		"http://h/b?uploads",
		"http://h/b/k?partNumber=2&uploadId=u%2Bv",
		"http://h:9000/",
	}
	for _, target := range targets {
		req := signedGet(t, target, func(r *http.Request) {
			r.Header.Set("X-Amz-Meta-A", " x   y ")
			r.Header.Add("X-Amz-Meta-B", "1")
			r.Header.Add("X-Amz-Meta-B", "2")
		})
		if _, err := v.Verify(toRequest(req, now)); err != nil {
			t.Errorf("%s: %v", target, err)
		}
		p, _ := http.NewRequest(http.MethodGet, target, nil)
		Presign(p, "AK", "SECRET", "us-east-1", now, time.Hour)
		res, err := v.Verify(toRequest(p, now.Add(59*time.Minute)))
		if err != nil {
			t.Errorf("presigned %s: %v", target, err)
		} else if !res.Presigned {
			t.Errorf("presigned %s: Presigned false", target)
		}
	}
}

func TestVerifyErrors(t *testing.T) {
	v := &Verifier{Creds: StaticCredentials{"AK": "SECRET"}, Region: "us-east-1"}
	presigned := func(mutate func(*http.Request)) *Request {
		req, _ := http.NewRequest(http.MethodGet, "http://h/b/k", nil)
		Presign(req, "AK", "SECRET", "us-east-1", now, time.Hour)
		if mutate != nil {
			mutate(req)
		}
		return toRequest(req, now)
	}
	setQuery := func(key, val string) func(*http.Request) {
		return func(r *http.Request) {
			q := r.URL.Query()
			q.Set(key, val)
			r.URL.RawQuery = q.Encode()
		}
	}
	header := func(mutate func(*http.Request)) *Request {
		r := toRequest(signedGet(t, "http://h/b/k", nil), now)
		if mutate == nil {
			return r
		}
		return r.with(mutate)
	}
	cases := []struct {
		name string
		req  *Request
		code string
		msg  string
	}{
		{"no auth", &Request{Method: "GET", Path: "/b/k", Host: "h", Header: http.Header{}, Now: now}, CodeAccessDenied, ""},
		{"sigv2 header", &Request{Method: "GET", Path: "/b/k", Host: "h", Header: hdr("Authorization", "AWS AK:c2ln"), Now: now}, CodeAccessDenied, ""},
		{"sigv2 query", &Request{Method: "GET", Path: "/b/k", RawQuery: "AWSAccessKeyId=AK&Signature=x&Expires=1", Host: "h", Header: http.Header{}, Now: now}, CodeAccessDenied, ""},
		{"unknown scheme", header(func(r *http.Request) { r.Header.Set("Authorization", "Bearer x") }), CodeInvalidArgument, ""},
		{"two mechanisms", header(func(r *http.Request) { r.URL.RawQuery = "X-Amz-Algorithm=AWS4-HMAC-SHA256" }), CodeInvalidArgument, ""},
		{"unknown key", header(func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "Credential=AK/", "Credential=NOPE/", 1))
		}), CodeInvalidAccessKeyID, msgInvalidAccessKeyID},
		{"bad signature", header(func(r *http.Request) {
			a := r.Header.Get("Authorization")
			r.Header.Set("Authorization", a[:len(a)-4]+"0000")
		}), CodeSignatureDoesNotMatch, msgSignatureDoesNotMatch},
		{"tampered header", header(func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", UnsignedPayload) }), CodeSignatureDoesNotMatch, ""},
		{"tampered method", header(func(r *http.Request) { r.Method = "DELETE" }), CodeSignatureDoesNotMatch, ""},
		{"unsigned amz header", header(func(r *http.Request) { r.Header.Set("X-Amz-Meta-Evil", "1") }), CodeAccessDenied, ""},
		{"host not signed", header(func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "SignedHeaders=host;", "SignedHeaders=", 1))
		}), CodeAuthorizationHeaderMalformed, ""},
		{"malformed credential", header(func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/s3/aws4_request", "/aws4_request", 1))
		}), CodeAuthorizationHeaderMalformed, ""},
		{"wrong service", header(func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/s3/", "/iam/", 1))
		}), CodeAuthorizationHeaderMalformed, ""},
		{"wrong region", header(func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/us-east-1/", "/eu-west-1/", 1))
		}), CodeAuthorizationHeaderMalformed, "the region 'eu-west-1' is wrong; expecting 'us-east-1'"},
		{"scope date differs", header(func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/20260301/", "/20260302/", 1))
		}), CodeAuthorizationHeaderMalformed, ""},
		{"missing fields", header(func(r *http.Request) {
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AK/20260301/us-east-1/s3/aws4_request")
		}), CodeAuthorizationHeaderMalformed, ""},
		{"no date", header(func(r *http.Request) { r.Header.Del("X-Amz-Date") }), CodeAccessDenied, ""},
		{"bad date", header(func(r *http.Request) { r.Header.Set("X-Amz-Date", "yesterday") }), CodeAccessDenied, ""},
		{"skewed", toRequest(signedGet(t, "http://h/b/k", nil), now.Add(16*time.Minute)), CodeRequestTimeTooSkewed, msgTooSkewed},
		{"skewed future", toRequest(signedGet(t, "http://h/b/k", nil), now.Add(-16*time.Minute)), CodeRequestTimeTooSkewed, ""},
		{"no content sha", header(func(r *http.Request) { r.Header.Del("X-Amz-Content-Sha256") }), CodeInvalidRequest, ""},
		{"bad content sha", header(func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", "abc") }), CodeInvalidArgument, ""},
		{"bad escape in path", header(nil).withPath("/b/%zz"), CodeInvalidURI, ""},

		{"presigned expired", presigned(nil).at(now.Add(time.Hour + time.Second)), CodeAccessDenied, msgExpired},
		{"presigned not yet valid", presigned(nil).at(now.Add(-time.Hour)), CodeAccessDenied, ""},
		{"presigned expires too long", presigned(setQuery("X-Amz-Expires", "604801")), CodeAuthorizationQueryParametersError, ""},
		{"presigned expires zero", presigned(setQuery("X-Amz-Expires", "0")), CodeAuthorizationQueryParametersError, ""},
		{"presigned expires nan", presigned(setQuery("X-Amz-Expires", "soon")), CodeAuthorizationQueryParametersError, ""},
		{"presigned bad algorithm", presigned(setQuery("X-Amz-Algorithm", "AWS4-HMAC-SHA1")), CodeAuthorizationQueryParametersError, ""},
		{"presigned bad date", presigned(setQuery("X-Amz-Date", "2026-03-01")), CodeAuthorizationQueryParametersError, ""},
		{"presigned missing signature", presigned(func(r *http.Request) {
			q := r.URL.Query()
			q.Del("X-Amz-Signature")
			r.URL.RawQuery = q.Encode()
		}), CodeAuthorizationQueryParametersError, ""},
		{"presigned tampered", presigned(func(r *http.Request) { r.URL.RawQuery += "&versionId=1" }), CodeSignatureDoesNotMatch, ""},
		{"presigned unsigned amz header", presigned(func(r *http.Request) { r.Header.Set("X-Amz-Acl", "public-read") }), CodeAccessDenied, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := v.Verify(c.req)
			if res != nil {
				t.Fatalf("got a Result with err %v", err)
			}
			assertCode(t, err, c.code)
			var se *Error
			errors.As(err, &se)
			if c.msg != "" && se.Message != c.msg {
				t.Errorf("message %q, want %q", se.Message, c.msg)
			}
		})
	}
	// Anonymous requests are recognisable.
	_, err := v.Verify(cases[0].req)
	if !errors.Is(err, ErrNoAuth) {
		t.Errorf("no-auth error does not wrap ErrNoAuth: %v", err)
	}
}

// with applies mutate to a copy of r rebuilt as an *http.Request.
func (r *Request) with(mutate func(*http.Request)) *Request {
	req, _ := http.NewRequest(r.Method, "http://"+r.Host+r.Path, nil)
	req.URL.RawQuery = r.RawQuery
	req.Header = r.Header.Clone()
	mutate(req)
	out := toRequest(req, r.Now)
	out.Method = req.Method
	return out
}

func (r *Request) withPath(p string) *Request {
	c := *r
	c.Path = p
	return &c
}

func (r *Request) at(t time.Time) *Request {
	c := *r
	c.Now = t
	return &c
}

func TestAnyRegionWhenUnset(t *testing.T) {
	v := &Verifier{Creds: StaticCredentials{"AK": "SECRET"}}
	req, _ := http.NewRequest(http.MethodGet, "http://h/b/k", nil)
	Sign(req, "AK", "SECRET", "garage", now, "")
	res, err := v.Verify(toRequest(req, now))
	if err != nil || res.Region != "garage" {
		t.Fatalf("res %+v err %v", res, err)
	}
}

func TestSHA256Reader(t *testing.T) {
	body := []byte("Welcome to Amazon S3.")
	const want = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
	got, err := io.ReadAll(NewSHA256Reader(bytes.NewReader(body), strings.ToUpper(want)))
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("good body: %v", err)
	}
	r := NewSHA256Reader(bytes.NewReader(append(body, '!')), want)
	_, err = io.ReadAll(r)
	assertCode(t, err, CodeXAmzContentSHA256Mismatch)
	if _, err2 := r.Read(make([]byte, 8)); err2 != err {
		t.Errorf("error not sticky: %v", err2)
	}
}

func TestCanonicalPieces(t *testing.T) {
	uris := map[string]string{
		"":                "/",
		"/":               "/",
		"/b/a%20b":        "/b/a%20b",
		"/b/a+b":          "/b/a%2Bb",
		"/b/a%2bb":        "/b/a%2Bb",
		"/b/%7Etilde~":    "/b/~tilde~",
		"/b/x%2Fy":        "/b/x%2Fy",
		"/b//a/../c/./d":  "/b//a/../c/./d",
		"/b/ключ":         "/b/%D0%BA%D0%BB%D1%8E%D1%87",
		"/b/!$&'()*,;=:@": "/b/%21%24%26%27%28%29%2A%2C%3B%3D%3A%40",
		"/b/100%25":       "/b/100%25",
	}
	for in, want := range uris {
		got, err := canonicalURI(in)
		if err != nil || got != want {
			t.Errorf("canonicalURI(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	queries := map[string]string{
		"":                        "",
		"acl":                     "acl=",
		"b=2&a=2&a=1":             "a=1&a=2&b=2",
		"prefix=a+b":              "prefix=a%20b",
		"prefix=a%2Bb":            "prefix=a%2Bb",
		"prefix=%7E*":             "prefix=~%2A",
		"X-Amz-Signature=x&z=%2F": "X-Amz-Signature=x&z=%2F",
	}
	for in, want := range queries {
		p, err := parseQuery(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := canonicalQuery(p, ""); got != want {
			t.Errorf("canonicalQuery(%q) = %q, want %q", in, got, want)
		}
	}
	p, _ := parseQuery("X-Amz-Signature=x&z=1")
	if got := canonicalQuery(p, "X-Amz-Signature"); got != "z=1" {
		t.Errorf("skip: %q", got)
	}
	for in, want := range map[string]string{"  a   b  ": "a b", "a\t\tb": "a b", "ab": "ab", "": ""} {
		if got := trimAll(in); got != want {
			t.Errorf("trimAll(%q) = %q", in, got)
		}
	}
}
