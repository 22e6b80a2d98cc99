package gateway

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
)

// logAccess writes one line per request, carrying the request ID the
// client saw in x-amz-request-id, so a client's report can be found in
// the log. Health probes, scrapes and the status page's polling are
// logged at debug: they come every few seconds and say nothing.
func (g *Gateway) logAccess(c *fiber.Ctx, req *request, op string, status int, took time.Duration) {
	level := slog.LevelInfo
	switch {
	case op == "ops" || op == "ui":
		level = slog.LevelDebug
	case status >= 500:
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if !g.log.Enabled(ctx, level) {
		return
	}
	in := int64(c.Request().Header.ContentLength())
	if d := c.Get("x-amz-decoded-content-length"); d != "" {
		if n, err := strconv.ParseInt(d, 10, 64); err == nil {
			in = n
		}
	}
	attrs := []slog.Attr{
		slog.String("request_id", req.id),
		slog.String("op", op),
		slog.String("method", req.method),
		slog.Int("status", status),
		slog.Duration("duration", took),
		slog.Int64("bytes_in", max(in, 0)),
		slog.Int64("bytes_out", max(int64(c.Response().Header.ContentLength()), 0)),
	}
	if req.bucket != "" {
		attrs = append(attrs, slog.String("bucket", req.bucket))
	}
	if req.key != "" {
		attrs = append(attrs, slog.String("key", req.key))
	}
	if req.auth != nil {
		attrs = append(attrs, slog.String("access_key", req.auth.AccessKey))
	}
	g.log.LogAttrs(ctx, level, "request", attrs...)
}
