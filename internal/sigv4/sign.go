package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Values of x-amz-content-sha256 other than a hex SHA-256 of the body.
const (
	// UnsignedPayload: the body is not covered by the signature.
	UnsignedPayload = "UNSIGNED-PAYLOAD"
	// StreamingPayload: aws-chunked body, every chunk signed.
	StreamingPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	// StreamingPayloadTrailer: aws-chunked body, every chunk and the
	// trailing headers signed.
	StreamingPayloadTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	// StreamingUnsignedTrailer: aws-chunked body with trailing headers
	// (usually a checksum), nothing after the headers signed.
	StreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

	// EmptySHA256 is the hex SHA-256 of an empty body.
	EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

const (
	algorithm      = "AWS4-HMAC-SHA256"
	chunkAlgorithm = "AWS4-HMAC-SHA256-PAYLOAD"
	trailerAlgo    = "AWS4-HMAC-SHA256-TRAILER"
	service        = "s3"
	terminator     = "aws4_request"
	amzDateFormat  = "20060102T150405Z"
	scopeDate      = "20060102"

	// MaxPresignExpiry is the longest X-Amz-Expires S3 accepts: one week.
	MaxPresignExpiry = 7 * 24 * time.Hour
)

// IsStreaming reports whether payloadHash announces an aws-chunked body
// (one of the STREAMING-* values), to be read through NewChunkedReader.
func IsStreaming(payloadHash string) bool {
	switch payloadHash {
	case StreamingPayload, StreamingPayloadTrailer, StreamingUnsignedTrailer:
		return true
	}
	return false
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// SigningKey derives the SigV4 signing key for secret on date (only the UTC
// day counts) in region, for the s3 service.
func SigningKey(secret string, date time.Time, region string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date.UTC().Format(scopeDate))
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, terminator)
}

// scopeOf is "<yyyymmdd>/<region>/s3/aws4_request".
func scopeOf(date time.Time, region string) string {
	return date.UTC().Format(scopeDate) + "/" + region + "/" + service + "/" + terminator
}

// stringToSign is the SigV4 string to sign for a canonical request.
func stringToSign(date time.Time, scope, canonReq string) string {
	return algorithm + "\n" + date.UTC().Format(amzDateFormat) + "\n" + scope + "\n" + sha256Hex([]byte(canonReq))
}

// signature is the hex HMAC of the string to sign.
func signature(key []byte, sts string) string {
	return hex.EncodeToString(hmacSHA256(key, sts))
}

// unsignableHeaders are left out of the signatures Sign and Presign make:
// proxies and transports rewrite them (same choice as the AWS SDKs).
var unsignableHeaders = map[string]bool{
	"authorization":     true,
	"user-agent":        true,
	"accept-encoding":   true,
	"expect":            true,
	"connection":        true,
	"transfer-encoding": true,
	"x-amzn-trace-id":   true,
}

// headersToSign lists host plus every signable header of h, lower-cased and
// sorted.
func headersToSign(h http.Header) []string {
	names := []string{"host"}
	for k := range h {
		lk := strings.ToLower(k)
		if lk == "host" || unsignableHeaders[lk] {
			continue
		}
		names = append(names, lk)
	}
	sort.Strings(names)
	return names
}

func requestHost(req *http.Request) string {
	if req.Host != "" {
		return req.Host
	}
	return req.URL.Host
}

// Sign adds SigV4 header authentication to req: it sets X-Amz-Date,
// X-Amz-Content-Sha256 and Authorization, signing host and every header
// already on req except the transport ones (User-Agent, Accept-Encoding,
// Expect, ...). payloadHash is the hex SHA-256 of the body or one of the
// constants above; "" means EmptySHA256 when req has no body and
// UnsignedPayload otherwise. Set all other headers before calling Sign.
func Sign(req *http.Request, accessKey, secret, region string, now time.Time, payloadHash string) {
	now = now.UTC()
	if payloadHash == "" {
		payloadHash = UnsignedPayload
		if req.Body == nil || req.Body == http.NoBody {
			payloadHash = EmptySHA256
		}
	}
	req.Header.Del("Authorization")
	req.Header.Set("X-Amz-Date", now.Format(amzDateFormat))
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)

	signed := headersToSign(req.Header)
	params, _ := parseQuery(req.URL.RawQuery) // our own caller's URL: best effort
	uri, err := canonicalURI(req.URL.EscapedPath())
	if err != nil {
		uri = uriEncode(req.URL.Path, true)
	}
	creq := canonicalRequest(req.Method, uri, canonicalQuery(params, ""),
		canonicalHeaders(signed, req.Header, requestHost(req)), strings.Join(signed, ";"), payloadHash)
	scope := scopeOf(now, region)
	sig := signature(SigningKey(secret, now, region), stringToSign(now, scope, creq))
	req.Header.Set("Authorization", algorithm+" Credential="+accessKey+"/"+scope+
		", SignedHeaders="+strings.Join(signed, ";")+", Signature="+sig)
}

// Presign rewrites req.URL's query into a SigV4 presigned URL valid for
// expires from now (capped at MaxPresignExpiry, at least one second). Headers
// on req other than the transport ones are signed too, so whoever uses the
// URL must send them unchanged. The payload is UNSIGNED-PAYLOAD.
func Presign(req *http.Request, accessKey, secret, region string, now time.Time, expires time.Duration) {
	now = now.UTC()
	secs := int64(expires / time.Second)
	secs = min(max(secs, 1), int64(MaxPresignExpiry/time.Second))
	signed := headersToSign(req.Header)
	scope := scopeOf(now, region)

	params, _ := parseQuery(req.URL.RawQuery)
	kept := params[:0]
	for _, p := range params {
		if !strings.HasPrefix(p.key, "X-Amz-") || strings.HasPrefix(p.key, "X-Amz-Security-Token") {
			kept = append(kept, p)
		}
	}
	kept = append(kept,
		queryParam{"X-Amz-Algorithm", algorithm},
		queryParam{"X-Amz-Credential", accessKey + "/" + scope},
		queryParam{"X-Amz-Date", now.Format(amzDateFormat)},
		queryParam{"X-Amz-Expires", strconv.FormatInt(secs, 10)},
		queryParam{"X-Amz-SignedHeaders", strings.Join(signed, ";")},
	)
	query := canonicalQuery(kept, "")
	uri, err := canonicalURI(req.URL.EscapedPath())
	if err != nil {
		uri = uriEncode(req.URL.Path, true)
	}
	creq := canonicalRequest(req.Method, uri, query,
		canonicalHeaders(signed, req.Header, requestHost(req)), strings.Join(signed, ";"), UnsignedPayload)
	sig := signature(SigningKey(secret, now, region), stringToSign(now, scope, creq))
	// The canonical query is already a valid, fully escaped query string.
	req.URL.RawQuery = query + "&X-Amz-Signature=" + sig
}
