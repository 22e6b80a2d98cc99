package repair

import (
	"context"
	"io"
	"log/slog"
	"sync"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// calibrator is the background service that keeps the cost model true to
// this server: it measures the data path at start-up (calibratePath),
// re-measures the disk while it is quiet (recalibrateDisk) and learns the
// data path's CPU cost from the traffic it carries (learnMove). It owns
// the model and its lock; the planner and the batch predictions read it
// (model) while it runs.
type calibrator struct {
	self   string
	log    *slog.Logger
	shards calibrationShards
	view   func() nodeView
	// dir, if set, is where the disk is re-measured (Options.CalibrateDir).
	dir string
	// dataPathBytes and writtenBytes: see Options; either may be nil.
	dataPathBytes func() int64
	writtenBytes  func() int64
	// repairing reports whether repairs are running or queued (the disk
	// is not measured then).
	repairing func() bool

	mu sync.RWMutex
	cm CostModel
}

// calibrationShards is what calibratePath sends its probes through
// (Shards has it).
type calibrationShards interface {
	PutShard(ctx context.Context, addr, fileID string, idx int, body io.Reader) (shardrpc.ShardInfo, error)
	GetShard(ctx context.Context, addr, fileID string, idx int, off, length int64) (io.ReadCloser, error)
}

// run re-measures the disk and learns the data path's rate until ctx
// ends (the start-up calibratePath is the caller's to run first).
func (c *calibrator) run(ctx context.Context) {
	var wg sync.WaitGroup
	if c.dir != "" {
		wg.Go(func() { c.recalibrateDisk(ctx, c.dir) })
	}
	if c.dataPathBytes != nil {
		wg.Go(func() { c.learnMove(ctx, c.dataPathBytes) })
	}
	wg.Wait()
}

// model is the current cost model; calibration may refine it while
// repairs run.
func (c *calibrator) model() CostModel {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cm
}

func (c *calibrator) setModel(cm CostModel) {
	c.mu.Lock()
	c.cm = cm
	c.mu.Unlock()
}
