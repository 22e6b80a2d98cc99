package sigv4

import (
	"crypto/hmac"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Request is what the verifier needs from an HTTP request.
type Request struct {
	Method   string
	Path     string      // the raw, still-escaped request path exactly as sent (e.g. "/bucket/a%20b")
	RawQuery string      // raw query string as sent, without '?'
	Host     string      // Host header (":authority" on HTTP/2)
	Header   http.Header // canonical keys; must include Content-Length etc. if the client sent them
	Now      time.Time   // server time, for skew and expiry checks
}

// Credentials looks up the secret key of an access key. It is called once
// per request and must be safe for concurrent use.
type Credentials interface {
	SecretKey(accessKey string) (secret string, ok bool)
}

// StaticCredentials is a fixed access-key to secret-key map.
type StaticCredentials map[string]string

// SecretKey implements Credentials.
func (c StaticCredentials) SecretKey(accessKey string) (string, bool) {
	s, ok := c[accessKey]
	return s, ok
}

// DefaultMaxSkew is the clock difference S3 tolerates between the request's
// timestamp and the server.
const DefaultMaxSkew = 15 * time.Minute

// Verifier checks SigV4 signatures. The zero value is not usable: Creds must
// be set. A Verifier is safe for concurrent use if Creds is.
type Verifier struct {
	Creds Credentials
	// Region the scope must name; "" accepts any region (clients default to
	// us-east-1, and a single-region store has no reason to refuse them).
	Region string
	// MaxSkew bounds |request time - Now| for header auth and how far in the
	// future a presigned URL may start; 0 means DefaultMaxSkew.
	MaxSkew time.Duration
}

// Result describes an authenticated request.
type Result struct {
	AccessKey string
	Region    string    // region named in the credential scope
	Date      time.Time // the request's signing time (X-Amz-Date), UTC
	Presigned bool
	// PayloadHash is what the body must be checked against: a lower-case
	// hex SHA-256, UnsignedPayload, or one of the Streaming* constants.
	PayloadHash string
	SigningKey  []byte // derived key; chunk signatures are made with it
	Signature   string // the request (seed) signature
	Scope       string // "<yyyymmdd>/<region>/s3/aws4_request"
}

// ErrNoAuth is wrapped by the AccessDenied error Verify returns for a request
// that carries no authentication at all, so a gateway that later serves
// public buckets can tell anonymous requests from bad ones with errors.Is.
var ErrNoAuth = errors.New("request carries no authentication")

// authInfo is what header and query authentication both provide.
type authInfo struct {
	accessKey   string
	date        time.Time
	scopeDate   string
	region      string
	signed      []string
	signature   string
	payloadHash string
	presigned   bool
	badCode     string // error code for malformed auth components
}

// Verify authenticates r with SigV4, either from the Authorization header or
// from presigned query parameters. On success the Result says how the body
// must be verified; see the package documentation. All failures are *Error.
func (v *Verifier) Verify(r *Request) (*Result, error) {
	params, err := parseQuery(r.RawQuery)
	if err != nil {
		return nil, err
	}
	// NB: the headers the signature's meaning rests on, once each: a
	// second value would be signed (joined) but not used, or used but not
	// signed.
	for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Content-Sha256", "Date"} {
		if len(r.Header.Values(h)) > 1 {
			return nil, newError(CodeInvalidArgument, "The %s header appears more than once.", h)
		}
	}
	auth := r.Header.Get("Authorization")
	queryV4 := hasParam(params, "X-Amz-Algorithm") || hasParam(params, "X-Amz-Signature") || hasParam(params, "X-Amz-Credential")
	queryV2 := hasParam(params, "AWSAccessKeyId") && hasParam(params, "Signature")

	var info *authInfo
	switch {
	case auth != "" && (queryV4 || queryV2):
		return nil, newError(CodeInvalidArgument, "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified")
	case auth != "":
		info, err = v.parseHeaderAuth(r, auth)
	case queryV4:
		info, err = v.parseQueryAuth(r, params)
	case queryV2:
		return nil, newError(CodeAccessDenied, "Signature Version 2 is not supported; sign requests with AWS Signature Version 4.")
	default:
		return nil, wrapError(ErrNoAuth, CodeAccessDenied, "Access Denied")
	}
	if err != nil {
		return nil, err
	}
	return v.check(r, params, info)
}

