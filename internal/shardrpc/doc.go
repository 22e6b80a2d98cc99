// Package shardrpc is the wire protocol between gateways (or repair workers)
// and shard servers, and the client that speaks it.
//
// The protocol is plain HTTP/1.1: JSON for metadata, raw bytes for shard
// data, so shard streams need no framing and any HTTP tool can debug them.
// Every request carries the cluster secret in HeaderSecret; a server
// answers 401 without it.
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
// GET of a shard streams data the server has verified block by block. A
// response announces its length in HeaderLength and is sent chunked so that
// the server can report, in the TrailerError trailer, a checksum failure
// it meets after the first bytes are already on the wire. The client's
// reader turns that trailer into ErrCorrupt and a short stream into
// io.ErrUnexpectedEOF: it never returns short data as if it were whole.
// A shard whose first block is already bad answers 409 Corrupt before any
// body.
//
// # Durability
//
// PUT of a shard answers 200 only after the data is fsynced and renamed into
// place; anything else, including a dropped connection, means the shard
// does not exist. POST of a manifest answers only after it is synced.
package shardrpc
