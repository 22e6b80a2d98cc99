package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
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
	// Previous counts the previous versions (noncurrent versions of
	// versioned buckets and delete markers, and replaced versions
	// awaiting confirmation) over the live servers, and PreviousShards
	// their shard files.
	Previous       int64 `json:"previous"`
	PreviousShards int64 `json:"previous_shards"`
	// Tombstones counts the delete tombstones the live servers hold,
	// TombstoneJobs those queued for collection there,
	// TombstonesCollected those they removed since they started, and
	// TombstoneChecksBlocked their checks a silent server blocked
	// (shardserver/tombstones.go).
	Tombstones             int64 `json:"tombstones"`
	TombstoneJobs          int64 `json:"tombstone_jobs"`
	TombstonesCollected    int64 `json:"tombstones_collected"`
	TombstoneChecksBlocked int64 `json:"tombstone_checks_blocked"`
	// Stripes and Repair come from the repair worker (a RepairSource);
	// they are absent, not zero, while no worker reports, so clients can
	// tell "nothing degraded" from "nobody is counting".
	Stripes *StripeStatus `json:"stripes,omitempty"`
	Repair  *RepairStatus `json:"repair,omitempty"`
	// Lifecycle is what this gateway's lifecycle service has done since
	// it started (every gateway runs one; see LifecycleService).
	Lifecycle LifecycleStatus `json:"lifecycle"`
	// Events are recent membership (and repair) events seen by this
	// gateway, oldest first.
	Events []Event `json:"events"`
}

// StripeStatus counts stripes by health over the cluster.
type StripeStatus struct {
	Total    int64 `json:"total"`
	Healthy  int64 `json:"healthy"`
	Degraded int64 `json:"degraded"`
	// Noncurrent counts, of Total, the stripes of noncurrent versions of
	// versioned buckets; every other count includes them.
	Noncurrent int64 `json:"noncurrent,omitempty"`
	// LostShards counts missing shards over the degraded stripes;
	// Waiting the degraded stripes no server can take a rebuilt shard of.
	LostShards int64 `json:"lost_shards"`
	Waiting    int64 `json:"waiting"`
	// Pending counts the degraded stripes whose down servers are still
	// within the repair grace; GraceLeftSeconds is the shortest time
	// until one's shards count as lost and repair starts.
	Pending          int64   `json:"pending"`
	GraceLeftSeconds float64 `json:"grace_left_seconds"`
	// Draining counts the fully redundant stripe groups with shards on
	// draining servers still to move; DrainWaiting those of them no server
	// can take the shards of (waiting for capacity).
	Draining     int64 `json:"draining"`
	DrainWaiting int64 `json:"drain_waiting"`
	// DownSeen lists the down or suspect shard servers (by node ID) that
	// every reporting repair worker has counted in a scan, or never heard
	// of: a server down but not listed has not been looked at yet.
	DownSeen []string `json:"down_seen,omitempty"`
	// upSeen: one worker's servers taken for live, for the sum's DownSeen;
	// unscanned: that worker has not finished a scan yet.
	upSeen    []string
	unscanned bool
}

// RepairStatus is the repair worker's progress over the cluster.
type RepairStatus struct {
	Queued  int64 `json:"queued"`
	Running int64 `json:"running"`
	Done    int64 `json:"done"`
	Failed  int64 `json:"failed"`
	// BytesMoved counts repair traffic between shard servers.
	BytesMoved      int64   `json:"bytes_moved"`
	RateBytesPerSec float64 `json:"rate_bytes_per_sec"`
	// ETASeconds is the predicted time to drain the queue (0 if idle).
	ETASeconds float64 `json:"eta_seconds"`
	// Methods counts stripes repaired by method: CORE, PUSH, PULL.
	Methods map[string]int64 `json:"by_method"`
	// PredictedSeconds and ElapsedSeconds describe the current (or last)
	// repair batch of the cluster, from the first server's start: when
	// the last server's planner predicted it would be done, against when
	// it was (or how long it has run so far).
	PredictedSeconds float64 `json:"predicted_seconds"`
	ElapsedSeconds   float64 `json:"elapsed_seconds"`
	// SyncPending counts the shard servers with a manifest sync asked
	// for (at start, or because a peer came back) and not yet done: 0
	// means every live server has answered the last return.
	// SyncKeys sums the keys the range syncs found different and checked.
	SyncPending int64 `json:"sync_pending"`
	SyncKeys    int64 `json:"sync_keys"`

	spans []batchSpan // the servers' batches, merged by clusterBatch
}

// RepairSource is the optional capability to ask a shard server for its
// part of the repair picture (the stripes it coordinates and its repair
// progress). The status sums it over the live shard servers; until the
// shard API offers it, Status.Stripes and Status.Repair stay absent.
type RepairSource interface {
	RepairStatus(ctx context.Context, addr string) (StripeStatus, RepairStatus, error)
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
			st.Previous += n.Stats.Previous
			st.PreviousShards += n.Stats.PreviousShards
			st.Tombstones += n.Stats.Tombstones
			st.TombstoneJobs += n.Stats.TombstoneJobs
			st.TombstonesCollected += n.Stats.TombstonesCollected
			st.TombstoneChecksBlocked += n.Stats.TombstoneChecksBlocked
		}
	}
	g.repairStatus(ctx, &st, members)
	st.Lifecycle = g.lifecycle.Status()
	st.Events = g.events.recent()
	return st
}

