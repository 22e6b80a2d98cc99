package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/regen-s3/regen/gateway"
)

// adminRepairWatch draws repair progress until nothing is degraded.
func adminRepairWatch(ctx context.Context, c *adminClient, _ []string, w io.Writer) error {
	start := time.Now()
	var peak int64 // most degraded stripes seen: the bar's 100%
	var firstDone int64 = -1
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		var st gateway.Status
		if err := c.get(ctx, "status", &st); err != nil {
			return err
		}
		if st.Stripes == nil || st.Repair == nil {
			return fmt.Errorf("the gateway reports no repair status (are the shard servers running the repair worker?)")
		}
		s, r := st.Stripes, st.Repair
		if firstDone < 0 {
			firstDone = r.Done
		}
		peak = max(peak, s.Degraded)
		if c.json {
			fmt.Fprintf(w, `{"t":%.1f,"stripes":%d,"degraded":%d,"lost_shards":%d,"waiting":%d,"queued":%d,"running":%d,"done":%d,"failed":%d,"bytes_moved":%d}`+"\n",
				time.Since(start).Seconds(), s.Total, s.Degraded, s.LostShards, s.Waiting, r.Queued, r.Running, r.Done, r.Failed, r.BytesMoved)
		} else {
			fmt.Fprintf(w, "\r%s", progressLine(s, r, peak, time.Since(start)))
		}
		// NB: right after a kill, gossip has not noticed yet and nothing
		// looks degraded; a watch that sees no damage waits a little
		// before it believes it.
		settled := peak > 0 || time.Since(start) >= 10*time.Second
		if settled && s.Degraded == 0 && r.Queued == 0 && r.Running == 0 {
			if !c.json {
				fmt.Fprintf(w, "\nfully redundant: %d stripes healthy; %d repairs since the servers started (%s), %s moved, %d failed; watched %s",
					s.Total, r.Done, methodMix(r.Methods), humanBytes(r.BytesMoved), r.Failed, time.Since(start).Round(100*time.Millisecond))
				if r.ElapsedSeconds > 0 {
					fmt.Fprintf(w, "; last batch took %.1fs, planner predicted %.1fs", r.ElapsedSeconds, r.PredictedSeconds)
				}
				fmt.Fprintln(w)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func progressLine(s *gateway.StripeStatus, r *gateway.RepairStatus, peak int64, elapsed time.Duration) string {
	const width = 30
	frac := 1.0
	if peak > 0 {
		frac = 1 - float64(s.Degraded)/float64(peak)
	}
	n := int(frac * width)
	bar := strings.Repeat("#", n) + strings.Repeat(".", width-n)
	eta := "-"
	if r.ETASeconds > 0 {
		eta = (time.Duration(r.ETASeconds * float64(time.Second))).Round(100 * time.Millisecond).String()
	}
	line := fmt.Sprintf("[%s] %3.0f%%  degraded %d/%d (%d lost shards, %d waiting)  queued %d running %d  %s/s  ETA %s  %s  %s",
		bar, frac*100, s.Degraded, s.Total, s.LostShards, s.Waiting, r.Queued, r.Running,
		humanBytes(int64(r.RateBytesPerSec)), eta, methodMix(r.Methods), elapsed.Round(time.Second))
	return line + "   "
}

func methodMix(m map[string]int64) string {
	if len(m) == 0 {
		return "no repairs"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
