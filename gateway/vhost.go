package gateway

import (
	"net"
	"net/url"
	"strings"
)

// splitRequest finds bucket and key: from the Host header for a
// virtual-hosted-style request (Host is BUCKET.<Domain>), else from the
// path.
func (g *Gateway) splitRequest(host, rawPath string) (string, string, error) {
	if bucket, ok := g.vhostBucket(host); ok {
		key, err := url.PathUnescape(strings.TrimPrefix(rawPath, "/"))
		if err != nil {
			return "", "", apiErr("InvalidURI", "cannot unescape object key")
		}
		return bucket, key, nil
	}
	return splitPath(rawPath)
}

// vhostBucket returns the bucket named by host when it is a subdomain of
// the configured domain.
func (g *Gateway) vhostBucket(host string) (string, bool) {
	if g.cfg.Domain == "" {
		return "", false
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	bucket, ok := strings.CutSuffix(strings.ToLower(host), "."+strings.ToLower(g.cfg.Domain))
	return bucket, ok && bucket != ""
}
