package shardrpc

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Shard RPC authentication (see the package doc, "Authentication"): every
// request carries HeaderAuth, an HMAC-SHA256 over what it does, under a
// key derived from the cluster secret; the secret itself never travels.

// HeaderAuth carries a request's signature:
//
//	v1 t=<unix ms> n=<nonce, 32 hex> b=<body SHA-256, hex, or UNSIGNED-STREAM> s=<HMAC, hex>
const HeaderAuth = "X-Regen-Auth"

// UnsignedStream is the body digest of a request whose body is a stream
// that cannot be read twice (shard data): its header is signed, its bytes
// are not (see the package doc for what that allows).
const UnsignedStream = "UNSIGNED-STREAM"

// PathMetrics is the Prometheus endpoint of a shard server. Like
// PathHealth and PathReady it needs no signature, so scrapers and probes
// work without the cluster secret.
const PathMetrics = "/metrics"

// Defaults of a Verifier.
const (
	// DefaultAuthWindow is how far a request's time may be from the
	// server's, either way. Cluster clocks must agree within it (NTP);
	// nonces are remembered for as long as a request could be replayed.
	DefaultAuthWindow = 30 * time.Second
	// DefaultMaxNonces bounds the nonces remembered (about 64 bytes
	// each): at the default window, a server taking more than ~17,000
	// requests a second for a minute answers 503 rather than grow.
	DefaultMaxNonces = 1 << 20
	// MaxSignedBody is the largest body whose digest is signed: clients
	// sign rewindable bodies up to this size, and servers read such a
	// body whole to check it before the handler runs. Larger bodies and
	// streams are sent as UnsignedStream. Manifests (even of 10,000
	// parts) and repair requests are far smaller.
	MaxSignedBody = 64 << 20
	// DefaultBodyBudget bounds the signed bodies a server holds at once,
	// from the first byte read until the handler returns (so what the
	// handler decodes from them is bounded with them). A million-object
	// repair sends many manifest batches to one server at a time; without
	// a bound their bodies and decoded manifests took 270 MB of a shard
	// server's heap. A body larger than the budget waits until it is
	// alone.
	DefaultBodyBudget = 16 << 20
	// DefaultBodyWait is how long a request waits for body budget before
	// it is refused with 503 and Retry-After (which the Client retries).
	DefaultBodyWait = time.Second
)

// rpcKey derives the shard RPC signing key from the cluster secret. The
// gossip key is derived from the same secret under another label
// (internal/cluster), so neither key tells anything about the other.
func rpcKey(secret string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(secret), nil, "regen shard rpc v1", 32)
	if err != nil {
		panic("shardrpc: hkdf: " + err.Error()) // only for impossible lengths
	}
	return k
}

var emptySHA256 = hex.EncodeToString(sha256.New().Sum(nil))

