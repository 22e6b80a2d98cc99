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
// The pebble key layout is in store_keys.go; a small object's data is kept
// apart from its record, under a key of its version (store_inline.go), so
// that turning a version from current to previous, as a delete or an
// overwrite does, never copies it. A newer store reads every layout an
// older one wrote; an older one cannot read what a newer one writes.
//
// A repair or an overwrite leaves records that live for milliseconds (the
// replaced version's record and its confirm job, deleted by the early
// confirmation); they go by pebble's single deletes, which vanish with
// their set where they meet instead of leaving tombstones for every level
// to compact. That is right only for keys set once between deletes, which
// store_versions.go keeps and TestSingleDeletesKeepTheirRecordsGone checks;
// pebble's reports of a broken case are counted (EngineStats).
//
// This package imports only pebble and the standard library; it knows codes
// by name only.
package metadata
