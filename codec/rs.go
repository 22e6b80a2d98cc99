package codec

import (
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/reedsolomon"
)

// maxRSShards keeps RS in the classic GF(2^8) Vandermonde/Cauchy mode. The
// library would switch to Leopard above 256 shards, which has a different
// layout; we never want that for stored data.
const maxRSShards = 256

// RS is a systematic Reed-Solomon code from klauspost/reedsolomon.
type RS struct {
	k, m int
	enc  reedsolomon.Encoder

	planOnce sync.Once
	plans    *planner
}

var _ Code = (*RS)(nil)

// NewRS returns the rs-k-m code.
func NewRS(k, m int) (*RS, error) {
	if k < 1 || m < 1 || k+m > maxRSShards {
		return nil, fmt.Errorf("%w: rs-%d-%d: need k >= 1, m >= 1, k+m <= %d", ErrBadParams, k, m, maxRSShards)
	}
	// WithAutoGoroutines would size goroutines for a shard length; a stripe
	// chunk is at most a few MiB and callers already encode stripes in
	// parallel, so one goroutine per call keeps CPU use predictable.
	enc, err := reedsolomon.New(k, m, reedsolomon.WithMaxGoroutines(1))
	if err != nil {
		return nil, fmt.Errorf("%w: rs-%d-%d: %w", ErrBadParams, k, m, err)
	}
	return &RS{k: k, m: m, enc: enc}, nil
}

// Name is the code's name as Parse reads it, e.g. rs-6-3.
func (c *RS) Name() string { return fmt.Sprintf("rs-%d-%d", c.k, c.m) }

// DataShards is k, the number of data shards.
func (c *RS) DataShards() int { return c.k }

// ParityShards is m, the number of parity shards.
func (c *RS) ParityShards() int { return c.m }

// TotalShards is n = k + m.
func (c *RS) TotalShards() int { return c.k + c.m }

// SubChunks is 1: Reed-Solomon shards have no sub-chunks.
func (c *RS) SubChunks() int { return 1 }

// ShardMultiple is what every shard's length must be a multiple of (1: any length).
func (c *RS) ShardMultiple() int { return 1 }

// Encoder exposes the underlying reedsolomon encoder for callers that need
// its low-level extensions (e.g. progressive decoding for PUSH chains).
func (c *RS) Encoder() reedsolomon.Encoder { return c.enc }

// Encode computes the parity shards from the k data shards; every parity shard must be allocated with the data shards' length.
func (c *RS) Encode(shards [][]byte) error {
	if _, err := checkShards(c, shards); err != nil {
		return err
	}
	return mapRSErr(c.enc.Encode(shards))
}

// Reconstruct fills every nil shard from the others; at least k must be present.
func (c *RS) Reconstruct(shards [][]byte) error {
	if _, err := checkShards(c, shards); err != nil {
		return err
	}
	return mapRSErr(c.enc.Reconstruct(shards))
}

// ReconstructSome fills the nil shards whose required entry is true (all nil shards when required is nil).
func (c *RS) ReconstructSome(shards [][]byte, required []bool) error {
	if _, err := checkShards(c, shards); err != nil {
		return err
	}
	return mapRSErr(c.enc.ReconstructSome(shards, required))
}

func mapRSErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, reedsolomon.ErrTooFewShards):
		return fmt.Errorf("%w: %w", ErrTooFewShards, err)
	case errors.Is(err, reedsolomon.ErrShardSize), errors.Is(err, reedsolomon.ErrShardNoData):
		return fmt.Errorf("%w: %w", ErrShardSize, err)
	default:
		return err
	}
}

// RepairPlan returns a conventional plan: k helpers send whole chunks.
func (c *RS) RepairPlan(failed []int) (*Plan, error) { return c.planner().plan(failed) }

// Coefficients returns the 1x1 decoding coefficients of lost over survivors.
func (c *RS) Coefficients(lost int, survivors []int) ([][][]byte, error) {
	return c.planner().coefficients(lost, survivors)
}

func (c *RS) planner() *planner {
	c.planOnce.Do(func() { c.plans = newPlanner(c, nil, false, false) })
	return c.plans
}
