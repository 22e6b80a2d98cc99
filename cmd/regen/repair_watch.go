package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/regen-s3/regen/gateway"
	"github.com/regen-s3/regen/internal/cluster"
)

// watchSettle is how long a watch that has seen no damage at all keeps
// looking before it believes the cluster is healthy: a server killed a
// moment ago may still answer the first status.
const watchSettle = 2 * time.Second

// watchMissLimit is how long a watch that has seen a status keeps asking
// while the status does not come: under a million-object repair on a
// small machine the shard servers were too busy to answer the gateway's
// status calls in time, and a watch that ended at the first miss ended a
// scale run's measurement.
const watchMissLimit = 2 * time.Minute

// adminRepairWatch draws repair progress until the cluster is fully
// redundant: nothing degraded, nothing queued or running, and no shard
// server down, suspect or unreachable whose shards the repair workers
// have not counted yet. Right after a kill, a server's shards are not
// lost until the grace passes; the watch says so and keeps waiting.
func adminRepairWatch(ctx context.Context, c *adminClient, _ []string, w io.Writer) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	start := time.Now()
	var peak int64 // most degraded stripes seen: the bar's 100%
	var bar *progress
	if !c.json {
		bar = newProgress(w)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastGood time.Time // zero: no status yet
	for {
		var st gateway.Status
		err := c.get(ctx, "status", &st)
		if err != nil && ctx.Err() != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("repair watch: not fully redundant after %s", c.timeout)
			}
			return err
		}
		if err == nil && (st.Stripes == nil || st.Repair == nil) {
			err = errors.New("the gateway reports no repair status (are the shard servers running the repair worker?)")
		}
		if err != nil {
			// NB: a gateway or shard servers busy with a large repair can
			// miss a status call's deadline; the watch rides that out for
			// a while once it has seen one status, rather than end the
			// operator's (or a script's) watch in the middle of a repair.
			if lastGood.IsZero() || time.Since(lastGood) > watchMissLimit {
				return err
			}
			if c.json {
				fmt.Fprintf(w, `{"t":%.1f,"state":"unavailable","error":%q}`+"\n", time.Since(start).Seconds(), err.Error())
			} else {
				bar.describe("status unavailable, asking again: " + err.Error())
			}
			select {
			case <-ctx.Done(): // the next call fails at once and ends the watch
			case <-tick.C:
			}
			continue
		}
		lastGood = time.Now()
		s, r := st.Stripes, st.Repair
		peak = max(peak, s.Degraded)
		v := watchVerdict(st, peak, time.Since(start))
		if c.json {
			fmt.Fprintf(w, `{"t":%.1f,"stripes":%d,"degraded":%d,"pending":%d,"lost_shards":%d,"waiting":%d,"queued":%d,"running":%d,"done":%d,"failed":%d,"bytes_moved":%d,"down":%d,"grace_left_seconds":%.1f,"state":%q}`+"\n",
				time.Since(start).Seconds(), s.Total, s.Degraded, s.Pending, s.LostShards, s.Waiting, r.Queued, r.Running, r.Done, r.Failed, r.BytesMoved, v.down, s.GraceLeftSeconds, v.state)
		} else if !v.done {
			bar.set(peak-s.Degraded, peak, v.line)
		}
		if v.done {
			if !c.json {
				bar.finish(w, v.line)
				fmt.Fprintf(w, "fully redundant: %d stripes healthy; %d repairs since the servers started (%s), %s moved, %d failed; watched %s",
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
			if !c.json {
				fmt.Fprintln(w)
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("repair watch: not fully redundant after %s (%s)", c.timeout, v.state)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// verdict is what one status means for the watch.
type verdict struct {
	done  bool
	down  int    // shard servers dead, suspect or unreachable
	state string // "redundant", "detecting", "grace", "capacity", "repairing"
	line  string // the state, beside the progress bar
}

// watchVerdict decides from one status whether the cluster is fully
// redundant, and the progress line to draw.
func watchVerdict(st gateway.Status, peak int64, elapsed time.Duration) verdict {
	s, r := st.Stripes, st.Repair
	seen := map[string]bool{}
	for _, id := range s.DownSeen {
		seen[id] = true
	}
	var down, unseen int
	for _, n := range st.Nodes {
		if n.Role != cluster.RoleShard || n.State == cluster.StateLeft {
			continue
		}
		// A server killed a moment ago is still alive in gossip but no
		// longer answers the gateway: down as far as the watch goes.
		if n.State == cluster.StateDead || n.State == cluster.StateSuspect || n.Error != "" {
			down++
			if n.State != cluster.StateDead || !seen[n.ID] {
				unseen++ // not counted by every repair worker yet
			}
		}
	}
	v := verdict{down: down}
	busy := s.Degraded > 0 || r.Queued > 0 || r.Running > 0
	switch {
	case !busy && unseen == 0 && (peak > 0 || down > 0 || elapsed >= watchSettle):
		v.done, v.state = true, "redundant"
	case unseen > 0:
		v.state = "detecting"
	case s.Degraded > 0 && s.Degraded == s.Pending && r.Queued == 0 && r.Running == 0:
		v.state = "grace"
	case s.Waiting > 0 && s.Waiting >= s.Degraded-s.Pending && r.Running == 0:
		// Every degraded stripe past the grace waits for a server (each
		// retry re-queues it for a moment, so Queued is not telling).
		v.state = "capacity"
	case busy:
		v.state = "repairing"
	default:
		v.state = "settling"
	}
	switch v.state {
	case "detecting":
		v.line = fmt.Sprintf("waiting for detection: %d servers down or unreachable, %d not yet counted by the repair workers",
			down, unseen)
	case "capacity":
		v.line = fmt.Sprintf("waiting for capacity: %d degraded stripes have no server to rebuild onto (every live server holds one of their shards); start another shard server",
			s.Waiting)
	case "grace":
		v.line = fmt.Sprintf("waiting for grace: %d servers down, %d stripes degraded, repair starts in %s",
			down, s.Degraded, (time.Duration(s.GraceLeftSeconds * float64(time.Second))).Round(time.Second))
	default:
		v.line = progressLine(s, r)
	}
	return v
}

// progressLine describes repair progress beside the bar, which shows the
// degraded stripes repaired out of the most seen.
func progressLine(s *gateway.StripeStatus, r *gateway.RepairStatus) string {
	eta := "-"
	if r.ETASeconds > 0 {
		eta = (time.Duration(r.ETASeconds * float64(time.Second))).Round(100 * time.Millisecond).String()
	}
	line := fmt.Sprintf("degraded %d/%d (%d lost shards, %d waiting)  queued %d running %d  %s/s  ETA %s  %s",
		s.Degraded, s.Total, s.LostShards, s.Waiting, r.Queued, r.Running,
		humanBytes(int64(r.RateBytesPerSec)), eta, methodMix(r.Methods))
	if s.Draining > 0 {
		line += fmt.Sprintf("  draining %d (%d waiting for capacity)", s.Draining, s.DrainWaiting)
	}
	return line
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
