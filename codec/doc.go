// Package codec is the erasure-coding math of regen, and nothing else: no I/O,
// no network, no goroutines of its own beyond what the Reed-Solomon library
// starts.
//
// Every code follows klauspost/reedsolomon's shard convention: a [][]byte of
// TotalShards() entries, data shards first, nil meaning missing, all present
// shards the same length. Encode overwrites parity and never touches data, so
// concurrent readers of data shards are safe.
//
// Codes are named "<family>-<k>-<m>", e.g. "rs-6-3". Parse validates a name
// and returns a ready Code. The name is stored in every manifest, so a cluster
// can hold objects of several codes at once, and the name plus FormatVersion
// fix the on-disk layout of a shard.
package codec
