// Package multiraft runs many raft groups on each server over one pebble
// database: an etcd raft RawNode per replica, its log in pebble, batched
// ReadIndex reads, snapshots streamed from a pebble snapshot and installed
// by ingestion, and a manager that grows, heals and rebalances the groups
// as servers come and go.
package multiraft
