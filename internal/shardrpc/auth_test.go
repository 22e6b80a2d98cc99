package shardrpc

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// captured is a request as it went on the wire: what a capture on the
// cluster network sees.
type captured struct {
	method, url string
	header      http.Header
	body        []byte
}

// capturing wraps base and records every request it sends.
type capturing struct {
	base http.RoundTripper
	mu   sync.Mutex
	reqs []captured
}

func (c *capturing) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, captured{r.Method, r.URL.String(), r.Header.Clone(), body})
	c.mu.Unlock()
	return c.base.RoundTrip(r)
}

// replay sends a captured request again, byte for byte, unsigned by us.
func replay(t *testing.T, c captured, edit func(*http.Request)) int {
	t.Helper()
	req, _ := http.NewRequest(c.method, c.url, bytes.NewReader(c.body))
	req.Header = c.header.Clone()
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// authServer serves a counting handler behind a Verifier on clk.
func authServer(t *testing.T, clk *clock, o VerifierOptions) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var served atomic.Int64
	o.Now = clk.Now
	v := NewVerifier("cluster-secret", o)
	ts := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("handler read: %v", err)
		}
		served.Add(1)
		w.Write(b)
	})))
	t.Cleanup(ts.Close)
	return ts, &served
}

func TestSignedRequestsPassUnsignedDoNot(t *testing.T) {
	clk := &clock{now: time.Now()}
	ts, served := authServer(t, clk, VerifierOptions{})
	signed := &http.Client{Transport: NewAuthTransport("cluster-secret", nil)}
	resp, err := signed.Post(ts.URL+"/v1/manifests?bucket=b&key=k", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != `{"a":1}` {
		t.Fatalf("signed request: %d %q", resp.StatusCode, got)
	}
	for name, c := range map[string]*http.Client{
		"unsigned":     http.DefaultClient,
		"wrong secret": {Transport: NewAuthTransport("other-secret", nil)},
	} {
		resp, err := c.Get(ts.URL + "/v1/stats")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || resp.Header.Get(HeaderCode) != CodeUnauthorized {
			t.Errorf("%s: %d %s, want 401 Unauthorized", name, resp.StatusCode, resp.Header.Get(HeaderCode))
		}
	}
	if served.Load() != 1 {
		t.Fatalf("handler ran %d times, want once", served.Load())
	}
	// Public paths need no signature.
	resp, err = http.Get(ts.URL + PathHealth)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health probe: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestCapturedRequestCannotBeReused is what a capture of cluster traffic
// gives an attacker: a request replayed (within or after the window) or
// altered is refused, and the secret is nowhere in it.
func TestCapturedRequestCannotBeReused(t *testing.T) {
	clk := &clock{now: time.Now()}
	ts, served := authServer(t, clk, VerifierOptions{Window: 30 * time.Second})
	cap := &capturing{base: http.DefaultTransport}
	signed := &http.Client{Transport: NewAuthTransport("cluster-secret", cap)}
	resp, err := signed.Post(ts.URL+"/v1/buckets?x=1", "application/json", strings.NewReader(`{"name":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("original: %d", resp.StatusCode)
	}
	orig := cap.reqs[0]
	for k, vs := range orig.header {
		for _, v := range vs {
			if strings.Contains(v, "cluster-secret") {
				t.Fatalf("header %s carries the secret: %q", k, v)
			}
		}
	}
	cases := []struct {
		name string
		edit func(*http.Request)
	}{
		{"replayed as is", nil},
		{"other method", func(r *http.Request) { r.Method = http.MethodPut }},
		{"other path", func(r *http.Request) { r.URL.Path = "/v1/manifests" }},
		{"other query", func(r *http.Request) { r.URL.RawQuery = "x=2" }},
		{"other body", func(r *http.Request) {
			b := []byte(`{"name":"c"}`)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}},
		{"body marked unsigned", func(r *http.Request) {
			f := strings.Fields(r.Header.Get(HeaderAuth))
			f[3] = "b=" + UnsignedStream
			r.Header.Set(HeaderAuth, strings.Join(f, " "))
		}},
		{"other host", func(r *http.Request) { r.Host = "shard9:9100" }},
	}
	for _, c := range cases {
		if got := replay(t, orig, c.edit); got != 401 {
			t.Errorf("%s: %d, want 401", c.name, got)
		}
	}
	// After the window the nonce is forgotten, and the time refuses it.
	clk.Add(31 * time.Second)
	if got := replay(t, orig, nil); got != 401 {
		t.Errorf("replayed after the window: %d, want 401", got)
	}
	if served.Load() != 1 {
		t.Fatalf("handler ran %d times, want once", served.Load())
	}
}

func TestUnsignedStreamBodyStreams(t *testing.T) {
	clk := &clock{now: time.Now()}
	ts, served := authServer(t, clk, VerifierOptions{})
	cap := &capturing{base: http.DefaultTransport}
	signed := &http.Client{Transport: NewAuthTransport("cluster-secret", cap)}
	pr, pw := io.Pipe()
	go func() { pw.Write([]byte("shard data")); pw.Close() }()
	req, _ := http.NewRequest(http.MethodPut, ts.URL+ShardPath("f1", 0), pr)
	resp, err := signed.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != "shard data" {
		t.Fatalf("streamed PUT: %d %q", resp.StatusCode, got)
	}
	if h := cap.reqs[0].header.Get(HeaderAuth); !strings.Contains(h, " b="+UnsignedStream+" ") {
		t.Fatalf("a pipe body was signed as %q, want the unsigned-stream marker", h)
	}
	// The stream's header still cannot be replayed, with any body.
	if got := replay(t, cap.reqs[0], nil); got != 401 || served.Load() != 1 {
		t.Fatalf("replayed stream: %d (handler ran %d times)", got, served.Load())
	}
}

func TestSignedBeforeStartRefused(t *testing.T) {
	clk := &clock{now: time.Now()}
	tr := NewAuthTransport("cluster-secret", nil).(*authTransport)
	tr.now = func() time.Time { return clk.Now().Add(-5 * time.Second) } // signed 5 s before the server started
	ts, _ := authServer(t, clk, VerifierOptions{})
	resp, err := (&http.Client{Transport: tr}).Get(ts.URL + "/v1/stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("request signed before the server started: %d, want 401", resp.StatusCode)
	}
}

func TestNonceCacheBounded(t *testing.T) {
	clk := &clock{now: time.Now()}
	ts, _ := authServer(t, clk, VerifierOptions{MaxNonces: 3})
	tr := NewAuthTransport("cluster-secret", nil).(*authTransport)
	tr.now = clk.Now
	signed := &http.Client{Transport: tr}
	codes := []int{}
	for range 4 {
		resp, err := signed.Get(ts.URL + "/v1/stats")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if codes[2] != 200 || codes[3] != 503 {
		t.Fatalf("statuses %v: want 200s up to the cap, then 503", codes)
	}
	// Once the window has passed, the old nonces go and requests pass.
	clk.Add(time.Minute)
	resp, err := signed.Get(ts.URL + "/v1/stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after the window: %d, want 200 (expired nonces forgotten)", resp.StatusCode)
	}
}

func TestMiddlewareVerifiesOnce(t *testing.T) {
	var served atomic.Int64
	inner := AuthMiddleware("cluster-secret", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
	ts := httptest.NewServer(AuthMiddleware("cluster-secret", inner))
	defer ts.Close()
	resp, err := (&http.Client{Transport: NewAuthTransport("cluster-secret", nil)}).Get(ts.URL + "/v1/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || served.Load() != 1 {
		t.Fatalf("nested middlewares: %d, served %d (the inner one must not refuse the nonce the outer used)", resp.StatusCode, served.Load())
	}
}

func TestWithTLS(t *testing.T) {
	ts := httptest.NewTLSServer(AuthMiddleware("cluster-secret", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			t.Error("request arrived without TLS")
		}
		w.Write([]byte("ok"))
	})))
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	c := New("cluster-secret", WithTLS(nil, &tls.Config{RootCAs: pool}))
	// The client builds http:// URLs; WithTLS sends them over TLS.
	addr := strings.TrimPrefix(ts.URL, "https://")
	if err := c.call(t.Context(), addr, "probe", http.MethodGet, "/v1/x", nil, nil, nil); err != nil {
		t.Fatalf("signed call over TLS: %v", err)
	}
	// Without TLS the same server is unreachable.
	plain := New("cluster-secret", nil)
	if err := plain.call(t.Context(), addr, "probe", http.MethodGet, "/v1/x", nil, nil, nil); err == nil {
		t.Fatal("plain HTTP to a TLS server succeeded")
	}
}

func TestRecover(t *testing.T) {
	ts := httptest.NewServer(Recover(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/boom" {
			var m map[string]int
			//lint:ignore SA5000 the point: a real runtime panic, as a bug would cause
			m["x"] = 1
		}
		w.Write([]byte("fine"))
	})))
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/boom")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 || resp.Header.Get(HeaderCode) != CodeInternal || resp.Header.Get(HeaderRequestID) == "" {
		t.Fatalf("panicking handler: %d %v", resp.StatusCode, resp.Header)
	}
	resp, err = http.Get(ts.URL + "/other")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "fine" {
		t.Fatalf("after a panic, another request got %q", b)
	}
}

// FuzzVerifier: no header value, path or body gets a request past the
// Verifier without the key, and none makes it panic.
func FuzzVerifier(f *testing.F) {
	tr := NewAuthTransport("cluster-secret", nil).(*authTransport)
	req, _ := http.NewRequest(http.MethodPost, "http://h:1/v1/manifests?bucket=b", strings.NewReader(`{"a":1}`))
	var seed string
	tr.base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seed = r.Header.Get(HeaderAuth)
		return nil, io.EOF
	})
	tr.RoundTrip(req)
	f.Add(seed, "/v1/manifests?bucket=b", []byte(`{"a":1}`))
	f.Add("v1 t=0 n=00000000000000000000000000000000 b=UNSIGNED-STREAM s=", "/v1/shards/f/0", []byte("x"))
	f.Add("v1 t=-9223372036854775808 n=zz b= s=", "/", []byte(nil))
	v := NewVerifier("cluster-secret", VerifierOptions{})
	f.Fuzz(func(t *testing.T, auth, uri string, body []byte) {
		r, err := http.NewRequest(http.MethodPost, "http://h:1/", bytes.NewReader(body))
		if err != nil {
			return
		}
		r.RequestURI, r.Host = uri, "h:1"
		r.Header.Set(HeaderAuth, auth)
		err = v.Verify(r)
		if err == nil && auth != seed {
			t.Fatalf("a request with a forged signature %q passed", auth)
		}
		var ae *AuthError
		if err != nil && !errors.As(err, &ae) {
			t.Fatalf("error %T %v is not *AuthError", err, err)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
