// Package metadata holds regen's object and bucket records and the pebble
// store that keeps them on every shard server, beside the shard files.
//
// There is no central metadata service: each shard server stores the
// manifests of the objects it holds shards of, and every bucket record. A
// manifest carries everything needed to read its object back (code, stripe
// geometry, placement, checksums), so any gateway can serve any object after
// reading the newest manifest a read quorum agrees on.
//
// Versions order writes to one key: the newer Version wins everywhere, so
// replicas converge whatever order writes arrive in. Deletes are tombstones
// (Manifest.Deleted) with a version of their own.
//
// This package imports only pebble and the standard library; it knows codes
// by name only.
package metadata
