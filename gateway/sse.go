package gateway

import (
	"crypto/md5"
	"encoding/xml"
	"hash"
	"io"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/sse"
	"github.com/regen-s3/regen/metadata"
)

// Server-side encryption (internal/sse has the format). A write is
// encrypted when it asks for SSE-S3 (x-amz-server-side-encryption:
// AES256) or SSE-C (the x-amz-server-side-encryption-customer-* headers),
// or when its bucket's default encryption says so. Each part gets its
// own data key, sealed by the gateways' key ring (Config.SSEKeys) or by
// the client's key, and stored in the manifest's part; the shards hold
// only sealed packages, so repair and degraded reads need no key. An
// SSE-C key is never stored: the manifest keeps a salted HMAC of it, and
// a read with another key is refused (403) before any data is read.
// SSE-KMS is refused: regen has no key management service.

// The SSE request and response headers.
const (
	hdrSSE        = "x-amz-server-side-encryption"
	hdrSSECAlgo   = "x-amz-server-side-encryption-customer-algorithm"
	hdrSSECKeyMD5 = "x-amz-server-side-encryption-customer-key-MD5"
	// objectSSE and copySourceSSE prefix the SSE-C headers of the
	// object a request names and of a copy's source.
	objectSSE     = "x-amz-"
	copySourceSSE = "x-amz-copy-source-"
	sseAES256     = "AES256"
)

// sseAsk is the encryption a write's headers ask for.
type sseAsk struct {
	s3       bool             // SSE-S3
	customer *sse.CustomerKey // SSE-C
}

// askedS3 reads x-amz-server-side-encryption: whether the request asks
// for SSE-S3. SSE-KMS is NotImplemented.
func askedS3(c *fiber.Ctx) (bool, error) {
	if c.Get("x-amz-server-side-encryption-aws-kms-key-id") != "" || c.Get("x-amz-server-side-encryption-context") != "" {
		return false, apiErr("NotImplemented", "regen has no key management service: SSE-KMS is not implemented; use SSE-S3 (AES256) or SSE-C")
	}
	switch v := c.Get(hdrSSE); v {
	case "":
		return false, nil
	case sseAES256:
		return true, nil
	case "aws:kms", "aws:kms:dsse":
		return false, apiErr("NotImplemented", "regen has no key management service: SSE-KMS ("+v+") is not implemented; use SSE-S3 (AES256) or SSE-C")
	default:
		return false, apiErr("InvalidArgument", "The encryption method specified is not supported: "+v)
	}
}

// askedCustomer reads the SSE-C headers under prefix (objectSSE or
// copySourceSSE): nil when there are none. Over plain HTTP they are refused, as S3 does, unless
// Config.SSECOverHTTP: the key would have crossed the network in clear.
func (g *Gateway) askedCustomer(c *fiber.Ctx, prefix string) (*sse.CustomerKey, error) {
	h := prefix + "server-side-encryption-customer-"
	algo, key, sum := c.Get(h+"algorithm"), c.Get(h+"key"), c.Get(h+"key-MD5")
	if algo == "" && key == "" && sum == "" {
		return nil, nil
	}
	if !c.Context().IsTLS() && !g.cfg.SSECOverHTTP {
		return nil, apiErr("InvalidRequest", "Requests specifying Server Side Encryption with Customer provided keys must be made over a secure connection.")
	}
	if algo != sseAES256 {
		return nil, apiErr("InvalidArgument", "The encryption request you specified is not valid. Supported value: AES256.")
	}
	ck, err := sse.ParseCustomerKey(algo, key, sum)
	if err != nil {
		return nil, apiErr("InvalidArgument", strings.TrimPrefix(err.Error(), "sse: bad customer key: "))
	}
	return &ck, nil
}

// askedSSE reads what a write asks for.
func (g *Gateway) askedSSE(c *fiber.Ctx) (sseAsk, error) {
	var a sseAsk
	var err error
	if a.s3, err = askedS3(c); err != nil {
		return a, err
	}
	if a.customer, err = g.askedCustomer(c, objectSSE); err != nil {
		return a, err
	}
	if a.s3 && a.customer != nil {
		return a, apiErr("InvalidArgument", "Server Side Encryption with Customer provided key is incompatible with the encryption method specified")
	}
	return a, nil
}