func hasParam(params []queryParam, key string) bool {
	for _, p := range params {
		if p.key == key {
			return true
		}
	}
	return false
}

// presignParams are the query parameters of a presigned URL's signature.
var presignParams = []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
	"X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}

func countParam(params []queryParam, key string) int {
	n := 0
	for _, p := range params {
		if p.key == key {
			n++
		}
	}
	return n
}

func param(params []queryParam, key string) (string, bool) {
	for _, p := range params {
		if p.key == key {
			return p.value, true
		}
	}
	return "", false
}

func (v *Verifier) maxSkew() time.Duration {
	if v.MaxSkew > 0 {
		return v.MaxSkew
	}
	return DefaultMaxSkew
}

// parseHeaderAuth reads "AWS4-HMAC-SHA256 Credential=AK/date/region/s3/aws4_request,
// SignedHeaders=a;b, Signature=hex" and the request timestamp.
func (v *Verifier) parseHeaderAuth(r *Request, auth string) (*authInfo, error) {
	algo, rest, _ := strings.Cut(strings.TrimSpace(auth), " ")
	switch algo {
	case algorithm:
	case "AWS":
		return nil, newError(CodeAccessDenied, "Signature Version 2 is not supported; sign requests with AWS Signature Version 4.")
	case "AWS4-ECDSA-P256-SHA256":
		return nil, newError(CodeAccessDenied, "Signature Version 4A is not supported; sign requests with AWS Signature Version 4.")
	default:
		return nil, newError(CodeInvalidArgument, "Unsupported Authorization Type")
	}
	info := &authInfo{badCode: CodeAuthorizationHeaderMalformed}
	var cred, signed, sig string
	seen := map[string]bool{}
	for part := range strings.SplitSeq(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, newError(info.badCode, "The authorization header is malformed; the authorization component %q is malformed.", strings.TrimSpace(part))
		}
		if seen[k] {
			return nil, newError(info.badCode, "The authorization header is malformed; the authorization component %q appears more than once.", k)
		}
		seen[k] = true
		switch k {
		case "Credential":
			cred = val
		case "SignedHeaders":
			signed = val
		case "Signature":
			sig = val
		}
	}
	if cred == "" || signed == "" || sig == "" {
		return nil, newError(info.badCode, "The authorization header is malformed; it must contain Credential, SignedHeaders and Signature.")
	}
	if err := info.parseCredential(cred); err != nil {
		return nil, err
	}
	info.signed = strings.Split(signed, ";")
	info.signature = sig

	if d := r.Header.Get("X-Amz-Date"); d != "" {
		t, err := time.Parse(amzDateFormat, d)
		if err != nil {
			return nil, newError(CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
		}
		info.date = t
	} else if d := r.Header.Get("Date"); d != "" {
		t, err := http.ParseTime(d)
		if err != nil {
			return nil, newError(CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
		}
		info.date = t.UTC()
	} else {
		return nil, newError(CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
	}
	if skew := r.Now.Sub(info.date); skew > v.maxSkew() || -skew > v.maxSkew() {
		return nil, newError(CodeRequestTimeTooSkewed, msgTooSkewed)
	}

	// S3 requires x-amz-content-sha256 on every header-signed request: it is
	// the only thing that binds the body to the signature.
	ph := r.Header.Get("X-Amz-Content-Sha256")
	if ph == "" {
		return nil, newError(CodeInvalidRequest, "Missing required header for this request: x-amz-content-sha256")
	}
	if !validPayloadHash(ph) {
		return nil, newError(CodeInvalidArgument, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.")
	}
	info.payloadHash = ph
	return info, nil
}

// parseQueryAuth reads the X-Amz-* parameters of a presigned URL and
// enforces its validity window.
func (v *Verifier) parseQueryAuth(r *Request, params []queryParam) (*authInfo, error) {
	info := &authInfo{badCode: CodeAuthorizationQueryParametersError, presigned: true}
	// NB: each signing parameter once: with two X-Amz-Signature values,
	// which one was checked and which one a proxy or log saw would differ.
	for _, k := range presignParams {
		if countParam(params, k) > 1 {
			return nil, newError(info.badCode, "The %s parameter appears more than once.", k)
		}
	}
	algo, _ := param(params, "X-Amz-Algorithm")
	cred, okC := param(params, "X-Amz-Credential")
	date, okD := param(params, "X-Amz-Date")
	exp, okE := param(params, "X-Amz-Expires")
	signed, okS := param(params, "X-Amz-SignedHeaders")
	sig, okG := param(params, "X-Amz-Signature")
	if algo != algorithm {
		return nil, newError(info.badCode, "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"")
	}
	if !okC || !okD || !okE || !okS || !okG || cred == "" || signed == "" || sig == "" {
		return nil, newError(info.badCode, "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.")
	}
	if err := info.parseCredential(cred); err != nil {
		return nil, err
	}
	info.signed = strings.Split(signed, ";")
	info.signature = sig

	t, err := time.Parse(amzDateFormat, date)
	if err != nil {
		return nil, newError(info.badCode, "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	info.date = t
	secs, err := strconv.ParseInt(exp, 10, 64)
	switch {
	case err != nil:
		return nil, newError(info.badCode, "X-Amz-Expires should be a number")
	case secs < 1:
		return nil, newError(info.badCode, "X-Amz-Expires must be non-negative")
	case secs > int64(MaxPresignExpiry/time.Second):
		return nil, newError(info.badCode, "X-Amz-Expires must be less than a week (in seconds) that is 604800")
	}
	if t.Sub(r.Now) > v.maxSkew() {
		return nil, newError(CodeAccessDenied, "Request is not valid yet")
	}
	if r.Now.After(t.Add(time.Duration(secs) * time.Second)) {
		return nil, newError(CodeAccessDenied, msgExpired)
	}

	// Presigned URLs carry no payload hash unless the client put one in a
	// (then signed) header or in the query; otherwise S3 signs UNSIGNED-PAYLOAD.
	info.payloadHash = UnsignedPayload
	if ph := r.Header.Get("X-Amz-Content-Sha256"); ph != "" {
		info.payloadHash = ph
	} else if ph, ok := param(params, "X-Amz-Content-Sha256"); ok && ph != "" {
		info.payloadHash = ph
	}
	if !validPayloadHash(info.payloadHash) {
		return nil, newError(CodeInvalidArgument, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD or a valid sha256 value.")
	}
	return info, nil
}

// parseCredential splits "AK/yyyymmdd/region/s3/aws4_request".
func (a *authInfo) parseCredential(cred string) error {
	parts := strings.Split(cred, "/")
	if len(parts) < 5 {
		return newError(a.badCode, "the Credential %q is malformed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".", cred)
	}
	n := len(parts)
	a.accessKey = strings.Join(parts[:n-4], "/")
	a.scopeDate, a.region = parts[n-4], parts[n-3]
	if a.accessKey == "" || a.region == "" {
		return newError(a.badCode, "the Credential %q is malformed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".", cred)
	}
	if _, err := time.Parse(scopeDate, a.scopeDate); err != nil {
		return newError(a.badCode, "Invalid credential date %q. This date is not the same as X-Amz-Date.", a.scopeDate)
	}
	if parts[n-2] != service {
		return newError(a.badCode, "The authorization header is malformed; incorrect service %q. This endpoint belongs to \"s3\".", parts[n-2])
	}
	if parts[n-1] != terminator {
		return newError(a.badCode, "The authorization header is malformed; incorrect terminal %q. This endpoint uses \"aws4_request\".", parts[n-1])
	}
	return nil
}

// validPayloadHash accepts the literal x-amz-content-sha256 values and 64 hex
// digits.
func validPayloadHash(h string) bool {
	if h == UnsignedPayload || IsStreaming(h) {
		return true
	}
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// normalizePayloadHash lower-cases a hex digest (the canonical request used
// it as sent) and leaves the literal values alone.
func normalizePayloadHash(h string) string {
	if h == UnsignedPayload || IsStreaming(h) {
		return h
	}
	return strings.ToLower(h)
}

// check does what header and query auth share: scope, signed-header rules,
// key lookup and the signature itself.
func (v *Verifier) check(r *Request, params []queryParam, info *authInfo) (*Result, error) {
	if info.scopeDate != info.date.Format(scopeDate) {
		return nil, newError(info.badCode, "Invalid credential date %q. This date is not the same as X-Amz-Date: %q.", info.scopeDate, info.date.Format(scopeDate))
	}
	if v.Region != "" && info.region != v.Region {
		return nil, newError(info.badCode, "the region '%s' is wrong; expecting '%s'", info.region, v.Region)
	}
	if err := checkSignedHeaders(r.Header, info); err != nil {
		return nil, err
	}
	secret, ok := v.Creds.SecretKey(info.accessKey)
	if !ok {
		return nil, newError(CodeInvalidAccessKeyID, msgInvalidAccessKeyID)
	}

	skip := ""
	if info.presigned {
		skip = "X-Amz-Signature"
	}
	query := canonicalQuery(params, skip)
	headers := canonicalHeaders(info.signed, r.Header, r.Host)
	signedList := strings.Join(info.signed, ";")
	key := SigningKey(secret, info.date, info.region)
	scope := info.scopeDate + "/" + info.region + "/" + service + "/" + terminator

	uri, err := canonicalURI(r.Path)
	if err != nil {
		return nil, err
	}
	// The AWS form of the path is what every SDK signs. A few hand-rolled
	// clients sign the path exactly as they sent it; accepting that second
	// form is safe because both describe the same raw request bytes.
	candidates := []string{uri}
	if r.Path != uri && r.Path != "" {
		candidates = append(candidates, r.Path)
	}
	for _, u := range candidates {
		creq := canonicalRequest(r.Method, u, query, headers, signedList, info.payloadHash)
		want := signature(key, stringToSign(info.date, scope, creq))
		if hmac.Equal([]byte(want), []byte(strings.ToLower(info.signature))) {
			return &Result{
				AccessKey:   info.accessKey,
				Region:      info.region,
				Date:        info.date,
				Presigned:   info.presigned,
				PayloadHash: normalizePayloadHash(info.payloadHash),
				SigningKey:  key,
				Signature:   want,
				Scope:       scope,
			}, nil
		}
	}
	return nil, newError(CodeSignatureDoesNotMatch, msgSignatureDoesNotMatch)
}

// checkSignedHeaders enforces S3's rules on SignedHeaders: lower-case names,
// host among them, and every x-amz-* header the request carries signed (an
// unsigned one could be added by anyone replaying the request, e.g. an
// x-amz-meta-* or x-amz-acl on a presigned PUT).
func checkSignedHeaders(h http.Header, info *authInfo) error {
	set := make(map[string]bool, len(info.signed))
	for _, n := range info.signed {
		if n == "" || n != strings.ToLower(n) {
			return newError(info.badCode, "SignedHeaders %q is malformed; header names must be lower-case and separated by ';'.", strings.Join(info.signed, ";"))
		}
		set[n] = true
	}
	if !set["host"] {
		return newError(info.badCode, "The host header must be signed.")
	}
	var unsigned []string
	for k := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-") && !set[lk] {
			unsigned = append(unsigned, lk)
		}
	}
	if len(unsigned) > 0 {
		return newError(CodeAccessDenied, "There were headers present in the request which were not signed: %s", strings.Join(unsigned, ", "))
	}
	return nil
}
