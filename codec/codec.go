package codec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// FormatVersion identifies the byte layout produced by the codes of this
// package. It is bumped whenever an encoding would change, so stored shards
// are never decoded with a different layout than the one that wrote them.
const FormatVersion = 1

// Errors returned by codes. Callers branch on them with errors.Is.
var (
	// ErrBadName is returned by Parse for a code name it cannot understand.
	ErrBadName = errors.New("codec: bad code name")
	// ErrBadParams is returned for parameters a family does not support.
	ErrBadParams = errors.New("codec: unsupported parameters")
	// ErrShardCount is returned when shards has the wrong number of entries.
	ErrShardCount = errors.New("codec: wrong number of shards")
	// ErrShardSize is returned when present shards differ in length or the
	// length is not a multiple of ShardMultiple.
	ErrShardSize = errors.New("codec: bad shard size")
	// ErrTooFewShards is returned when fewer than DataShards shards are
	// present, so nothing can be decoded.
	ErrTooFewShards = errors.New("codec: too few shards to decode")
)

// Code is an MDS erasure code over a stripe of TotalShards shards.
type Code interface {
	// Name is the canonical name, e.g. "rs-6-3"; Parse(Name()) returns an
	// equivalent code.
	Name() string
	// DataShards is k.
	DataShards() int
	// ParityShards is m = n - k.
	ParityShards() int
	// TotalShards is n.
	TotalShards() int
	// SubChunks is the sub-packetization alpha: how many sub-chunks each
	// shard chunk is cut into. 1 for scalar codes such as RS.
	SubChunks() int
	// ShardMultiple is the granularity of shard lengths: every shard passed
	// to Encode or Reconstruct must have a length that is a multiple of it.
	ShardMultiple() int
	// Encode computes the parity shards from the k data shards. Parity
	// entries must be allocated with the data shards' length.
	Encode(shards [][]byte) error
	// Reconstruct fills every nil shard from the present ones. It needs at
	// least k present shards.
	Reconstruct(shards [][]byte) error
	// ReconstructSome fills only the nil shards whose required entry is true.
	ReconstructSome(shards [][]byte, required []bool) error
}

// chunkAlign is the byte alignment ChunkSize gives every sub-chunk: the
// SIMD kernels move 64-byte blocks, and a sub-chunk that starts off a cache
// line splits every load of it in two and ends in a masked tail. Measured on
// AMD Zen 4, Clay encode at the 1 MiB default: clay-6-3 with 38836-byte
// sub-chunks ran at 53% of RS, with 38848 (64-aligned) at 68%.
const chunkAlign = 64

// ChunkSize is the shard chunk to use for stripes of c when about want
// bytes are wanted: want rounded up to a multiple of ShardMultiple whose
// sub-chunks are each a multiple of 64 bytes, so that they start on cache
// lines whenever the shard buffer does. Encode accepts any multiple of
// ShardMultiple; this is the one that is fast.
func ChunkSize(c Code, want int64) int64 {
	m := int64(c.SubChunks()) * chunkAlign
	if sm := int64(c.ShardMultiple()); m%sm != 0 {
		m *= sm // codes whose multiple is not alpha keep their own
	}
	return max(1, (want+m-1)/m) * m
}

// l1Way is the bytes one way of an L1 data cache spans (64 sets of 64-byte
// lines): addresses this far apart fall into the same set.
const l1Way = 4096

// shardStagger is where consecutive shards of a stripe buffer start
// relative to each other, mod l1Way: 7 cache lines, odd, so that up to 64
// shards all start in different L1 sets.
const shardStagger = 7 * chunkAlign

// StripeStride is the distance between the starts of consecutive shards
// of chunk bytes in one stripe buffer: chunk rounded up to shardStagger
// past a multiple of l1Way. The kernels read every shard at the same
// offset at once; shards a multiple of l1Way apart would all sit in one
// set of an 8-way L1, where they evict each other and every prefetch.
// Measured on AMD Zen 4 against page-aligned shards: RS encode 12-20%
// faster at the gateway's 1 MiB chunk, Clay up to 16% there and 20-35% on
// stripes streamed from DRAM (BENCHMARKS.md, seventh round).
func StripeStride(chunk int64) int64 {
	return chunk + ((shardStagger-chunk)%l1Way+l1Way)%l1Way
}

// NewStripe returns n shard buffers of chunk bytes carved from one
// allocation, StripeStride(chunk) apart.
func NewStripe(n int, chunk int64) [][]byte {
	stride := StripeStride(chunk)
	slab := make([]byte, int64(n)*stride)
	shards := make([][]byte, n)
	for i := range shards {
		off := int64(i) * stride
		shards[i] = slab[off : off+chunk : off+chunk]
	}
	return shards
}

// Family is a code family name as it appears in a code name.
type Family string

// The code families.
const (
	FamilyRS   Family = "rs"
	FamilyClay Family = "clay"
	FamilyPM   Family = "pm"
)

// ParseName splits a code name "<family>-<k>-<m>" into its parts without
// checking whether the family supports them.
func ParseName(name string) (Family, int, int, error) {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(name)), "-")
	if len(parts) != 3 {
		return "", 0, 0, fmt.Errorf("%w %q: want <family>-<k>-<m>, e.g. rs-6-3", ErrBadName, name)
	}
	k, err1 := strconv.Atoi(parts[1])
	m, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || k < 1 || m < 1 {
		return "", 0, 0, fmt.Errorf("%w %q: k and m must be positive integers", ErrBadName, name)
	}
	return Family(parts[0]), k, m, nil
}

// Parse returns the code named name.
func Parse(name string) (Code, error) {
	fam, k, m, err := ParseName(name)
	if err != nil {
		return nil, err
	}
	switch fam {
	case FamilyRS:
		return NewRS(k, m)
	default:
		return newFamily(fam, k, m, name)
	}
}

// checkShards validates the shard convention and returns the common shard
// length (0 when no shard is present).
func checkShards(c Code, shards [][]byte) (int, error) {
	if len(shards) != c.TotalShards() {
		return 0, fmt.Errorf("%w: got %d, want %d", ErrShardCount, len(shards), c.TotalShards())
	}
	size := -1
	for i, s := range shards {
		if s == nil {
			continue
		}
		if size == -1 {
			size = len(s)
		} else if len(s) != size {
			return 0, fmt.Errorf("%w: shard %d has %d bytes, shard sizes must be equal (%d)", ErrShardSize, i, len(s), size)
		}
	}
	if size == -1 {
		return 0, nil
	}
	if size%c.ShardMultiple() != 0 {
		return 0, fmt.Errorf("%w: %d bytes is not a multiple of %d", ErrShardSize, size, c.ShardMultiple())
	}
	return size, nil
}
