package gateway

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"

	"github.com/regen-s3/regen/internal/sigv4"
)

// APIError is an S3 error as the client sees it: the code that goes into
// <Code>, the HTTP status, and a human-readable message. The package-level
// Err* values carry S3's default messages; handlers refine the message with
// With or Withf, which copy, so the shared values are never mutated:
//
//	return ErrNoSuchKey.With("no such key: " + key)
type APIError struct {
	Code       string
	Message    string
	HTTPStatus int
}

// Error describes the failure.
func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// Is matches any *APIError with the same code, so
// errors.Is(err, ErrNoSuchKey) holds for ErrNoSuchKey.With("...").
func (e *APIError) Is(target error) bool {
	t, ok := target.(*APIError)
	return ok && t.Code == e.Code
}

// With returns a copy of e with Message replaced (the default is kept if msg
// is empty).
func (e *APIError) With(msg string) *APIError {
	c := *e
	if msg != "" {
		c.Message = msg
	}
	return &c
}

// Withf is With with a format string.
func (e *APIError) Withf(format string, args ...any) *APIError {
	return e.With(fmt.Sprintf(format, args...))
}

// The S3 errors regen answers with. Statuses and default messages follow the
// S3 API reference's list of error codes
// (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
var (
	ErrAccessDenied                      = reg("AccessDenied", 403, "Access Denied")
	ErrAuthorizationHeaderMalformed      = reg("AuthorizationHeaderMalformed", 400, "The authorization header you provided is invalid.")
	ErrAuthorizationQueryParametersError = reg("AuthorizationQueryParametersError", 400, "Error parsing the X-Amz-Credential parameter.")
	ErrBadDigest                         = reg("BadDigest", 400, "The Content-MD5 or checksum value that you specified did not match what the server received.")
	ErrBucketAlreadyExists               = reg("BucketAlreadyExists", 409, "The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again.")
	ErrBucketAlreadyOwnedByYou           = reg("BucketAlreadyOwnedByYou", 409, "Your previous request to create the named bucket succeeded and you already own it.")
	ErrBucketNotEmpty                    = reg("BucketNotEmpty", 409, "The bucket you tried to delete is not empty.")
	ErrConditionalRequestConflict        = reg("ConditionalRequestConflict", 409, "A conflicting operation occurred. If using PutObject you can retry the request. If using multipart upload you should initiate another CompleteMultipartUpload request.")
	ErrEntityTooLarge                    = reg("EntityTooLarge", 400, "Your proposed upload exceeds the maximum allowed object size.")
	ErrEntityTooSmall                    = reg("EntityTooSmall", 400, "Your proposed upload is smaller than the minimum allowed object size.")
	ErrIncompleteBody                    = reg("IncompleteBody", 400, "You did not provide the number of bytes specified by the Content-Length HTTP header.")
	ErrInternalError                     = reg("InternalError", 500, "We encountered an internal error. Please try again.")
	ErrInvalidAccessKeyID                = reg("InvalidAccessKeyId", 403, "The AWS Access Key Id you provided does not exist in our records.")
	ErrInvalidArgument                   = reg("InvalidArgument", 400, "Invalid Argument")
	ErrInvalidBucketName                 = reg("InvalidBucketName", 400, "The specified bucket is not valid.")
	ErrInvalidDigest                     = reg("InvalidDigest", 400, "The Content-MD5 you specified is not valid.")
	ErrInvalidLocationConstraint         = reg("InvalidLocationConstraint", 400, "The specified location constraint is not valid.")
	ErrInvalidPart                       = reg("InvalidPart", 400, "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.")
	ErrInvalidPartOrder                  = reg("InvalidPartOrder", 400, "The list of parts was not in ascending order. The parts list must be specified in order by part number.")
	ErrInvalidRange                      = reg("InvalidRange", 416, "The requested range is not satisfiable")
	ErrInvalidPartNumber                 = reg("InvalidPartNumber", 416, "The requested partnumber is not satisfiable")
	ErrInvalidRequest                    = reg("InvalidRequest", 400, "Invalid Request")
	ErrInvalidStorageClass               = reg("InvalidStorageClass", 400, "The storage class you specified is not valid.")
	ErrInvalidURI                        = reg("InvalidURI", 400, "Couldn't parse the specified URI.")
	ErrKeyTooLong                        = reg("KeyTooLongError", 400, "Your key is too long.")
	ErrMalformedXML                      = reg("MalformedXML", 400, "The XML you provided was not well-formed or did not validate against our published schema.")
	ErrMetadataTooLarge                  = reg("MetadataTooLarge", 400, "Your metadata headers exceed the maximum allowed metadata size.")
	ErrMethodNotAllowed                  = reg("MethodNotAllowed", 405, "The specified method is not allowed against this resource.")
	ErrMissingContentLength              = reg("MissingContentLength", 411, "You must provide the Content-Length HTTP header.")
	ErrMissingRequestBodyError           = reg("MissingRequestBodyError", 400, "Request Body is empty.")
	ErrNoSuchBucket                      = reg("NoSuchBucket", 404, "The specified bucket does not exist.")
	ErrNoSuchKey                         = reg("NoSuchKey", 404, "The specified key does not exist.")
	ErrNoSuchVersion                     = reg("NoSuchVersion", 404, "The specified version does not exist.")
	ErrNoSuchUpload                      = reg("NoSuchUpload", 404, "The specified multipart upload does not exist. The upload ID might be invalid, or the multipart upload might have been aborted or completed.")
	ErrNotImplemented                    = reg("NotImplemented", 501, "A header you provided implies functionality that is not implemented.")
	ErrNotModified                       = reg("NotModified", 304, "Not Modified")
	ErrPreconditionFailed                = reg("PreconditionFailed", 412, "At least one of the preconditions you specified did not hold.")
	ErrRequestHeaderSectionTooLarge      = reg("RequestHeaderSectionTooLarge", 400, "Your request header section exceeds the maximum allowed size.")
	ErrRequestTimeout                    = reg("RequestTimeout", 400, "Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed.")
	ErrRequestTimeTooSkewed              = reg("RequestTimeTooSkewed", 403, "The difference between the request time and the server's time is too large.")
	ErrServiceUnavailable                = reg("ServiceUnavailable", 503, "Please reduce your request rate.")
	ErrSignatureDoesNotMatch             = reg("SignatureDoesNotMatch", 403, "The request signature we calculated does not match the signature you provided. Check your key and signing method.")
	ErrSlowDown                          = reg("SlowDown", 503, "Please reduce your request rate.")
	ErrXAmzContentSHA256Mismatch         = reg("XAmzContentSHA256Mismatch", 400, "The provided 'x-amz-content-sha256' header does not match what was computed.")

	// Bucket and object configuration (ACLs, ownership, tags, CORS, policy).
	ErrAccessControlListNotSupported       = reg("AccessControlListNotSupported", 400, "The bucket does not allow ACLs")
	ErrInvalidBucketAclWithObjectOwnership = reg("InvalidBucketAclWithObjectOwnership", 400, "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting")
	ErrOwnershipControlsNotFound           = reg("OwnershipControlsNotFoundError", 404, "The bucket ownership controls were not found")
	ErrInvalidTag                          = reg("InvalidTag", 400, "The tag provided was not a valid tag.")
	ErrBadRequest                          = reg("BadRequest", 400, "Bad Request")
	ErrNoSuchTagSet                        = reg("NoSuchTagSet", 404, "The TagSet does not exist")
	ErrNoSuchCORSConfiguration             = reg("NoSuchCORSConfiguration", 404, "The CORS configuration does not exist")
	ErrNoSuchLifecycleConfiguration        = reg("NoSuchLifecycleConfiguration", 404, "The lifecycle configuration does not exist")
	ErrNoSuchBucketPolicy                  = reg("NoSuchBucketPolicy", 404, "The bucket policy does not exist")
	ErrMalformedPolicy                     = reg("MalformedPolicy", 400, "Policy has invalid resource")
	ErrSSEConfigNotFound                   = reg("ServerSideEncryptionConfigurationNotFoundError", 404, "The server side encryption configuration was not found")
	ErrOperationAborted                    = reg("OperationAborted", 409, "A conflicting conditional operation is currently in progress against this resource. Try again.")
	ErrInvalidBucketState                  = reg("InvalidBucketState", 409, "The request is not valid with the current state of the bucket.")
	ErrObjectLockConfigurationNotFound     = reg("ObjectLockConfigurationNotFoundError", 404, "Object Lock configuration does not exist for this bucket")
	ErrNoSuchObjectLockConfiguration       = reg("NoSuchObjectLockConfiguration", 404, "The specified object does not have a ObjectLock configuration")
	ErrCORSForbidden                       = reg("CORSForbidden", 403, "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.")
)

