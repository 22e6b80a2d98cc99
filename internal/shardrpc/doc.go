// Package shardrpc is the wire protocol between gateways (or repair workers)
// and shard servers, and the client that speaks it.
//
// The protocol is plain HTTP/1.1 (or HTTP/1.1 over TLS, see WithTLS):
// JSON for metadata, raw bytes for shard data, so shard streams need no
// framing and any HTTP tool can debug them. Listing pages, which carry a
// row per key from every server that holds the key, also come in a
// compact binary form that a client asks for (see AppendList), and so do
// lookup replies, which every GET and HEAD asks of several servers: the
// stored manifests' JSON passed on as it is, inline data as raw bytes
// (see AppendVersions).
//
// # Authentication
//
// The cluster secret never travels. Every request carries HeaderAuth, an
// HMAC-SHA256 under a key derived from the secret with HKDF ("regen shard
// rpc v1"; the gossip key is derived under its own label) over the method,
// the Host, the request URI (path and query), the time, a random nonce and
// the SHA-256 of the body. A server (Verifier) refuses a request whose
// time is more than DefaultAuthWindow from its own, whose nonce it has
// seen within the window, that was signed before the server started (a
// restart forgets nonces), or whose body does not match its digest: a
// request captured on the wire can be neither replayed nor altered, nor
// sent to another server.
//
// Bodies that cannot be read twice (shard data streams, piped) are signed
// as UnsignedStream: their header is bound as above, their bytes are not.
// Hashing every shard byte on both ends would cost as much CPU as the data
// path itself. What this leaves: an attacker able to change bytes in
// flight (not just read them) could substitute the data of a stream it
// intercepts before the server sees it. The same attacker could as well
// change responses, which are not signed either; that is what TLS is for.
// Without TLS, shard contents are still checked on every read against the
// CRCs the writer recorded in the manifest.
//
// A signed body is read whole before its handler runs, so the server
// bounds them: Middleware holds a body's declared length from a
// process-wide budget (DefaultBodyBudget) until the handler returns,
// which bounds what handlers decode from bodies too. A request that finds
// the budget spent waits up to DefaultBodyWait and is then refused, before
// its handler runs, with 503 and Retry-After; the Client sends such a
// request again a few times with backoff. A repair sending manifest
// batches from every peer to one server thus queues instead of growing
// that server's heap without bound.
//
// Signing is a transport concern, so no endpoint needs code for it:
// NewAuthTransport wraps any http.RoundTripper (New does it for every
// Client), and Verifier.Middleware (or AuthMiddleware) wraps a server's
// whole mux, so routes added later are covered as they are mounted. Use
// them for any new shard-server traffic (raft messages, metadata RPCs):
//
//	hc := &http.Client{Transport: shardrpc.NewAuthTransport(secret, base)}
//	srv := shardrpc.AuthMiddleware(secret, mux) // or v.Middleware(mux)
//
// Recover adds panic recovery (500 Internal with a request ID) in front.
//
// # Errors
//
// A failed request answers a non-2xx status with a JSON ErrorBody and the
// same code in HeaderCode (HEAD responses have no body). The client turns
// the code into a sentinel (ErrNotFound, ErrCorrupt, ErrUnauthorized,
// ErrBadRequest) and wraps every failure in a *NodeError naming the server
// and the operation, so callers write errors.Is(err, shardrpc.ErrNotFound)
// and still log which node failed.
//
// # Shard reads
//
// The client asks for a framed GET (ParamFramed): the server checks the
// range's first block, so that a shard whose first block is bad answers
// 409 Corrupt before any body, and sends the file's blocks as stored,
// each followed by its CRC-32C, with sendfile, from the page cache to the
// socket (Content-Length, HeaderBlockSize, HeaderSize). The client's
// reader checks every block before any of its bytes go out (frames.go).
// Framing took a 64 MiB GET's shard servers from 0.60 to 0.28 CPU seconds
// per GB: a pread, a CRC and a socket write per 64 KiB block had been 65%
// of their CPU.
//
// An unframed GET (a client that predates framing) streams data the
// server has verified block by block. Its response announces its length in
// HeaderLength and is sent chunked so that the server can report, in the
// TrailerError trailer, a checksum failure it meets after the first bytes
// are already on the wire. The client's reader turns that trailer, or a
// framed block whose CRC does not match, into ErrCorrupt and a short
// stream into io.ErrUnexpectedEOF: it never returns short data as if it
// were whole.
//
// # Durability
//
// PUT of a shard answers 200 only after the data is fsynced and renamed into
// place; anything else, including a dropped connection, means the shard
// does not exist. POST of a manifest answers only after it is synced.
package shardrpc
