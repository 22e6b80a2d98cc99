// Package chaos checks that regen keeps its promise to clients under
// failures: every key linearizable, no acknowledged write lost, no
// acknowledged DELETE undone. It serves `regen chaos` and the chaos
// end-to-end tests.
//
// A run (Run) starts a `regen dev` cluster plus a second gateway whose
// clock is skewed (--clock-offset), creates an rs-6-3 and a clay-6-3
// bucket, and runs three things at once:
//
//   - a Workload: concurrent minio-go clients doing PUT (plain, If-Match on
//     the ETag the client saw last, If-None-Match: *), GET, HEAD and DELETE
//     on a few keys, and listings of their buckets (recursive, and by a
//     delimiter that rolls half the keys up into a common prefix), through
//     both gateways, values of 1 KiB to a few MiB
//     (inline, one stripe, several stripes), each value unique and named by
//     its MD5, which is also its ETag. Every operation's invocation,
//     completion and result goes into a History.
//   - a Nemesis, seeded: kill -9 and SIGSTOP of up to n-k shard servers,
//     rolling kills, kill -9 of the second gateway; after each fault it
//     restarts or resumes everything and times the wait until the admin
//     status reports full redundancy.
//   - a progress callback.
//
// After the run the nemesis heals, the cluster is given time to become
// fully redundant, and every key is read back and every bucket listed
// through both gateways (the durability check: those reads join the
// history).
//
// Check, the pure core, then judges the history: porcupine checks each
// key against a register (value = hash or absent), where a write that
// failed is indeterminate (it may take effect any time after its
// invocation, or never), a read that failed is no constraint, a 404 means
// absent and 200/412 outcomes of conditional writes must follow from the
// register's value. Witness rules name what went wrong from the few
// operations that prove it (lost, stale, resurrected, corrupt, conflict,
// unreadable), and porcupine draws an HTML visualization of every key it
// finds not linearizable. Listings are judged apart (checkListings): a
// key, or a common prefix over keys, that the history proves present
// throughout a listing must be listed, and one it proves absent
// throughout must not be.
//
// I/O is at the edges: cluster.go starts and breaks processes, workload.go
// speaks S3; history.go and check.go are pure and unit-tested with
// hand-made histories.
package chaos
