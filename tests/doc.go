// Package tests holds regen's end-to-end tests: they build the regen binary,
// start real shard-server and gateway processes on loopback, and talk to
// them with real S3 clients. Nothing here is faked.
package tests