// errNoKeyring refuses SSE-S3 on a gateway started without keys.
var errNoKeyring = apiErr("InvalidRequest", "This gateway has no SSE-S3 keys (start it with --sse-keys): it cannot encrypt or decrypt with them")

// writeEncryption returns the encryption record of a new object and the
// sealer of its data keys: what a asks, else the bucket's default; nil
// for none.
func (g *Gateway) writeEncryption(a sseAsk, bucketDefault string) (*metadata.Encryption, sse.Sealer, error) {
	switch {
	case a.customer != nil:
		v, err := a.customer.NewVerifier()
		if err != nil {
			return nil, nil, err
		}
		return &metadata.Encryption{Customer: true, Salt: v.Salt, MAC: v.MAC}, *a.customer, nil
	case a.s3 || bucketDefault == sseAES256:
		if g.cfg.SSEKeys == nil {
			return nil, nil, errNoKeyring
		}
		return &metadata.Encryption{}, g.cfg.SSEKeys, nil
	}
	return nil, nil, nil
}

// sealerFor checks the SSE-C key a request gives (under prefix) against
// an object or upload encrypted as e, and returns what opens its data
// keys: nil when e is nil.
func (g *Gateway) sealerFor(c *fiber.Ctx, e *metadata.Encryption, prefix string) (sse.Sealer, error) {
	ck, err := g.askedCustomer(c, prefix)
	if err != nil {
		return nil, err
	}
	switch {
	case e == nil || !e.Customer:
		if ck != nil {
			return nil, apiErr("InvalidRequest", "The encryption parameters are not applicable to this object.")
		}
		if e == nil {
			return nil, nil
		}
		if g.cfg.SSEKeys == nil {
			return nil, errNoKeyring
		}
		return g.cfg.SSEKeys, nil
	case ck == nil:
		return nil, apiErr("InvalidRequest", "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object.")
	case !(sse.Verifier{Salt: e.Salt, MAC: e.MAC}).Matches(*ck):
		return nil, apiErr("AccessDenied", "The SSE-C key given does not match the key the object was stored with.")
	}
	return *ck, nil
}

// checkSealedKeys opens the data key of every encrypted part of m before
// a GET answers: a key sealed by a cluster key this gateway lacks (a key
// file not the same on every gateway, or a key removed from it) fails
// the request with a 500 that says so, rather than a body cut short
// after its 200.
func checkSealedKeys(m *metadata.Manifest, s sse.Sealer) error {
	for _, p := range m.Parts {
		if p.SealedKey == nil {
			continue
		}
		if _, err := s.Open(p.SealedKey); err != nil {
			return ErrInternalError.Withf("part %d of this object cannot be decrypted: %v", p.Number, err)
		}
	}
	return nil
}

// setSSEHeaders tells the client how the object is encrypted.
func setSSEHeaders(c *fiber.Ctx, e *metadata.Encryption, s sse.Sealer) {
	if e == nil {
		return
	}
	if ck, ok := s.(sse.CustomerKey); ok {
		c.Set(hdrSSECAlgo, sseAES256)
		c.Set(hdrSSECKeyMD5, ck.MD5())
		return
	}
	if !e.Customer {
		c.Set(hdrSSE, sseAES256)
	}
}

// partPlainSize is the plaintext size of a stored part.
func partPlainSize(p metadata.Part) int64 {
	if p.SealedKey == nil {
		return p.Size
	}
	n, err := sse.PlainSize(p.Size)
	if err != nil {
		return p.Size // NB: Validate-checked manifests never get here
	}
	return n
}

// sealing encrypts one part on its way to its stripes.
type sealing struct {
	*sse.Encrypter
	plainMD5  hash.Hash
	sealedKey []byte
	size      int64 // plaintext
}

