package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// Drain. The drain flag belongs to the shard server (persisted in its data
// dir, advertised in its gossip meta); the admin API only finds the server
// and asks it. The repair workers then move its shards (see repair.PlanMove)
// and gateways stop placing new objects on it (layer.newPlacement). Progress
// is the server's own count of what it still holds, in the status.

// DrainSource is the optional capability to set a shard server's drain
// flag; *shardrpc.Client has it.
type DrainSource interface {
	SetDraining(ctx context.Context, addr string, draining bool) (shardrpc.DrainResponse, error)
}

// DrainResult answers POST and DELETE /_regen/drain.
type DrainResult struct {
	Node     string `json:"node"`
	Draining bool   `json:"draining"`
	// Changed is false when the node already was (or was not) draining.
	Changed bool `json:"changed"`
	// Visible: this gateway's gossip view already shows the new flag.
	Visible bool `json:"visible"`
}

// setDraining starts or cancels the drain of shard server id.
func (g *Gateway) setDraining(ctx context.Context, c *fiber.Ctx, id string, draining bool) error {
	if id == "" {
		return apiErr("InvalidArgument", "missing node (the shard server's node ID, as regen admin nodes lists it)")
	}
	src, ok := g.layer.shards.(DrainSource)
	if !ok {
		return apiErr("NotImplemented", "this gateway's shard client cannot drain servers")
	}
	m, ok := g.layer.member(id)
	switch {
	case !ok:
		return apiErr("InvalidArgument", fmt.Sprintf("no node %q in the cluster (regen admin nodes lists them)", id))
	case m.Role != cluster.RoleShard:
		return apiErr("InvalidArgument", fmt.Sprintf("node %s is a %s, not a shard server: it holds no shards to drain", id, m.Role))
	case !m.Alive() || m.HTTP == "":
		return apiErr("InvalidArgument", fmt.Sprintf("node %s is %s: it cannot move its shards itself; repair rebuilds them elsewhere once the repair grace has passed", id, m.State))
	}
	res, err := src.SetDraining(ctx, m.HTTP, draining)
	if err != nil {
		return fmt.Errorf("drain %s: %w", id, err)
	}
	g.log.Info("drain flag set", "node", id, "draining", draining, "changed", res.Changed)
	out := DrainResult{Node: id, Draining: res.Draining, Changed: res.Changed}
	// Gossip carries the flag to every node within a second or two; wait
	// for it here, so a status right after this answer shows it.
	deadline := time.Now().Add(5 * time.Second)
	for !out.Visible && time.Now().Before(deadline) && ctx.Err() == nil {
		if m, ok := g.layer.member(id); ok && m.Draining == draining {
			out.Visible = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	body, err := json.Marshal(out)
	if err != nil {
		return err
	}
	c.Set("Content-Type", "application/json")
	return c.Send(body)
}
