// Package sse encrypts object data at rest for the gateway's server-side
// encryption (SSE-S3 and SSE-C).
//
// Each object part is encrypted with its own random 256-bit data key, in
// packages of PackageSize plaintext bytes. Each package is sealed with
// AES-256-GCM under the data key; its nonce holds the package's index and
// whether it is the part's last package, so packages cannot be reordered,
// dropped from the end or moved between positions without failing to
// open. A sealed package is its ciphertext followed by the 16-byte tag, so
// the stored part is SealedSize(plain) bytes and any plaintext range is
// read by opening only the packages it covers (Span, Writer).
//
// The data key itself is never stored in the clear: it is sealed
// (AES-256-GCM again) by a Sealer, either
//
//   - a Keyring of cluster keys (SSE-S3), read from a key file kept
//     outside the shard files. The newest key seals, every key opens, and
//     the sealed key names the key that sealed it: rotating is adding a key
//     to the file and restarting the gateways; objects written before still
//     open, and nothing is rewritten.
//   - a CustomerKey (SSE-C), sent by the client with every request and
//     never stored. What is stored instead is a Verifier: an HMAC of the
//     key under a random salt, enough to refuse a wrong key before any data
//     is read, and useless to recover it.
//
// Erasure coding, repair and degraded reads work on the sealed bytes and
// need no key: this package is only called by the gateway, on the way in
// and out.
package sse