// newSealing seals size bytes of body under a new data key sealed by s.
func newSealing(s sse.Sealer, body io.Reader, size int64) (*sealing, error) {
	dk, err := sse.NewDataKey()
	if err != nil {
		return nil, err
	}
	sealed, err := s.Seal(dk)
	if err != nil {
		return nil, err
	}
	h := md5.New()
	return &sealing{Encrypter: sse.NewEncrypter(dk, io.TeeReader(body, h), size), plainMD5: h, sealedKey: sealed, size: size}, nil
}

// sums returns the plaintext's MD5 (what Content-MD5 is checked
// against) and the ETag's: the plaintext's for SSE-S3, as S3 has it,
// and the stored bytes' for SSE-C, whose ETag S3 says is not the MD5 of
// the data.
func (s *sealing) sums(customer bool, stored [md5.Size]byte) (plain, etag [md5.Size]byte) {
	copy(plain[:], s.plainMD5.Sum(nil))
	if customer {
		return plain, stored
	}
	return plain, plain
}

// SSERule is one rule of a ServerSideEncryptionConfiguration.
type SSERule struct {
	Apply struct {
		SSEAlgorithm   string `xml:"SSEAlgorithm"`
		KMSMasterKeyID string `xml:"KMSMasterKeyID,omitempty"`
	} `xml:"ApplyServerSideEncryptionByDefault"`
	BucketKeyEnabled *bool `xml:"BucketKeyEnabled,omitempty"`
}

// ServerSideEncryptionConfiguration is the GetBucketEncryption response.
type ServerSideEncryptionConfiguration struct {
	XMLName xml.Name  `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ServerSideEncryptionConfiguration"`
	Rules   []SSERule `xml:"Rule"`
}

// sseConfigInput is the PutBucketEncryption body, matched by local name.
type sseConfigInput struct {
	Rules []SSERule `xml:"Rule"`
}

// bucketEncryption serves Get/Put/DeleteBucketEncryption: the default
// encryption of writes that ask for none (AES256 only).
func (g *Gateway) bucketEncryption(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	switch req.method {
	case fiber.MethodGet:
		b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
		if err != nil {
			return bucketErr(err)
		}
		if b.Encryption == "" {
			return ErrSSEConfigNotFound.With("")
		}
		var rule SSERule
		rule.Apply.SSEAlgorithm = b.Encryption
		return sendXML(c, fiber.StatusOK, ServerSideEncryptionConfiguration{Rules: []SSERule{rule}})
	case fiber.MethodPut:
		var in sseConfigInput
		if err := g.decodeXMLBody(c, req, &in); err != nil {
			return err
		}
		if len(in.Rules) != 1 {
			return apiErr("MalformedXML", "ServerSideEncryptionConfiguration must hold exactly one Rule")
		}
		switch algo := in.Rules[0].Apply.SSEAlgorithm; algo {
		case sseAES256:
		case "aws:kms", "aws:kms:dsse":
			return apiErr("NotImplemented", "regen has no key management service: default encryption with "+algo+" is not implemented; use AES256")
		default:
			return apiErr("MalformedXML", "SSEAlgorithm must be AES256")
		}
		if g.cfg.SSEKeys == nil {
			return errNoKeyring
		}
		return g.setBucketConfig(c, req, fiber.StatusOK, func(b *metadata.Bucket) { b.Encryption = sseAES256 })
	case fiber.MethodDelete:
		return g.setBucketConfig(c, req, fiber.StatusNoContent, func(b *metadata.Bucket) { b.Encryption = "" })
	}
	return apiErr("MethodNotAllowed", "")
}

// setBucketConfig stores a bucket setting (a sub-resource's Put or
// Delete: set changes the bucket record) and answers status.
func (g *Gateway) setBucketConfig(c *fiber.Ctx, req *request, status int, set func(*metadata.Bucket)) error {
	ctx, cancel := g.opContext()
	defer cancel()
	err := g.layer.updateBucket(ctx, g.buckets, req.bucket, func(b *metadata.Bucket) error {
		set(b)
		return nil
	})
	if err != nil {
		return bucketErr(err)
	}
	c.Status(status)
	return nil
}