// signature computes the hex HMAC of one request.
func signature(key []byte, method, host, uri string, ms int64, nonce, body string) string {
	m := hmac.New(sha256.New, key)
	for _, s := range []string{"regen-rpc-v1", method, host, uri, strconv.FormatInt(ms, 10), nonce, body} {
		m.Write([]byte(s))
		m.Write([]byte{'\n'})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// authTransport signs every request it carries.
type authTransport struct {
	base http.RoundTripper
	key  []byte
	now  func() time.Time
}

// NewAuthTransport returns a RoundTripper that signs every request with
// the key derived from secret and passes it to base (nil:
// http.DefaultTransport). Any client of shard servers, or of anything
// behind AuthMiddleware, sends through one; New wraps its HTTP client's
// transport in one, so every Client call is signed without further code.
func NewAuthTransport(secret string, base http.RoundTripper) http.RoundTripper {
	if t, ok := base.(*authTransport); ok {
		base = t.base // re-keying a signed transport, not signing twice
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &authTransport{base: base, key: rpcKey(secret), now: time.Now}
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	digest, err := bodyDigest(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("shardrpc: sign request: %w", err)
	}
	var nb [16]byte
	rand.Read(nb[:])
	nonce := hex.EncodeToString(nb[:])
	ms := t.now().UnixMilli()
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	sig := signature(t.key, req.Method, host, req.URL.RequestURI(), ms, nonce, digest)
	// NB: a RoundTripper must not change the caller's request.
	r := req.Clone(req.Context())
	r.Header.Set(HeaderAuth, "v1 t="+strconv.FormatInt(ms, 10)+" n="+nonce+" b="+digest+" s="+sig)
	return t.base.RoundTrip(r)
}

// bodyDigest is the SHA-256 of a rewindable body up to MaxSignedBody (read
// through GetBody, so the body itself is untouched), UnsignedStream for
// other bodies.
func bodyDigest(req *http.Request) (string, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return emptySHA256, nil
	}
	if req.GetBody == nil || req.ContentLength <= 0 || req.ContentLength > MaxSignedBody {
		return UnsignedStream, nil
	}
	rc, err := req.GetBody()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return "", err
	}
	if n != req.ContentLength {
		return "", fmt.Errorf("body has %d bytes, ContentLength says %d", n, req.ContentLength)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// WithTLS returns a copy of hc that speaks TLS with cfg to every shard
// server: its transport (an *http.Transport) gets cfg, and requests for
// http:// URLs go out as https://, so Client code that builds plain
// URLs needs no change. A nil cfg returns hc unchanged.
func WithTLS(hc *http.Client, cfg *tls.Config) *http.Client {
	if cfg == nil {
		return hc
	}
	if hc == nil {
		hc = NewHTTPClient()
	}
	out := *hc
	base := out.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if tr, ok := base.(*http.Transport); ok {
		tr = tr.Clone()
		tr.TLSClientConfig = cfg.Clone()
		base = tr
	}
	out.Transport = httpsTransport{base}
	return &out
}

// httpsTransport sends http:// requests as https://.
type httpsTransport struct{ base http.RoundTripper }

func (t httpsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	u := *req.URL
	u.Scheme = "https"
	r.URL = &u
	return t.base.RoundTrip(r)
}

// VerifierOptions tune a Verifier; zero values take the defaults.
type VerifierOptions struct {
	// Window is how far a request's time may be from now. Default
	// DefaultAuthWindow.
	Window time.Duration
	// MaxNonces bounds the nonces remembered. Default DefaultMaxNonces.
	MaxNonces int
	// Public are paths served without a signature. Default PathHealth,
	// PathReady and PathMetrics.
	Public []string
	// Logger receives refusals, at most one line per 10 s. Nil: none.
	Logger *slog.Logger
	// Now is the clock (tests). Default time.Now.
	Now func() time.Time
	// BodyBudget bounds the bytes of signed bodies held at once. Default
	// DefaultBodyBudget.
	BodyBudget int64
	// BodyWait is how long a request waits for body budget. Default
	// DefaultBodyWait.
	BodyWait time.Duration
}

// Verifier checks request signatures on a server and remembers the nonces
// it has seen within the window, so no request runs twice. One per
// process; it is safe for concurrent use.
type Verifier struct {
	key    []byte
	window time.Duration
	max    int
	public map[string]bool
	log    *slog.Logger
	now    func() time.Time
	// start: requests signed before the verifier existed are refused, so
	// a restart (which forgets the nonces) reopens no replay window.
	start time.Time
	// bodies is the signed-body budget (BodyBudget bytes), held from the
	// read of a body until its handler returns.
	bodies     *semaphore.Weighted
	budget     int64
	bodyWait   time.Duration
	bodyWaits  atomic.Int64 // requests that had to wait for budget
	bodyRefuse atomic.Int64 // requests refused after waiting BodyWait

	mu struct {
		sync.Mutex
		seen      map[[16]byte]int64 // nonce -> unix ms after which its request is stale
		lastSweep time.Time
	}
	lastLog atomic.Int64
}

// NewVerifier returns a Verifier for the key derived from secret.
func NewVerifier(secret string, o VerifierOptions) *Verifier {
	v := &Verifier{key: rpcKey(secret), window: o.Window, max: o.MaxNonces, log: o.Logger, now: o.Now, public: map[string]bool{}}
	if v.window <= 0 {
		v.window = DefaultAuthWindow
	}
	if v.max <= 0 {
		v.max = DefaultMaxNonces
	}
	if v.now == nil {
		v.now = time.Now
	}
	v.budget, v.bodyWait = o.BodyBudget, o.BodyWait
	if v.budget <= 0 {
		v.budget = DefaultBodyBudget
	}
	if v.bodyWait <= 0 {
		v.bodyWait = DefaultBodyWait
	}
	v.bodies = semaphore.NewWeighted(v.budget)
	if o.Public == nil {
		o.Public = []string{PathHealth, PathReady, PathMetrics}
	}
	for _, p := range o.Public {
		v.public[p] = true
	}
	v.start = time.UnixMilli(v.now().UnixMilli()) // the resolution of signed times
	v.mu.seen = map[[16]byte]int64{}
	v.mu.lastSweep = v.start
	return v
}

// AuthError is why a request was refused: Status is the HTTP status to
// answer (401, or 413/503 for limits), Reason says why without echoing
// anything the client sent.
type AuthError struct {
	Status int
	Reason string
}

// Error says why the request was refused.
func (e *AuthError) Error() string { return "shardrpc: request refused: " + e.Reason }

func refused(status int, format string, a ...any) *AuthError {
	return &AuthError{Status: status, Reason: fmt.Sprintf(format, a...)}
}

// Verify authenticates r. On success a signed body digest has been checked
// and r.Body replaced by the bytes read; an UnsignedStream body is left to
// stream. Errors are *AuthError. Verify takes no body budget: Middleware
// does.
func (v *Verifier) Verify(r *http.Request) error {
	a, err := v.verifyHeader(r)
	if err != nil {
		return err
	}
	if a.body == UnsignedStream {
		return nil
	}
	return checkBody(r, a.body)
}

// verifyHeader checks r's signature header and remembers its nonce; the
// body, if signed, is still to be checked against a.body.
func (v *Verifier) verifyHeader(r *http.Request) (authFields, error) {
	a, err := v.checkHeader(r)
	if err != nil {
		return a, err
	}
	return a, v.remember(a.nonceBytes, a.ms+v.window.Milliseconds(), v.now())
}

func (v *Verifier) checkHeader(r *http.Request) (authFields, error) {
	h := r.Header.Values(HeaderAuth)
	if len(h) != 1 {
		return authFields{}, refused(http.StatusUnauthorized, "no (or more than one) %s signature", HeaderAuth)
	}
	a, ok := parseAuth(h[0])
	if !ok {
		return a, refused(http.StatusUnauthorized, "malformed %s header", HeaderAuth)
	}
	now := v.now()
	t := time.UnixMilli(a.ms)
	if d := now.Sub(t); d > v.window || -d > v.window {
		return a, refused(http.StatusUnauthorized, "request time %s is more than %s from the server's %s", t.UTC().Format(time.RFC3339Nano), v.window, now.UTC().Format(time.RFC3339Nano))
	}
	if t.Before(v.start) {
		return a, refused(http.StatusUnauthorized, "request signed before this server started")
	}
	want := signature(v.key, r.Method, r.Host, r.RequestURI, a.ms, a.nonce, a.body)
	if !hmac.Equal([]byte(want), []byte(a.sig)) {
		return a, refused(http.StatusUnauthorized, "bad signature (wrong cluster secret, or the request was altered)")
	}
	return a, nil
}

// bodyWeight is how much of the body budget a signed body of r takes: its
// declared length (a signed body always declares one; a body without is
// counted as the largest allowed), at most the whole budget.
func (v *Verifier) bodyWeight(r *http.Request) int64 {
	n := r.ContentLength
	if n < 0 || n > MaxSignedBody {
		n = MaxSignedBody
	}
	return min(n, v.budget)
}

// acquireBody waits up to BodyWait for n bytes of body budget. The caller
// releases them with v.bodies.Release(n).
func (v *Verifier) acquireBody(ctx context.Context, n int64) error {
	if v.bodies.TryAcquire(n) {
		return nil
	}
	v.bodyWaits.Add(1)
	ctx, cancel := context.WithTimeout(ctx, v.bodyWait)
	defer cancel()
	if err := v.bodies.Acquire(ctx, n); err != nil {
		v.bodyRefuse.Add(1)
		return refused(http.StatusServiceUnavailable, "busy: %d bytes of request bodies held (the budget); retry", v.budget)
	}
	return nil
}

// BodyStats are the body budget's counters since the server started:
// Waited requests found the budget spent and waited, Refused ones waited
// BodyWait in vain and were answered 503.
type BodyStats struct {
	Waited, Refused int64
}

// BodyStats reports the body budget's counters.
func (v *Verifier) BodyStats() BodyStats {
	return BodyStats{Waited: v.bodyWaits.Load(), Refused: v.bodyRefuse.Load()}
}

// remember records a nonce, refusing one already seen.
func (v *Verifier) remember(n [16]byte, staleAt int64, now time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if now.Sub(v.mu.lastSweep) > v.window/2 || len(v.mu.seen) >= v.max {
		ms := now.UnixMilli()
		for k, exp := range v.mu.seen {
			if exp < ms {
				delete(v.mu.seen, k)
			}
		}
		v.mu.lastSweep = now
	}
	if _, dup := v.mu.seen[n]; dup {
		return refused(http.StatusUnauthorized, "replayed request (nonce already used)")
	}
	if len(v.mu.seen) >= v.max {
		return refused(http.StatusServiceUnavailable, "too many requests within the replay window; retry")
	}
	v.mu.seen[n] = staleAt
	return nil
}

// checkBody reads a signed body whole and compares its digest. A body
// that declares its length is read into a buffer of exactly that size (a
// growing buffer would hold up to twice the body at once).
func checkBody(r *http.Request, want string) error {
	if r.ContentLength > MaxSignedBody {
		return refused(http.StatusRequestEntityTooLarge, "signed body of %d bytes exceeds %d", r.ContentLength, MaxSignedBody)
	}
	var b []byte
	switch {
	case r.Body == nil || r.ContentLength == 0:
	case r.ContentLength > 0:
		b = make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return refused(http.StatusBadRequest, "reading body: %v", err)
		}
	default:
		var err error
		b, err = io.ReadAll(io.LimitReader(r.Body, MaxSignedBody+1))
		if err != nil {
			return refused(http.StatusBadRequest, "reading body: %v", err)
		}
		if len(b) > MaxSignedBody {
			return refused(http.StatusRequestEntityTooLarge, "signed body exceeds %d bytes", MaxSignedBody)
		}
	}
	sum := sha256.Sum256(b)
	if !hmac.Equal([]byte(hex.EncodeToString(sum[:])), []byte(want)) {
		return refused(http.StatusUnauthorized, "body does not match its signed digest")
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}

type authFields struct {
	ms         int64
	nonce      string
	nonceBytes [16]byte
	body, sig  string
}

func parseAuth(h string) (authFields, bool) {
	var a authFields
	f := strings.Fields(h)
	if len(f) != 5 || f[0] != "v1" {
		return a, false
	}
	var err error
	for i, name := range []string{"t=", "n=", "b=", "s="} {
		val, ok := strings.CutPrefix(f[i+1], name)
		if !ok {
			return a, false
		}
		switch name {
		case "t=":
			if a.ms, err = strconv.ParseInt(val, 10, 64); err != nil {
				return a, false
			}
		case "n=":
			if len(val) != 32 {
				return a, false
			}
			if _, err := hex.Decode(a.nonceBytes[:], []byte(val)); err != nil {
				return a, false
			}
			a.nonce = val
		case "b=":
			if val != UnsignedStream && len(val) != 64 {
				return a, false
			}
			a.body = val
		case "s=":
			a.sig = val
		}
	}
	return a, true
}

type verifiedKey struct{}

// Middleware returns h behind v: every request but the public paths must
// verify, or is answered with a JSON error (401 Unauthorized, 413, 503)
// and never reaches h. Wrap a server's whole mux in it, so every endpoint,
// including ones added later, is covered without per-endpoint code. It is
// idempotent: a request already verified by an outer Middleware (another
// Verifier of the same process) is not verified, nor its nonce used,
// twice.
func (v *Verifier) Middleware(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v.public[r.URL.Path] || r.Context().Value(verifiedKey{}) != nil {
			h.ServeHTTP(w, r)
			return
		}
		a, err := v.verifyHeader(r)
		switch {
		case err != nil || a.body == UnsignedStream:
		case r.ContentLength == 0:
			err = checkBody(r, a.body) // no body: nothing to hold
		default:
			n := v.bodyWeight(r)
			if err = v.acquireBody(r.Context(), n); err == nil {
				defer v.bodies.Release(n)
				err = checkBody(r, a.body)
			}
		}
		if err != nil {
			var ae *AuthError
			errors.As(err, &ae)
			v.logRefusal(r, ae)
			code := CodeUnauthorized
			switch ae.Status {
			case http.StatusServiceUnavailable:
				code = CodeUnavailable
				// NB: the request was refused before its handler ran,
				// so the Client may send it again (see Client.send).
				w.Header().Set(HeaderRetryAfter, "1")
			case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
				code = CodeBadRequest
			}
			WriteError(w, ae.Status, code, ae.Reason)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, true)))
	})
}

// AuthMiddleware is NewVerifier(secret, VerifierOptions{}).Middleware(h):
// h behind request signatures with the default window and public paths.
func AuthMiddleware(secret string, h http.Handler) http.Handler {
	return NewVerifier(secret, VerifierOptions{}).Middleware(h)
}

func (v *Verifier) logRefusal(r *http.Request, ae *AuthError) {
	if v.log == nil {
		return
	}
	now := time.Now().UnixNano()
	last := v.lastLog.Load()
	if now-last < int64(10*time.Second) || !v.lastLog.CompareAndSwap(last, now) {
		return
	}
	v.log.Warn("shard RPC refused", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "reason", ae.Reason)
}
