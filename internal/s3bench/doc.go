// Package s3bench measures an S3 endpoint as an application sees it:
// PUT and GET of objects of a few sizes at a set concurrency (every GET
// verified by SHA-256), HEAD, listings (recursive, by delimiter, by
// prefix) and DeleteObjects, through a real S3 client (minio-go).
//
// It serves `regen bench s3` and scripts/bench-vs-minio.sh, which runs the
// same workloads against regen and MinIO. It speaks only S3, so it measures
// any S3 server alike; it never touches a bucket that holds objects it did
// not write, and it removes what it wrote.
//
// The pure parts (latency statistics, object contents and their digests)
// are in stats.go and content.go; run.go does the I/O.
package s3bench
