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
//
// # Families
//
//   - rs-k-m: systematic Reed-Solomon (klauspost/reedsolomon, Vandermonde).
//   - clay-k-m: Clay MSR codes with d = n-1 (Vajha et al., FAST'18; Ceph's
//     layout). alpha = q^t sub-chunks per shard chunk; a single lost shard
//     is rebuilt from beta = alpha/q raw sub-chunks of each of the n-1 other
//     shards (optimal access). See Clay for the exact format.
//   - pm-k-m: product-matrix MSR codes (Rashmi-Shah-Kumar) shortened to
//     d = n-1, for m >= k-1. alpha = m; a single repair takes one dot
//     product from each of the n-1 helpers. See PM.
//
// A shard chunk of L bytes (a multiple of ShardMultiple = alpha) is alpha
// sub-chunks of L/alpha bytes; byte j of every sub-chunk belongs to codeword
// j, so all arithmetic is position-wise over whole sub-chunks and runs on the
// library's SIMD kernels (GalMulSlice[Xor] and custom-matrix encoders). For
// speed, sub-chunks of >= 4 KiB are recommended; correctness holds for any.
//
// # Repair
//
// Why a generic engine: every code here is linear, so every stored sub-chunk
// is a known functional of the k*alpha data symbols. The planner builds these
// functionals once per code by running the code's own encoder on the
// identity, and then answers every repair question by GF(2^8) elimination:
// single-node MSR repair, CORE's multi-failure repair (Li, Chen, Lee, MSST'13)
// with virtual failures for bad patterns, greedy plane augmentation for Clay
// failures in several y-sections, and conventional decoding when nothing
// saves bandwidth. One mechanism, tested against the cut-set bound
// t(n-t)/(k(n-k)) (RepairBound), replaces per-code repair algorithms.
//
// Codes implement two optional interfaces, found by type assertion:
// Regenerating (RepairPlan) and Linear (Coefficients, for PUSH chains with
// PushStep). A Plan is deterministic, cached per failure set in the code
// value, and JSON-serialisable: HelperTask.Produce is the helper side (raw
// sub-chunk runs for Clay, dot products for PM, whole chunks for RS) and
// Plan.Rebuild the relayer side. Survey executes plans on random data,
// verifies the rebuilt bytes and measures bandwidth; `regen codes` prints it.
package codec
