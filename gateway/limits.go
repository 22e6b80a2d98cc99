package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/connguard"
)

// What a hostile or broken client can do to the listener, and what stops
// it (the limits are in Config.Limits):
//
//   - hold connections open: caps overall and per address (connguard),
//     answering 503 SlowDown; header, idle, body-read and write timeouts.
//   - exhaust file descriptors: connguard's accept loop backs off instead
//     of ending Serve, and answers one waiting client with SlowDown.
//   - send huge headers: fasthttp's read buffer (MaxHeaderBytes) answers
//     400 RequestHeaderSectionTooLarge.
//   - send malformed framing (bad or conflicting Content-Length, both
//     Content-Length and Transfer-Encoding, a PUT with neither): 400 or
//     411 and the connection closed (checkFraming), never the raw request
//     in the message.
//   - crash a handler: the panic is recovered, logged with its stack and
//     the request ID, and answered 500 InternalError for that request
//     only (recoverRequest).

// listen wraps ln in the connection guard of g's limits.
func (g *Gateway) listen(ln net.Listener) (*connguard.Listener, error) {
	l := g.cfg.Limits
	return connguard.Listen(ln, connguard.Config{
		MaxConns:      l.MaxConns,
		MaxConnsPerIP: l.MaxConnsPerIP,
		ReadIdle:      l.ReadTimeout,
		WriteIdle:     l.WriteTimeout,
		// An answer given before a PUT's body was read (a bad
		// signature, too few shard servers, no body memory) reaches a
		// client still writing the body instead of a connection reset:
		// enough for a single PUT or an upload part of ordinary size.
		Linger:      lingerTime,
		LingerBytes: lingerBytes,
		Refusal:     slowDownResponse(),
		Logger:      g.log.With("component", "listener"),
	})
}

// What a connection the gateway closes reads of a body it did not want
// (connguard.Config.Linger): a client that declared gigabytes, or holds
// its body back, costs no more than this before the close.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 16 << 20
)

// slowDownResponse is the whole HTTP answer to a connection refused by a
// cap: S3's SlowDown, which every SDK retries with back-off.
func slowDownResponse() []byte {
	body := ErrSlowDown.With("Too many connections; please retry.").ErrorXML("", "0000000000000000")
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nRetry-After: 1\r\nServer: regen\r\nConnection: close\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	b.Write(body)
	return b.Bytes()
}

// fasthttpLogger turns fasthttp's own messages (failed connections,
// mostly) into debug logs. With SecureErrorLogMessage set they carry no
// request bytes.
type fasthttpLogger struct{ log *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.log.Debug("http server", "msg", fmt.Sprintf(format, args...))
}

// fiberError renders errors raised before our handler runs, while the
// request's line and headers are parsed. The message is fixed for each
// kind: the parser's own message quotes the raw request, Authorization
// header included, and must never reach the client (or a log).
func (g *Gateway) fiberError(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	status := fiber.StatusInternalServerError
	if errors.As(err, &fe) {
		status = fe.Code
	}
	if status == fiber.StatusRequestTimeout && connguard.NothingReadOf(c.Context().Conn()) {
		// A connection the client opened and never used: close it
		// without an answer, as S3 does (see NothingReadOf).
		c.Context().Conn().Close()
		return nil
	}
	var ae *APIError
	switch status {
	case fiber.StatusRequestHeaderFieldsTooLarge:
		ae = ErrRequestHeaderSectionTooLarge.With(fmt.Sprintf("Your request line and headers exceed the maximum allowed size (%d bytes).", g.cfg.Limits.MaxHeaderBytes))
	case fiber.StatusRequestTimeout:
		ae = ErrRequestTimeout.With("")
	case fiber.StatusRequestEntityTooLarge:
		ae = ErrEntityTooLarge.With("")
	default:
		ae = ErrBadRequest.With("An error occurred when parsing the HTTP request.")
	}
	g.log.Debug("unparsable request", "status", status, "code", ae.Code)
	c.Context().SetConnectionClose()
	g.writeError(c, &request{id: newRequestID()}, ae)
	return nil
}

// recoverRequest, deferred by serve, turns a handler's panic into a 500
// InternalError for that request alone. The stack is logged with the
// request ID the client also got, so a report can be matched to it. The
// connection is closed: the panic may have left its body half read.
func (g *Gateway) recoverRequest(c *fiber.Ctx, req *request, op *string) {
	p := recover()
	if p == nil {
		return
	}
	g.log.Error("panic serving request", "request", req.id, "op", *op, "method", req.method,
		"bucket", req.bucket, "key", req.key, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	g.metrics.panics.Inc()
	c.Response().Reset()
	c.Set("x-amz-request-id", req.id)
	c.Set("Server", "regen")
	c.Context().SetConnectionClose()
	g.writeError(c, req, ErrInternalError.With(""))
}

// checkFraming refuses requests whose body framing is ambiguous or
// missing, before anything reads the body. Proxies in front of a gateway
// may frame a request differently from fasthttp (request smuggling), and
// a PUT without a length would otherwise store an empty object while its
// body is parsed as the next request.
func checkFraming(c *fiber.Ctx) error {
	lengths, encodings := framingHeaders(c.Request().Header.RawHeaders())
	for _, l := range lengths[min(1, len(lengths)):] {
		if l != lengths[0] {
			return ErrBadRequest.With("The request has conflicting Content-Length headers.")
		}
	}
	if len(lengths) > 0 {
		if n, err := strconv.ParseInt(lengths[0], 10, 64); err != nil || n < 0 {
			return ErrBadRequest.With("The Content-Length header is not a valid length.")
		}
	}
	switch {
	case len(encodings) > 0 && len(lengths) > 0:
		return ErrBadRequest.With("The request has both Content-Length and Transfer-Encoding.")
	case len(encodings) > 1 || len(encodings) == 1 && !equalFoldASCII(encodings[0], "chunked"):
		return ErrNotImplemented.With("Only Transfer-Encoding: chunked is implemented.")
	case len(encodings) == 0 && len(lengths) == 0 && c.Method() == fiber.MethodPut:
		return ErrMissingContentLength.With("")
	}
	return nil
}

// framingHeaders returns the values of every Content-Length and
// Transfer-Encoding line of raw headers, in order.
func framingHeaders(raw []byte) (lengths, encodings []string) {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		name, value, ok := bytes.Cut(bytes.TrimRight(line, "\r"), []byte(":"))
		if !ok {
			continue
		}
		v := string(bytes.TrimSpace(value))
		switch {
		case equalFoldASCII(string(bytes.TrimSpace(name)), "content-length"):
			lengths = append(lengths, v)
		case equalFoldASCII(string(bytes.TrimSpace(name)), "transfer-encoding"):
			encodings = append(encodings, v)
		}
	}
	return lengths, encodings
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