// apiErrors indexes the values above by code.
var apiErrors = map[string]*APIError{}

func reg(code string, status int, msg string) *APIError {
	e := &APIError{Code: code, Message: msg, HTTPStatus: status}
	apiErrors[code] = e
	return e
}

// APIErrorFor returns a fresh copy of the registered error for code, with
// its default message. An unknown code yields InternalError rather than an
// invented status: a typo must not turn into a 200 or a bogus 4xx.
func APIErrorFor(code string) *APIError {
	if e, ok := apiErrors[code]; ok {
		return e.With("")
	}
	return ErrInternalError.With("unknown error code " + code)
}

// FromSigV4 maps an error from internal/sigv4 to the APIError to send. The
// sigv4 codes are S3 codes already; the status and message come from the
// sigv4 error (it knows the specific reason, e.g. "Request has expired").
// It returns nil if err holds no *sigv4.Error.
func FromSigV4(err error) *APIError {
	var se *sigv4.Error
	if !errors.As(err, &se) {
		return nil
	}
	out := &APIError{Code: se.Code, Message: se.Message, HTTPStatus: se.HTTPStatus}
	if reg, ok := apiErrors[se.Code]; ok {
		if out.HTTPStatus == 0 {
			out.HTTPStatus = reg.HTTPStatus
		}
		if out.Message == "" {
			out.Message = reg.Message
		}
	}
	if out.HTTPStatus == 0 {
		out.HTTPStatus = http.StatusBadRequest
	}
	return out
}

// AsAPIError returns the APIError err carries, mapping sigv4 errors; nil if
// there is none (the caller decides what an unknown error becomes, usually
// ErrInternalError after logging it).
func AsAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	return FromSigV4(err)
}

// ErrorResponse is the body of an S3 error response. S3 sends it without a
// namespace.
type ErrorResponse struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
	// Extra S3 fields some errors carry (Region for a wrong-region error,
	// Key for NoSuchKey...). Optional.
	Key        string `xml:"Key,omitempty"`
	BucketName string `xml:"BucketName,omitempty"`
	Region     string `xml:"Region,omitempty"`
}

// ErrorXML renders e as a complete S3 error document, XML declaration
// included. resource is the request path ("/bucket/key"); requestID is the
// value also sent in x-amz-request-id. HEAD responses must not carry it.
func (e *APIError) ErrorXML(resource, requestID string) []byte {
	return e.errorXML(resource, requestID, "")
}

// errorXML is ErrorXML naming the region the request should have been
// signed for, as S3 does for a wrong-region request.
func (e *APIError) errorXML(resource, requestID, region string) []byte {
	return EncodeXML(ErrorResponse{Code: e.Code, Message: e.Message, Resource: resource, RequestID: requestID, Region: region})
}
