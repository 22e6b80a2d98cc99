package sigv4

import (
	"fmt"
	"net/http"
)

// S3 error codes returned in Error.Code. They are the codes S3 itself sends,
// so a gateway can put Code straight into the <Code> element of the error
// response.
const (
	CodeAccessDenied                      = "AccessDenied"
	CodeInvalidAccessKeyID                = "InvalidAccessKeyId"
	CodeSignatureDoesNotMatch             = "SignatureDoesNotMatch"
	CodeRequestTimeTooSkewed              = "RequestTimeTooSkewed"
	CodeAuthorizationHeaderMalformed      = "AuthorizationHeaderMalformed"
	CodeAuthorizationQueryParametersError = "AuthorizationQueryParametersError"
	CodeInvalidArgument                   = "InvalidArgument"
	CodeInvalidRequest                    = "InvalidRequest"
	CodeInvalidURI                        = "InvalidURI"
	CodeXAmzContentSHA256Mismatch         = "XAmzContentSHA256Mismatch"
	CodeIncompleteBody                    = "IncompleteBody"
)

// Error is an authentication or payload-verification failure. Code is the S3
// error code, HTTPStatus the status S3 answers it with. Err, when set, is the
// underlying cause (for example the I/O error that cut a chunked body short)
// and is reachable through errors.Is/As.
type Error struct {
	Code       string
	Message    string
	HTTPStatus int
	Err        error
}

// Error describes the failure.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("sigv4: %s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("sigv4: %s: %s", e.Code, e.Message)
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Code, so callers can
// write errors.Is(err, &sigv4.Error{Code: sigv4.CodeAccessDenied}).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// statusOf is the HTTP status S3 sends with each code we produce.
var statusOf = map[string]int{
	CodeAccessDenied:                      http.StatusForbidden,
	CodeInvalidAccessKeyID:                http.StatusForbidden,
	CodeSignatureDoesNotMatch:             http.StatusForbidden,
	CodeRequestTimeTooSkewed:              http.StatusForbidden,
	CodeAuthorizationHeaderMalformed:      http.StatusBadRequest,
	CodeAuthorizationQueryParametersError: http.StatusBadRequest,
	CodeInvalidArgument:                   http.StatusBadRequest,
	CodeInvalidRequest:                    http.StatusBadRequest,
	CodeInvalidURI:                        http.StatusBadRequest,
	CodeXAmzContentSHA256Mismatch:         http.StatusBadRequest,
	CodeIncompleteBody:                    http.StatusBadRequest,
}

// newError builds an *Error with the status that belongs to code.
func newError(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), HTTPStatus: statusOf[code]}
}

// wrapError is newError with an underlying cause.
func wrapError(err error, code, format string, args ...any) *Error {
	e := newError(code, format, args...)
	e.Err = err
	return e
}

// Messages S3 uses for the common cases; kept identical so clients that
// match on text (some do) behave as against AWS.
const (
	msgSignatureDoesNotMatch = "The request signature we calculated does not match the signature you provided. Check your key and signing method."
	msgInvalidAccessKeyID    = "The AWS Access Key Id you provided does not exist in our records."
	msgTooSkewed             = "The difference between the request time and the server's time is too large."
	msgExpired               = "Request has expired"
	msgSHA256Mismatch        = "The provided 'x-amz-content-sha256' header does not match what was computed."
)
