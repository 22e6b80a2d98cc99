package gateway

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/stripe"
)

// apiErr returns the S3 error with the given code and, if msg is not
// empty, a specific message.
func apiErr(code, msg string) *APIError {
	e := APIErrorFor(code)
	if msg != "" {
		e.Message = msg
	}
	return e
}

// toS3 maps any error a handler returns to the S3 error the client sees.
func toS3(err error) *APIError {
	if ae := AsAPIError(err); ae != nil {
		return ae
	}
	switch {
	case errors.Is(err, stripe.ErrQuorum), errors.Is(err, errUnavailable):
		// The client should back off and retry: too few shard servers
		// answered right now.
		return apiErr("SlowDown", "Not enough shard servers are available; please retry.")
	case errors.Is(err, errNotFound):
		return apiErr("NoSuchKey", "The specified key does not exist.")
	}
	return apiErr("InternalError", "We encountered an internal error. Please try again.")
}

// writeError renders err as S3 error XML. HEAD answers carry no body.
func (g *Gateway) writeError(c *fiber.Ctx, req *request, err error) {
	ae := toS3(err)
	if ae.HTTPStatus >= 500 {
		g.log.Error("request failed", "request", req.id, "method", req.method, "bucket", req.bucket, "key", req.key, "code", ae.Code, "err", err)
	} else {
		g.log.Debug("request refused", "request", req.id, "code", ae.Code, "err", err)
	}
	if ae.Code == "SlowDown" || ae.Code == "ServiceUnavailable" {
		c.Set("Retry-After", "1")
	}
	// A request signed for another region (s3cmd signs for "US" unless
	// told otherwise) learns the right one, as from S3: clients retry
	// there, s3cmd from the body's Region, botocore from the header (a
	// HEAD has no body).
	region := ""
	if ae.Code == "AuthorizationHeaderMalformed" {
		region = g.region()
		c.Set("x-amz-bucket-region", region)
	}
	c.Status(ae.HTTPStatus)
	if m := c.Method(); m == fiber.MethodPut || m == fiber.MethodPost {
		// The body may be unread: closing keeps its rest from being
		// parsed as the next request on this connection.
		c.Context().SetConnectionClose()
	}
	if req.method == fiber.MethodHead {
		c.Response().SkipBody = true
		return
	}
	resource := "/" + req.bucket
	if req.key != "" {
		resource += "/" + req.key
	}
	c.Set("Content-Type", "application/xml")
	c.Send(ae.errorXML(resource, req.id, region))
}

// sendXML answers with an S3 XML document.
func sendXML(c *fiber.Ctx, status int, v any) error {
	c.Set("Content-Type", "application/xml")
	c.Status(status)
	return c.Send(EncodeXML(v))
}

// owner is the single owner regen reports: the requesting access key.
func (g *Gateway) owner(req *request) *CanonicalUser {
	id := "regen"
	if req.auth != nil && req.auth.AccessKey != "" {
		id = req.auth.AccessKey
	}
	return &CanonicalUser{ID: id, DisplayName: id}
}

func ts(t time.Time) Timestamp { return Timestamp(t.UTC()) }
