package gateway

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// AdminPrefix is where the operator API lives. A leading underscore is not
// allowed in bucket names, so it can never shadow a bucket.
const AdminPrefix = "/_regen/"

// StatsSource is the optional capability to ask shard servers for their
// counts; *shardrpc.Client has it.
type StatsSource interface {
	Stats(ctx context.Context, addr string) (shardrpc.Stats, error)
}

// NodeStatus is one node in the admin status.
type NodeStatus struct {
	cluster.Member
	Stats *shardrpc.Stats `json:"stats,omitempty"`
	Error string          `json:"error,omitempty"`
}

// Status is the answer of GET /_regen/status.
type Status struct {
	Gateway string       `json:"gateway"`
	Time    time.Time    `json:"time"`
	Nodes   []NodeStatus `json:"nodes"`
	// Manifests counts live manifests over the live servers; every object
	// has one on each of its placement servers.
	Manifests int64 `json:"manifests"`
	// Shards counts shard files held by live servers.
	Shards int64 `json:"shards"`
}

func (g *Gateway) status(ctx context.Context) Status {
	st := Status{Gateway: g.cfg.NodeID, Time: time.Now().UTC()}
	members := g.layer.nodes.Members()
	st.Nodes = make([]NodeStatus, len(members))
	src, _ := g.layer.shards.(StatsSource)
	var mu sync.Mutex
	var eg errgroup.Group
	for i, m := range members {
		st.Nodes[i] = NodeStatus{Member: m}
		if m.Role != cluster.RoleShard || !m.Alive() || src == nil {
			continue
		}
		eg.Go(func() error {
			s, err := src.Stats(ctx, m.HTTP)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				st.Nodes[i].Error = err.Error()
				return nil
			}
			st.Nodes[i].Stats = &s
			return nil
		})
	}
	eg.Wait()
	for _, n := range st.Nodes {
		if n.Stats != nil {
			st.Manifests += n.Stats.Objects
			st.Shards += n.Stats.Shards
		}
	}
	return st
}

// serveAdmin answers the operator API; the caller has authenticated.
func (g *Gateway) serveAdmin(c *fiber.Ctx, path string) error {
	switch path {
	case "status":
		ctx, cancel := g.opContext()
		defer cancel()
		b, err := json.MarshalIndent(g.status(ctx), "", "  ")
		if err != nil {
			return err
		}
		c.Set("Content-Type", "application/json")
		return c.Send(b)
	}
	return apiErr("NoSuchKey", "unknown admin resource "+path)
}

// serveOps answers the unauthenticated operational endpoints. It reports
// whether it handled the request.
func (g *Gateway) serveOps(c *fiber.Ctx, path string, gatherer prometheus.Gatherer) bool {
	if c.Method() != fiber.MethodGet && c.Method() != fiber.MethodHead {
		return false
	}
	switch path {
	case "/healthz":
		c.Set("Content-Type", "text/plain")
		c.SendString("ok\n")
		return true
	case "/readyz":
		live, _ := g.layer.liveShards()
		c.Set("Content-Type", "text/plain")
		if len(live) < g.minShards() {
			c.Status(fiber.StatusServiceUnavailable)
			c.SendString("waiting for shard servers\n")
			return true
		}
		c.SendString("ready\n")
		return true
	case "/metrics":
		if gatherer == nil {
			return false
		}
		fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))(c.Context())
		return true
	}
	return false
}

// minShards is how many live shard servers a default-code PUT needs.
func (g *Gateway) minShards() int {
	c, err := g.layer.code(g.cfg.DefaultCode)
	if err != nil {
		return 1
	}
	return min(c.DataShards()+1, c.TotalShards())
}
