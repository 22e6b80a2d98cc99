// Package repair rebuilds the shards that dead or corrupt shard servers
// held, on the shard servers themselves.
//
// It has a pure core and I/O at the edges:
//
//   - the planner is a deterministic function from a stripe group, its code,
//     the failure set, the live nodes and their measured bandwidth to a Task:
//     which method (CORE, PUSH-Rep, PUSH-Sur, PULL-Rep, PULL-Sur), which
//     helpers in which order, and where the rebuilt shards go;
//   - executors carry a Task out over real data paths between shard servers
//     and report the bytes they moved;
//   - the worker finds affected stripe groups, owns each one without
//     coordination (the first live server of its placement), runs tasks in
//     a bounded pool, verifies rebuilt shards against the manifest's
//     checksums and only then switches the manifest.
//
// The worker's background jobs are services, one type each, that own
// their state and their lock, start with the worker's Run and stop with
// its context, and report their own part of the status: the scheduler
// (the job queue and batch), the scanner, the anti-entropy syncer, the
// MRF healer, the scrubber and the calibrator (see Worker).
//
// Background work grows with change, not with objects: the scan walks the
// local manifests only while something may be degraded and its last walk
// did not queue it all (scan_skip.go), writes that missed a server are
// queued (mrf.go), and the scrubber's position survives restarts
// (scrub.go). Between walks the status follows the repair: a group comes
// off the last walk's counts when its job repairs it or finds it repaired
// already (errNotDegraded), and a walk holds such groups out of the queue
// while it queues what it found, so that none comes off twice
// (scheduler.holdEnded).
//
// The methods come from two papers: PUSH (Huang et al., "PUSH: A
// Pipelined Reconstruction I/O for Erasure-Coded Storage Clusters", IEEE
// TPDS 2015) chains partial sums along survivors so no node suffers incast,
// and CORE (Li, Chen, Lee, "CORE: Augmenting Regenerating-Coding-Based
// Recovery for Single and Concurrent Failures in Distributed Storage
// Systems", MSST 2013) repairs several failures of a regenerating-coded
// stripe at once with the fewest bytes moved.
package repair
