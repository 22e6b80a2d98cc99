package gateway

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/gateway/ui"
)

// UIPrefix is where the status page lives.
//
// "ui" is also a valid bucket name, so the page claims only requests that
// cannot be S3 requests: every S3 request carries a SigV4 signature (an
// AWS4-HMAC-SHA256 Authorization header or a presigned X-Amz-Signature
// query), and a browser sends neither. Signed requests to /ui/... still
// reach the bucket "ui".
const UIPrefix = "/ui/"

// isUIRequest reports whether the request is for the status page.
func isUIRequest(c *fiber.Ctx, rawPath string, q url.Values) bool {
	if rawPath != "/ui" && !strings.HasPrefix(rawPath, UIPrefix) {
		return false
	}
	return !strings.HasPrefix(c.Get("Authorization"), "AWS4-") && !q.Has("X-Amz-Signature")
}

// serveUI serves the status page and its data, behind HTTP Basic
// authentication with an S3 access key as user name and its secret key as
// password.
//
// Why Basic and not SigV4 signed in the browser: WebCrypto (needed for
// HMAC-SHA256 in JavaScript) exists only in secure contexts, so a page
// reached over plain HTTP at a cluster address would not work; Basic
// needs no script, works in every browser and in headless Chromium, and
// checks the same credentials as S3. The secret does cross the wire on
// every request, so put TLS in front of a gateway reached from outside a
// trusted network, as for S3 itself.
func (g *Gateway) serveUI(c *fiber.Ctx, rawPath string) error {
	c.Set("Cache-Control", "no-store")
	if !g.uiAuthorized(c.Get("Authorization")) {
		c.Set("WWW-Authenticate", `Basic realm="regen", charset="UTF-8"`)
		c.Set("Content-Type", "text/plain; charset=utf-8")
		return c.Status(fiber.StatusUnauthorized).SendString("regen: sign in with an S3 access key (user) and its secret key (password)\n")
	}
	if c.Method() != fiber.MethodGet && c.Method() != fiber.MethodHead {
		return c.Status(fiber.StatusMethodNotAllowed).SendString("GET only\n")
	}
	if rawPath == "/ui" {
		return c.Redirect(UIPrefix, fiber.StatusFound)
	}
	name := strings.TrimPrefix(rawPath, UIPrefix)
	if name == "api/status" {
		ctx, cancel := g.opContext()
		defer cancel()
		b, err := json.Marshal(g.status(ctx))
		if err != nil {
			return err
		}
		c.Set("Content-Type", "application/json")
		return c.Send(b)
	}
	body, ctype, ok := ui.Asset(name)
	if !ok {
		return c.Status(fiber.StatusNotFound).SendString("not found\n")
	}
	c.Set("Content-Type", ctype)
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set("Content-Security-Policy", "default-src 'self'")
	return c.Send(body)
}

// uiAuthorized checks a Basic Authorization header against the gateway's
// configured keys and stored administrator keys, in constant time for
// the secret.
func (g *Gateway) uiAuthorized(header string) bool {
	enc, ok := strings.CutPrefix(header, "Basic ")
	if !ok {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return false
	}
	access, secret, ok := strings.Cut(string(raw), ":")
	if !ok {
		return false
	}
	want, known := g.cfg.Credentials[access]
	if !known {
		// A stored key signs in if it is an administrator: the page
		// shows the cluster's internals, as the operator API does.
		ctx, cancel := g.opContext()
		defer cancel()
		if k, err := g.keys.lookup(ctx, access); err == nil && k != nil && k.rec.Admin {
			want, known = k.secret, true
		}
	}
	if !known {
		// Compare anyway so unknown keys cost the same time.
		want = secret + "x"
	}
	return subtle.ConstantTimeCompare([]byte(secret), []byte(want)) == 1 && known
}
