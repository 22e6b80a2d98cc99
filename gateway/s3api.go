package gateway

import (
	"encoding/xml"
	"errors"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/sigv4"
	"github.com/regen-s3/regen/internal/stripe"
)

// s3Error is an error answered to the client as S3 error XML.
type s3Error struct {
	Code    string
	Message string
	Status  int
}

func (e *s3Error) Error() string { return e.Code + ": " + e.Message }

// s3Status maps S3 error codes to HTTP statuses (from the S3 API reference).
var s3Status = map[string]int{
	"AccessDenied": 403, "AuthorizationHeaderMalformed": 400, "AuthorizationQueryParametersError": 400,
	"BadDigest": 400, "BucketAlreadyExists": 409, "BucketAlreadyOwnedByYou": 409, "BucketNotEmpty": 409,
	"EntityTooLarge": 400, "EntityTooSmall": 400, "IncompleteBody": 400, "InternalError": 500,
	"InvalidAccessKeyId": 403, "InvalidArgument": 400, "InvalidBucketName": 400, "InvalidDigest": 400,
	"InvalidLocationConstraint": 400, "InvalidPart": 400, "InvalidPartOrder": 400, "InvalidRange": 416,
	"InvalidRequest": 400, "InvalidStorageClass": 400, "InvalidURI": 400, "KeyTooLongError": 400,
	"MalformedXML": 400, "MetadataTooLarge": 400, "MethodNotAllowed": 405, "MissingContentLength": 411,
	"NoSuchBucket": 404, "NoSuchKey": 404, "NoSuchUpload": 404, "NotImplemented": 501,
	"PreconditionFailed": 412, "RequestTimeTooSkewed": 403, "ServiceUnavailable": 503,
	"SignatureDoesNotMatch": 403, "SlowDown": 503, "XAmzContentSHA256Mismatch": 400,
}

// apiErr builds the S3 error with the given code.
func apiErr(code, msg string) *s3Error {
	st, ok := s3Status[code]
	if !ok {
		st = 500
	}
	if msg == "" {
		msg = code
	}
	return &s3Error{Code: code, Message: msg, Status: st}
}

// toS3 maps any error a handler returns to the S3 error the client sees.
func toS3(err error) *s3Error {
	var se *s3Error
	var ve *sigv4.Error
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &ve):
		return &s3Error{Code: ve.Code, Message: ve.Message, Status: ve.HTTPStatus}
	case errors.Is(err, stripe.ErrQuorum), errors.Is(err, errUnavailable):
		// The client should back off and retry: too few shard servers
		// answered right now.
		return apiErr("SlowDown", "Not enough shard servers are available; please retry.")
	case errors.Is(err, errNotFound):
		return apiErr("NoSuchKey", "The specified key does not exist.")
	}
	return apiErr("InternalError", "We encountered an internal error. Please try again.")
}

type errorXML struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
}

// writeError renders err as S3 error XML. HEAD answers carry no body.
func (g *Gateway) writeError(c *fiber.Ctx, req *request, err error) {
	se := toS3(err)
	if se.Status >= 500 {
		g.log.Error("request failed", "request", req.id, "method", req.method, "bucket", req.bucket, "key", req.key, "code", se.Code, "err", err)
	} else {
		g.log.Debug("request refused", "request", req.id, "code", se.Code, "err", err)
	}
	if se.Code == "SlowDown" || se.Code == "ServiceUnavailable" {
		c.Set("Retry-After", "1")
	}
	c.Status(se.Status)
	if req.method == fiber.MethodHead {
		c.Response().SkipBody = true
		return
	}
	resource := "/" + req.bucket
	if req.key != "" {
		resource += "/" + req.key
	}
	b, _ := xml.Marshal(errorXML{Code: se.Code, Message: se.Message, Resource: resource, RequestID: req.id})
	c.Set("Content-Type", "application/xml")
	c.Response().Header.SetContentLength(-3) // let fasthttp compute it
	c.Send(append([]byte(xml.Header), b...))
}

// sendXML answers with an S3 XML document.
func sendXML(c *fiber.Ctx, status int, v any) error {
	b, err := xml.Marshal(v)
	if err != nil {
		return err
	}
	c.Set("Content-Type", "application/xml")
	c.Status(status)
	return c.Send(append([]byte(xml.Header), b...))
}

// s3Time formats a time the way S3 XML does.
func s3Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

const s3NS = "http://s3.amazonaws.com/doc/2006-03-01/"

// Owner is the single owner regen reports: the requesting access key.
type Owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

func (g *Gateway) owner(req *request) Owner {
	id := "regen"
	if req.auth != nil {
		id = req.auth.AccessKey
	}
	return Owner{ID: id, DisplayName: id}
}

type BucketInfo struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
}

type ListAllMyBucketsResult struct {
	XMLName xml.Name `xml:"ListAllMyBucketsResult"`
	NS      string   `xml:"xmlns,attr"`
	Owner   Owner    `xml:"Owner"`
	Buckets struct {
		Bucket []BucketInfo `xml:"Bucket"`
	} `xml:"Buckets"`
}

type LocationConstraint struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	NS      string   `xml:"xmlns,attr"`
	Value   string   `xml:",chardata"`
}

type ObjectInfo struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
	Owner        *Owner `xml:"Owner,omitempty"`
}

type CommonPrefix struct {
	Prefix string `xml:"Prefix"`
}

type ListBucketV2Result struct {
	XMLName               xml.Name       `xml:"ListBucketResult"`
	NS                    string         `xml:"xmlns,attr"`
	Name                  string         `xml:"Name"`
	Prefix                string         `xml:"Prefix"`
	Delimiter             string         `xml:"Delimiter,omitempty"`
	MaxKeys               int            `xml:"MaxKeys"`
	KeyCount              int            `xml:"KeyCount"`
	IsTruncated           bool           `xml:"IsTruncated"`
	EncodingType          string         `xml:"EncodingType,omitempty"`
	ContinuationToken     string         `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string         `xml:"NextContinuationToken,omitempty"`
	StartAfter            string         `xml:"StartAfter,omitempty"`
	Contents              []ObjectInfo   `xml:"Contents"`
	CommonPrefixes        []CommonPrefix `xml:"CommonPrefixes"`
}

type ListBucketV1Result struct {
	XMLName        xml.Name       `xml:"ListBucketResult"`
	NS             string         `xml:"xmlns,attr"`
	Name           string         `xml:"Name"`
	Prefix         string         `xml:"Prefix"`
	Marker         string         `xml:"Marker"`
	NextMarker     string         `xml:"NextMarker,omitempty"`
	Delimiter      string         `xml:"Delimiter,omitempty"`
	MaxKeys        int            `xml:"MaxKeys"`
	IsTruncated    bool           `xml:"IsTruncated"`
	EncodingType   string         `xml:"EncodingType,omitempty"`
	Contents       []ObjectInfo   `xml:"Contents"`
	CommonPrefixes []CommonPrefix `xml:"CommonPrefixes"`
}

var _ = http.StatusOK
