package gateway

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/sigv4"
)

// panicMembers is a Membership whose Live panics: a stand-in for a bug
// in code a handler runs.
type panicMembers struct{ fakeMembers }

func (panicMembers) Live(cluster.Role) []cluster.Member {
	var m map[string]int
	//lint:ignore SA5000 the point: a real runtime panic, as a bug would cause
	m["boom"]++
	return nil
}

func TestHandlerPanicFailsOnlyItsRequest(t *testing.T) {
	var logs bytes.Buffer
	cfg := DefaultConfig()
	cfg.NodeID = "gw-test"
	cfg.Credentials = map[string]string{"admin": "s3cret"}
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	g, err := New(cfg, nil, panicMembers{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://gw/bucket/key", nil)
	sigv4.Sign(req, "admin", "s3cret", "us-east-1", time.Now(), "")
	resp, body := do(t, g, req)
	id := resp.Header.Get("x-amz-request-id")
	if resp.StatusCode != 500 || !strings.Contains(body, "<Code>InternalError</Code>") || id == "" {
		t.Fatalf("panicking request: %d %q (request id %q)", resp.StatusCode, body, id)
	}
	if !strings.Contains(body, id) {
		t.Errorf("error body does not carry the request ID %s: %s", id, body)
	}
	// The log has the stack and the same request ID, so the two can be
	// matched.
	if l := logs.String(); !strings.Contains(l, "panic serving request") || !strings.Contains(l, "request="+id) || !strings.Contains(l, "goroutine") {
		t.Errorf("log lacks the panic, its request ID or its stack:\n%s", l)
	}
	// The gateway goes on serving: a request signed with a wrong secret
	// is refused as usual.
	req, _ = http.NewRequest(http.MethodGet, "http://gw/bucket/key", nil)
	sigv4.Sign(req, "admin", "wrong", "us-east-1", time.Now(), "")
	resp, body = do(t, g, req)
	if resp.StatusCode != 403 || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Fatalf("after a panic: %d %s", resp.StatusCode, body)
	}
}

func TestFramingHeaders(t *testing.T) {
	raw := []byte("PUT /b/k HTTP/1.1\r\nHost: x\r\ncontent-length: 3\r\nX: y\r\nCONTENT-LENGTH : 5\r\nTransfer-Encoding: chunked\r\n\r\n")
	lengths, encodings := framingHeaders(raw)
	if len(lengths) != 2 || lengths[0] != "3" || lengths[1] != "5" || len(encodings) != 1 || encodings[0] != "chunked" {
		t.Fatalf("framingHeaders: %q %q", lengths, encodings)
	}
}

func TestFiberErrorsNeverEchoTheRequest(t *testing.T) {
	g := uiGateway(t)
	for _, status := range []int{400, 408, 413, 431, 500} {
		c := g.app.AcquireCtx(&fasthttp.RequestCtx{})
		c.Request().Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=admin/x, Signature=deadbeef")
		// A parser error quoting the raw request, as fasthttp's do.
		g.fiberError(c, fiber.NewError(status, "cannot parse: PUT / HTTP/1.1\r\nAuthorization: AWS4-HMAC-SHA256 Signature=deadbeef"))
		body := string(c.Response().Body())
		g.app.ReleaseCtx(c)
		if strings.Contains(body, "deadbeef") || strings.Contains(body, "Authorization") {
			t.Errorf("status %d: error body echoes the request: %s", status, body)
		}
		if strings.Contains(body, "InternalError") {
			t.Errorf("status %d: a client's malformed request answered InternalError: %s", status, body)
		}
	}
}

func TestChecksumAlgorithmHeaders(t *testing.T) {
	for _, tc := range []struct {
		hdr, val string
		ok       bool
	}{
		{"x-amz-checksum-algorithm", "CRC32C", true},
		{"x-amz-checksum-algorithm", "crc64nvme", true},
		{"x-amz-checksum-algorithm", "MD7", false},
		{"x-amz-sdk-checksum-algorithm", "BLAKE3", false},
		{"x-amz-checksum-sha256", "x", true},
		{"x-amz-checksum-md5", "x", false},
		{"x-amz-checksum-mode", "ENABLED", true},
		{"x-amz-checksum-type", "FULL_OBJECT", true},
	} {
		g := uiGateway(t)
		c := g.app.AcquireCtx(&fasthttp.RequestCtx{})
		c.Request().Header.Set(tc.hdr, tc.val)
		err := checkChecksumHeaders(c)
		g.app.ReleaseCtx(c)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %s: %v", tc.hdr, tc.val, err)
		}
	}
}
