// Package shardserver is one regen shard server: it stores shard files on
// its local disk, keeps the manifests and bucket records of the objects it
// holds shards of in a pebble DB (package metadata), and serves both over
// the shardrpc HTTP protocol.
//
// # Layout of the data directory
//
//	node-id            this server's stable node ID (16 hex digits)
//	meta/              pebble DB: manifests, part index, buckets, GC queue
//	shards/<xx>/<id>.<idx>  shard idx of part <id>; <xx> is the ID's first
//	                   two characters, lowercased, to keep directories small
//	shards/<xx>/.tmp.* shard files being written
//
// Object keys never become paths: files are named by part ID and shard
// index only, both validated by shardrpc.ValidateShardName. Part IDs should
// differ in more than letter case, for case-insensitive file systems.
//
// # Shard file format, version 1
//
//	offset  size  field
//	0       4     magic "RGSH"
//	4       2     format version, big-endian (1)
//	6       2     flags (0)
//	8       4     block size B, big-endian (Config.BlockSize when written)
//	12      4     CRC-32C (Castagnoli) of the whole data, big-endian
//	16      ...   blocks: B data bytes then the CRC-32C of those bytes
//	              (4, big-endian); the last block may be short, never empty
//
// The data length follows from the file size: with body = size-16 and
// per = B+4, it is (body/per)*B plus (body%per)-4 when the remainder is
// non-zero; a remainder of 1..4 bytes marks a damaged file. Every read
// verifies every block it touches, so a ranged read costs at most two
// partial blocks of extra I/O. The whole-data CRC in the header answers a
// stat without reading the data; it is the CRC the manifest records per
// shard (Part.ShardCRC).
//
// # Durability
//
// A shard is written to a temp file in its final directory, fsynced,
// renamed over the final name, and the directory fsynced; only then is the
// PUT answered 200. A write that fails or whose body is cut short leaves
// nothing under the final name. Manifests are synced by the metadata store.
//
// # Garbage collection
//
// A manifest that replaces another (a newer version, a tombstone, or a
// repair that moved shards) does not make the old one garbage at once: the
// write may have reached only some servers and failed, and the old version
// may be the acknowledged one. The metadata store keeps the old version as
// a previous version (and keeps an older write that lost a race the same
// way); readers count it as a vote. After Config.GCDelay a confirm job asks
// the current manifest's placement which versions they hold (confirm.go):
// once a write quorum holds the current version, the previous versions are
// dropped and the shard files only they placed here are queued for
// deletion; if the current version provably never reached a write quorum
// and is older than Config.RollbackAfter, it is rolled back and its shard
// files are queued instead. Before deleting, the GC loop checks that no
// kept version (current or previous) has claimed the file again. A slower
// sweep deletes shard files older than Config.OrphanAge that no manifest
// references (shards of failed PUTs) and old temp files.
//
// A delete's tombstone has no shard files. It is collected itself once
// every shard server holds it (with nothing under it) or nothing, no
// sooner than Config.TombstoneGrace after it was stored (tombstones.go).
package shardserver