// repairStatus fills st.Stripes and st.Repair from the live shard servers
// when the shard API can report them.
func (g *Gateway) repairStatus(ctx context.Context, st *Status, members []cluster.Member) {
	src, ok := repairSource(g.layer.shards)
	if !ok {
		return
	}
	var mu sync.Mutex
	var eg errgroup.Group
	stripes, repair := StripeStatus{}, RepairStatus{Methods: map[string]int64{}}
	answered := 0
	seen := map[string][]string{} // reporting server -> down servers it counted
	up := map[string][]string{}   // reporting server -> servers it took for live
	unscanned := false            // some worker has not counted anything yet
	for _, m := range members {
		if m.Role != cluster.RoleShard || !m.Alive() {
			continue
		}
		eg.Go(func() error {
			s, r, err := src.RepairStatus(ctx, m.HTTP)
			if err != nil {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			answered++
			stripes.Total += s.Total
			stripes.Noncurrent += s.Noncurrent
			stripes.Healthy += s.Healthy
			stripes.Degraded += s.Degraded
			stripes.LostShards += s.LostShards
			stripes.Waiting += s.Waiting
			stripes.Pending += s.Pending
			stripes.Draining += s.Draining
			stripes.DrainWaiting += s.DrainWaiting
			if s.GraceLeftSeconds > 0 && (stripes.GraceLeftSeconds == 0 || s.GraceLeftSeconds < stripes.GraceLeftSeconds) {
				stripes.GraceLeftSeconds = s.GraceLeftSeconds
			}
			seen[m.ID], up[m.ID] = s.DownSeen, s.upSeen
			unscanned = unscanned || s.unscanned
			repair.Queued += r.Queued
			repair.Running += r.Running
			repair.Done += r.Done
			repair.Failed += r.Failed
			repair.SyncPending += r.SyncPending
			repair.SyncKeys += r.SyncKeys
			repair.BytesMoved += r.BytesMoved
			repair.RateBytesPerSec += r.RateBytesPerSec
			repair.ETASeconds = max(repair.ETASeconds, r.ETASeconds)
			repair.PredictedSeconds = max(repair.PredictedSeconds, r.PredictedSeconds)
			repair.ElapsedSeconds = max(repair.ElapsedSeconds, r.ElapsedSeconds)
			repair.spans = append(repair.spans, r.spans...)
			for k, v := range r.Methods {
				repair.Methods[k] += v
			}
			return nil
		})
	}
	eg.Wait()
	if answered > 0 {
		if !unscanned {
			stripes.DownSeen = seenByAll(seen, up)
		}
		if p, e, ok := clusterBatch(repair.spans); ok {
			repair.PredictedSeconds, repair.ElapsedSeconds = p, e
		}
		st.Stripes, st.Repair = &stripes, &repair
	}
}

// serveAdmin answers the operator API; the caller has authenticated.
// Everything in it needs an administrator's key, but a bucket's code,
// which its owners may set too.
func (g *Gateway) serveAdmin(c *fiber.Ctx, req *request, path string) error {
	if path == "bucket-code" {
		if c.Method() != fiber.MethodPost {
			return apiErr("MethodNotAllowed", "POST /_regen/bucket-code?bucket=NAME&code=CODE")
		}
		ctx, cancel := g.opContext()
		defer cancel()
		return g.setBucketCode(ctx, c, req, c.Query("bucket"), c.Query("code"))
	}
	if !req.who.admin {
		return apiErr("AccessDenied", "the operator API needs an administrator's access key")
	}
	if keyPath, ok := strings.CutPrefix(path, "keys"); ok {
		return g.serveKeys(c, req, keyPath)
	}
	switch path {
	case "drain":
		ctx, cancel := g.opContext()
		defer cancel()
		switch c.Method() {
		case fiber.MethodPost:
			return g.setDraining(ctx, c, c.Query("node"), true)
		case fiber.MethodDelete:
			return g.setDraining(ctx, c, c.Query("node"), false)
		}
		return apiErr("MethodNotAllowed", "POST (start) or DELETE (cancel) /_regen/drain?node=ID")
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

// setBucketCode changes the code new objects of a bucket are written with
// (existing objects keep theirs: every manifest records its code). An
// empty code returns the bucket to the cluster default.
func (g *Gateway) setBucketCode(ctx context.Context, c *fiber.Ctx, req *request, bucket, code string) error {
	if bucket == "" {
		return apiErr("InvalidArgument", "missing bucket")
	}
	if !req.who.admin {
		b, err := g.layer.bucket(ctx, g.buckets, bucket)
		if err != nil {
			return bucketErr(err)
		}
		if !req.who.rights(&b).Owner {
			return apiErr("AccessDenied", "setting a bucket's code needs an administrator's key or the owner right on the bucket")
		}
	}
	if code != "" {
		cc, err := g.layer.code(code)
		if err != nil {
			return apiErr("InvalidArgument", fmt.Sprintf("code %q: %v", code, err))
		}
		// A code wider than the cluster would fail every PUT.
		if live, _ := g.layer.liveShards(); cc.TotalShards() > len(live) {
			return apiErr("InvalidArgument", fmt.Sprintf("code %s needs %d shard servers; %d are live", code, cc.TotalShards(), len(live)))
		}
	}
	var old string
	err := g.layer.updateBucket(ctx, g.buckets, bucket, func(b *metadata.Bucket) error {
		old, b.Code = b.Code, code
		return nil
	})
	if err != nil {
		return bucketErr(err)
	}
	g.log.Info("bucket code changed", "bucket", bucket, "from", old, "to", code)
	c.Set("Content-Type", "application/json")
	body, err := json.Marshal(map[string]string{"bucket": bucket, "code": code, "previous": old})
	if err != nil {
		return err
	}
	return c.Send(body)
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
