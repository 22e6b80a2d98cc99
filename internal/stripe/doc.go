// Package stripe moves objects in and out of erasure-coded stripe groups on
// shard servers. It is shared by the gateway (PUT and GET) and the repair
// worker (reads of survivors), so degraded reads and quorum writes are
// written once.
//
// A stripe group is one object (or multipart part) coded with one code: its
// bytes are cut into stripes of k*ChunkSize data bytes, each stripe is
// encoded into n chunks, and shard i of every stripe is appended to one shard
// file on the i-th placement server. The last stripe is shorter; its chunk
// length is the smallest multiple of the code's ShardMultiple that holds
// ceil(bytes/k) (metadata.StripeGeometry).
//
// Memory is bounded by a few stripes per request whatever the object size:
// writes stream every shard to its server through a pipe as stripes are
// encoded, and reads fetch a small window of stripes ahead of the client.
package stripe
