// Package sigv4 verifies AWS Signature Version 4 on S3 requests and decodes
// aws-chunked request bodies. It is pure: it depends only on the standard
// library, reads no clock (the caller passes Request.Now) and knows nothing of
// the HTTP framework in front of it.
//
// # Verifying a request
//
// The gateway copies what the verifier needs out of its framework's request
// into a [Request] and calls [Verifier.Verify]:
//
//	v := &sigv4.Verifier{Creds: sigv4.StaticCredentials{"AKID": "secret"}}
//	res, err := v.Verify(&sigv4.Request{
//		Method: "PUT", Path: rawPath, RawQuery: rawQuery,
//		Host: host, Header: hdr, Now: time.Now(),
//	})
//
// Path and RawQuery must be the bytes the client sent, still escaped and not
// normalised (with fasthttp: URI().PathOriginal(), not URI().Path(), which
// collapses "//" and resolves "..", and both are legal in S3 keys). Header
// must carry every header the client may have signed, Content-Length and
// Content-Encoding included.
//
// Errors are [*Error] values whose Code is the S3 error code to send back, so
// the gateway maps them without a lookup table of its own:
//
//	var se *sigv4.Error
//	if errors.As(err, &se) { /* se.Code, se.HTTPStatus, se.Message */ }
//
// # The request body
//
// Verify authenticates the headers only. What the body must be checked
// against is in [Result.PayloadHash]:
//
//   - a hex SHA-256: wrap the body in [NewSHA256Reader], which fails at EOF
//     with XAmzContentSHA256Mismatch.
//   - [UnsignedPayload]: read the body as is.
//   - one of the STREAMING-* values: the body is aws-chunked; decode it with
//     [NewChunkedReader], which verifies each chunk signature (signed
//     variants) and collects the trailing headers ([ChunkedReader.Trailers]).
//
// The body must not be trusted, stored or acknowledged before the wrapping
// reader has returned io.EOF: the last check happens there.
//
// # Signing
//
// [Sign] and [Presign] produce header and query signatures for our own
// clients (tests, the admin CLI). They follow the same canonicalisation as the
// verifier, and are tested against minio-go's independent signer.
package sigv4
