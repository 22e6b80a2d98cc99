package repair

import (
	"context"
	"time"
)

// Learning the data path's CPU cost. The start-up calibration times one
// idle 4 MiB PUT and GET, the best case: under real load the same bytes
// cost several times more CPU (allocation and GC, scheduling among many
// concurrent streams, the kernel's copies). The worker therefore watches
// what the data path really costs here: the process's CPU time against the
// bytes its data path moved (shardserver's DataPathBytes), over windows
// busy enough that the rest of the process (gossip, scans) is noise.
// Uploads teach it before the first failure; repairs keep it current.

const (
	// moveMinBytes is the least data-path traffic a window must carry
	// to count; moveMaxWindow abandons a window that never gets there
	// (idle CPU would otherwise be charged to a trickle of bytes).
	moveMinBytes  = 64 << 20
	moveMaxWindow = 10 * time.Second
	// moveWeight is how much a new window moves the learned cost.
	moveWeight = 0.3
)

// moveLearner turns (CPU seconds, bytes) windows into a Move rate.
type moveLearner struct {
	cost float64 // learned CPU seconds per byte-step; 0 until the first window
}

// observe folds in one window and returns the learned Move rate.
func (l *moveLearner) observe(cpuSeconds float64, bytes int64) float64 {
	c := cpuSeconds / float64(bytes)
	if l.cost == 0 {
		l.cost = c
	} else {
		l.cost = (1-moveWeight)*l.cost + moveWeight*c
	}
	return 1 / l.cost
}

// learnMove runs until ctx ends, replacing the model's Move with the
// learned rate after every window that carried enough traffic.
func (c *calibrator) learnMove(ctx context.Context, bytes func() int64) {
	if !startMeter().ok {
		return // no process CPU time on this platform: keep the calibration
	}
	var l moveLearner
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	m0, b0, t0 := startMeter(), bytes(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		b := bytes() - b0
		if b < moveMinBytes {
			if time.Since(t0) > moveMaxWindow {
				m0, b0, t0 = startMeter(), bytes(), time.Now()
			}
			continue
		}
		rate := l.observe(m0.seconds(), b)
		m0, b0, t0 = startMeter(), bytes(), time.Now()
		cm := c.model()
		old := cm.Move
		cm.Move = rate
		c.setModel(cm)
		if rate < 0.8*old || rate > 1.25*old {
			c.log.Info("repair: learned data path rate", "move_MBps", int(rate/1e6), "was_MBps", int(old/1e6))
		}
	}
}
