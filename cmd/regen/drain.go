package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/regen-s3/regen/gateway"
	"github.com/regen-s3/regen/internal/cluster"
)

// adminDrain starts (or cancels) the drain of a shard server through the
// gateway and, unless told otherwise, shows its progress until the server
// holds nothing: then it can be stopped and removed without any object
// losing redundancy.
func adminDrain(ctx context.Context, c *adminClient, args []string, w io.Writer) error {
	if len(args) != 1 {
		return usageErrorf("usage: regen admin drain NODE [--cancel | --watch | --no-wait]   (NODE: a shard server's ID, as regen admin nodes lists it)")
	}
	id, o := args[0], c.drain
	if o.cancel && (o.watch || o.noWait) || o.watch && o.noWait {
		return usageErrorf("--cancel, --watch and --no-wait exclude each other")
	}
	if !o.watch {
		method, verb := http.MethodPost, "draining"
		if o.cancel {
			method, verb = http.MethodDelete, "no longer draining"
		}
		var res gateway.DrainResult
		if err := c.do(ctx, method, "drain", url.Values{"node": {id}}, &res); err != nil {
			return err
		}
		if c.json && (o.cancel || o.noWait) {
			return json.NewEncoder(w).Encode(res)
		}
		if !c.json {
			again := ""
			if !res.Changed {
				again = " (already)"
			}
			fmt.Fprintf(w, "node %s is %s%s\n", id, verb, again)
		}
		if o.cancel || o.noWait {
			return nil
		}
	}
	return watchDrain(ctx, c, id, w)
}

// drainProgress is one look at a draining node.
type drainProgress struct {
	Node     string `json:"node"`
	State    string `json:"state"`
	Draining bool   `json:"draining"`
	// Left counts what the node still holds: shard files of live objects
	// and inline objects placed on it. -1 while it does not answer.
	// Uploads are open multipart uploads writing to it.
	Left    int64 `json:"left"`
	Uploads int64 `json:"uploads"`
	// Moving counts the stripe groups still to move off draining nodes
	// (all of them, cluster-wide); Waiting those no server can take.
	Moving  int64 `json:"moving"`
	Waiting int64 `json:"waiting_for_capacity"`
}

// drainState finds node id in a status.
func drainState(st gateway.Status, id string) (drainProgress, error) {
	for _, n := range st.Nodes {
		if n.ID != id {
			continue
		}
		if n.Role != cluster.RoleShard {
			return drainProgress{}, fmt.Errorf("node %s is a %s, not a shard server", id, n.Role)
		}
		p := drainProgress{Node: id, State: string(n.State), Draining: n.Draining, Left: -1}
		if n.Stats != nil {
			p.Left, p.Uploads = n.Stats.Shards+n.Stats.Inline, n.Stats.Uploads
		}
		if s := st.Stripes; s != nil {
			p.Moving, p.Waiting = s.Draining, s.DrainWaiting
		}
		return p, nil
	}
	return drainProgress{}, fmt.Errorf("no node %q in the cluster (regen admin nodes lists them)", id)
}

// watchDrain draws the drain's progress until the node holds nothing: no
// shard or inline object, no open multipart upload, whose parts are on
// it and whose object will be until it is moved, and no stripe group left
// to move off draining servers (the repair workers' count, which covers
// noncurrent versions too). A
// node that stops draining (cancelled) or dies ends the watch with an
// error: neither is a finished drain.
func watchDrain(ctx context.Context, c *adminClient, id string, w io.Writer) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	start := time.Now()
	var peak int64 // most held: the bar's 100%
	var bar *progress
	if !c.json {
		bar = newProgress(w)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		var st gateway.Status
		err := c.get(ctx, "status", &st)
		if err != nil && ctx.Err() == nil {
			return err
		}
		var p drainProgress
		if err == nil {
			if p, err = drainState(st, id); err != nil {
				return err
			}
			peak = max(peak, p.Left)
			if c.json {
				json.NewEncoder(w).Encode(p)
			}
			switch {
			case p.State == string(cluster.StateDead) || p.State == string(cluster.StateLeft):
				if bar != nil {
					fmt.Fprintln(w)
				}
				return fmt.Errorf("node %s is %s before its drain finished: repair rebuilds what it held once the grace has passed (regen admin repair watch)", id, p.State)
			case !p.Draining:
				if bar != nil {
					fmt.Fprintln(w)
				}
				return fmt.Errorf("node %s is not draining (cancelled?); start it with regen admin drain %s", id, id)
			case p.Left == 0 && p.Uploads == 0 && p.Moving == 0:
				// NB: Moving too: the shards of noncurrent versions (a
				// versioned bucket's older versions) are not in Left, and
				// the repair workers count their groups still to move.
				if bar != nil {
					bar.finish(w, "nothing left")
					fmt.Fprintf(w, "node %s holds no shards after %s: stop it and remove it; no object loses redundancy\n", id, time.Since(start).Round(100*time.Millisecond))
				}
				return nil
			}
			if bar != nil {
				bar.set(peak-p.Left, peak, drainLine(p))
			}
		}
		select {
		case <-ctx.Done():
			if bar != nil {
				fmt.Fprintln(w)
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("drain of %s not finished after %s: %s", id, c.timeout, drainLine(p))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// drainLine describes a drain beside its progress bar.
func drainLine(p drainProgress) string {
	if p.Left < 0 {
		return fmt.Sprintf("node %s does not answer", p.Node)
	}
	line := fmt.Sprintf("%d shards left on %s", p.Left, p.Node)
	if p.Uploads > 0 {
		line += fmt.Sprintf("; %d open multipart uploads write to it (their objects move once completed; aborted or expired ones go)", p.Uploads)
	}
	if p.Waiting > 0 {
		line += fmt.Sprintf("; %d stripe groups wait for capacity: every other live server holds a shard of them (add a server)", p.Waiting)
	}
	return line
}
