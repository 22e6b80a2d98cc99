package sigv4

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// This file builds the pieces of the SigV4 canonical request. Everything here
// is a pure function of the request as the client sent it; see
// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html.

const upperhex = "0123456789ABCDEF"

// uriEncode percent-encodes s the way SigV4 wants: every byte except the
// RFC 3986 unreserved characters (A-Z a-z 0-9 - _ . ~) becomes %XX with
// upper-case hex. '/' is kept only when keepSlash is set (object key paths).
// Unlike url.PathEscape it encodes '+', '$', '!', '*', '(' and so on, and
// unlike url.QueryEscape it writes a space as %20, never '+'.
func uriEncode(s string, keepSlash bool) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && keepSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(upperhex[c>>4])
			b.WriteByte(upperhex[c&15])
		}
	}
	return b.String()
}

// canonicalURI turns the raw, still-escaped request path into the SigV4
// canonical URI.
//
// S3 is the one AWS service whose canonical URI is not double-encoded and
// not normalised: "//", "." and ".." segments are part of the key and are
// signed as they are. Clients, however, do not all escape the same set of
// characters on the wire (some leave '$' or '!' bare, some escape '~'), while
// every SDK signs the AWS form. So each '/'-separated segment is decoded and
// re-encoded with the AWS rules. Splitting before decoding keeps a client's
// "%2F" inside a segment as "%2F" rather than turning it into a separator.
func canonicalURI(rawPath string) (string, error) {
	if rawPath == "" {
		return "/", nil
	}
	segs := strings.Split(rawPath, "/")
	for i, seg := range segs {
		if seg == "" {
			continue
		}
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return "", wrapError(err, CodeInvalidURI, "Couldn't parse the specified URI.")
		}
		segs[i] = uriEncode(dec, false)
	}
	return strings.Join(segs, "/"), nil
}

// queryParam is one decoded key=value pair of a query string.
type queryParam struct{ key, value string }

// parseQuery decodes a raw query string into its pairs, in order, keeping
// duplicates and empty values ("?acl" is the pair acl=""). A '+' decodes to a
// space: that is what form-encoding clients (Go's url.Values, minio-go) mean
// by it, and SDKs that mean a literal plus send %2B.
func parseQuery(rawQuery string) ([]queryParam, error) {
	var out []queryParam
	for part := range strings.SplitSeq(rawQuery, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		dk, err := url.QueryUnescape(k)
		if err != nil {
			return nil, wrapError(err, CodeInvalidURI, "Couldn't parse the specified URI.")
		}
		dv, err := url.QueryUnescape(v)
		if err != nil {
			return nil, wrapError(err, CodeInvalidURI, "Couldn't parse the specified URI.")
		}
		out = append(out, queryParam{dk, dv})
	}
	return out, nil
}

// canonicalQuery encodes params as the SigV4 canonical query string: each key
// and value URI-encoded, sorted by encoded key then encoded value, joined
// with '&'. A pair whose key equals skip (X-Amz-Signature for presigned
// requests) is left out.
func canonicalQuery(params []queryParam, skip string) string {
	enc := make([]queryParam, 0, len(params))
	for _, p := range params {
		if skip != "" && p.key == skip {
			continue
		}
		enc = append(enc, queryParam{uriEncode(p.key, false), uriEncode(p.value, false)})
	}
	sort.Slice(enc, func(i, j int) bool {
		if enc[i].key != enc[j].key {
			return enc[i].key < enc[j].key
		}
		return enc[i].value < enc[j].value
	})
	var b strings.Builder
	for i, p := range enc {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.key)
		b.WriteByte('=')
		b.WriteString(p.value)
	}
	return b.String()
}

// trimAll trims a header value and collapses each run of spaces and tabs
// inside it to one space, as SigV4 canonical headers require.
func trimAll(v string) string {
	v = strings.Trim(v, " \t")
	if !strings.Contains(v, "  ") && !strings.ContainsRune(v, '\t') {
		return v
	}
	var b strings.Builder
	space := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' || c == '\t' {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteByte(c)
	}
	return b.String()
}

// canonicalHeaders writes "name:value\n" for each signed header, in the order
// the client listed them. The host header comes from host (HTTP/1.1 keeps it
// out of the header map). Repeated headers are joined with ','. A signed
// header that is absent contributes an empty value; if the client really
// signed it, the signature will not match.
func canonicalHeaders(signed []string, hdr http.Header, host string) string {
	var b strings.Builder
	for _, name := range signed {
		b.WriteString(name)
		b.WriteByte(':')
		if name == "host" {
			b.WriteString(trimAll(host))
		} else {
			for i, v := range hdr.Values(name) {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(trimAll(v))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// canonicalRequest joins the six parts of a SigV4 canonical request.
func canonicalRequest(method, uri, query, headers, signedHeaders, payloadHash string) string {
	return method + "\n" + uri + "\n" + query + "\n" + headers + "\n" + signedHeaders + "\n" + payloadHash
}
