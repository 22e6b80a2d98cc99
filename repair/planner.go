package repair

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/placement"
	"github.com/regen-s3/regen/metadata"
)

// Auto lets the planner choose the method (the default of --repair).
const Auto = "auto"

// ErrNoCapacity is returned (wrapped) when no live server may receive a
// rebuilt shard: the group stays degraded until one joins.
var ErrNoCapacity = errors.New("repair: no server can take the rebuilt shard")

// Group is one stripe group as the planner sees it.
type Group struct {
	// Key is the object's placement key (bucket/key): destinations are
	// taken in its rendezvous order, like the placement of new objects.
	Key       string
	FileID    string
	Code      codec.Code
	ChunkSize int64
	PartSize  int64
	ShardCRC  []uint32
	// Placement is the node ID of each shard index.
	Placement []string
}

// NodeInfo is what the planner knows about one shard server.
type NodeInfo struct {
	ID   string
	Addr string
	// Live: alive (or suspect) in gossip. Only live nodes help or receive.
	Live bool
	// Suspect nodes are live but never chosen when others will do.
	Suspect bool
	// Replaces names the dead node this (new) server was started to
	// replace; it receives that node's shards first.
	Replaces string
	Zone     string
	// Draining servers still serve and help, but receive no shards; the
	// shards they hold are moved (PlanMove).
	Draining bool
	Rates    Rates // zero fields: CostModel.Default
	Load     Load  // repair transfers already running on it
	// Machine: nodes with the same one share a host's CPU and disk
	// (cluster.Meta.Machine); empty: the address's host stands for it.
	Machine string
}

// PlanInput is everything one planning decision depends on. The planner
// reads no clock, does no I/O and keeps no state: the same input always
// gives the same plan.
type PlanInput struct {
	Group Group
	// Lost are the shard indexes to rebuild.
	Lost []int
	// Nodes are the known shard servers by ID.
	Nodes map[string]NodeInfo
	Model CostModel
	// Force is a method family to use ("core", "push", "pull") or "" /
	// Auto to choose by predicted time.
	Force string
	// Allowed limits the methods to those the executor can run; empty
	// means all.
	Allowed []Method
	// Dest pins destinations (the other parts of a multipart object must
	// land where the first went; an in-place rebuild names the holder).
	// When set, lost shards it does not pin wait, and are not rebuilt.
	Dest map[int]string
}

// Decision is a plan with the reasons for it.
type Decision struct {
	Task Task `json:"task"`
	// Predicted is the model's time for Task.Method, seconds; Costs the
	// prediction of every method considered.
	Predicted float64            `json:"predicted"`
	Costs     map[Method]float64 `json:"costs"`
	// Bytes is the predicted network traffic of the chosen method.
	Bytes float64 `json:"bytes"`
	// Cost is the chosen method's full prediction (CPU, disk), which the
	// worker sums over a batch of jobs sharing hosts.
	Cost Cost `json:"cost"`
	// Waiting lists the lost shards left out of Task because no server
	// can take them now (waiting for capacity).
	Waiting []int `json:"waiting,omitempty"`
	// Excluded lists helper candidates left out as stragglers.
	Excluded []string `json:"excluded,omitempty"`
}

// Plan chooses how to rebuild in.Lost of in.Group. It returns an error
// wrapping ErrNoCapacity when none of the lost shards has a destination,
// and a plain error when fewer than k shards survive.
func Plan(in PlanInput) (Decision, error) {
	g := in.Group
	n, k := g.Code.TotalShards(), g.Code.DataShards()
	if len(g.Placement) != n || len(g.ShardCRC) != n {
		return Decision{}, fmt.Errorf("repair: plan %s: %d nodes, %d CRCs for %d shards", g.FileID, len(g.Placement), len(g.ShardCRC), n)
	}
	lost := slices.Sorted(slices.Values(slices.Compact(slices.Sorted(slices.Values(in.Lost)))))
	if len(lost) == 0 {
		return Decision{}, fmt.Errorf("repair: plan %s: nothing lost", g.FileID)
	}
	survivors := survivorsOf(g.Placement, lost, in.Nodes)
	erased := nonSurvivors(n, survivors) // lost, waiting, or on a dead or suspect server
	if len(survivors) < k {
		return Decision{}, fmt.Errorf("repair: plan %s: %d shards survive, %s needs %d", g.FileID, len(survivors), g.Code.Name(), k)
	}
	dest, waiting := destinations(in, lost)
	if len(dest) == 0 {
		return Decision{Waiting: lost}, fmt.Errorf("%w: %s: %d lost shards", ErrNoCapacity, g.FileID, len(lost))
	}
	todo := slices.Sorted(maps.Keys(dest))

	rates := in.rates
	chosen, excluded := fastest(survivors, k, in.Model.Straggler, rates, g.Placement)
	s := in.shape(len(todo))
	if rg, ok := g.Code.(codec.Regenerating); ok && g.Code.SubChunks() > 1 {
		// Only regenerating codes (sub-packetised) can save bandwidth; an
		// RS "plan" is conventional decoding.
		// NB: CORE plans for every shard that is not a survivor, waiting
		// ones too (see Task.Unavailable): that is the bandwidth it takes.
		if p, err := rg.RepairPlan(erased); err == nil && p.Method != codec.MethodConventional {
			s.gamma = p.Ratio() * float64(k)
		}
	}
	var destRates []Rates
	for _, i := range todo {
		destRates = append(destRates, rates(dest[i]))
	}
	var helperRates, allRates []Rates
	for _, i := range chosen {
		helperRates = append(helperRates, rates(g.Placement[i]))
	}
	for _, i := range survivors {
		allRates = append(allRates, rates(g.Placement[i]))
	}

	d := Decision{Costs: map[Method]float64{}, Waiting: waiting, Excluded: excluded}
	best, bestT := Method(""), math.Inf(1)
	for _, m := range candidates(in.Force, s, in.Allowed) {
		hr := helperRates
		if m == Core {
			hr = allRates // CORE asks every survivor
		}
		c := in.Model.predict(m, s, destRates, hr)
		d.Costs[m] = c.Seconds
		// Ties (within 1%: the model is not that precise) go to the
		// method moving fewer bytes, which leaves more of the network to
		// the other repairs and to clients.
		if c.Seconds < bestT*0.99 || (c.Seconds <= bestT*1.01 && c.Bytes < d.Cost.Bytes) {
			best, bestT, d.Cost = m, c.Seconds, c
		}
	}
	if best == "" {
		return Decision{}, fmt.Errorf("repair: plan %s: no allowed method (force %q, allowed %v)", g.FileID, in.Force, in.Allowed)
	}
	d.Predicted, d.Bytes = bestT, d.Cost.Bytes

	helpers := chosen
	if best == Core {
		helpers = survivors
	}
	var err error
	if d.Task, err = in.task(best, todo, dest, helpers); err != nil {
		return Decision{}, err
	}
	// Every shard neither rebuilt nor a survivor is unavailable: the
	// waiting ones, and any on a dead or suspect server the caller did not
	// list as lost (a drain's fallback rebuild passes only the drained).
	for _, i := range erased {
		if !slices.Contains(todo, i) {
			d.Task.Unavailable = append(d.Task.Unavailable, i)
		}
	}
	return d, nil
}

// PlanMove plans moving in.Lost off their servers, which are live but
// draining: each shard is copied unchanged from its holder to a server
// holding no shard of the group (Method Copy), so a move costs the
// network one shard's bytes, not the k a reconstruction reads. The holder
// keeps its copy until the manifest switch, so the group never has fewer
// shards than before. Like Plan, it returns an error wrapping
// ErrNoCapacity when no server may take any of the shards, and lists in
// Decision.Waiting those left without one.
func PlanMove(in PlanInput) (Decision, error) {
	g := in.Group
	n := g.Code.TotalShards()
	if len(g.Placement) != n || len(g.ShardCRC) != n {
		return Decision{}, fmt.Errorf("repair: plan move %s: %d nodes, %d CRCs for %d shards", g.FileID, len(g.Placement), len(g.ShardCRC), n)
	}
	moves := slices.Compact(slices.Sorted(slices.Values(in.Lost)))
	if len(moves) == 0 {
		return Decision{}, fmt.Errorf("repair: plan move %s: nothing to move", g.FileID)
	}
	for _, i := range moves {
		if i < 0 || i >= n {
			return Decision{}, fmt.Errorf("repair: plan move %s: shard %d out of range", g.FileID, i)
		}
		if ni := in.Nodes[g.Placement[i]]; !ni.Live || ni.Addr == "" {
			return Decision{}, fmt.Errorf("repair: plan move %s: shard %d has no live holder to copy from", g.FileID, i)
		}
	}
	dest, waiting := destinations(in, moves)
	if len(dest) == 0 {
		return Decision{Waiting: moves}, fmt.Errorf("%w: %s: %d shards to move", ErrNoCapacity, g.FileID, len(moves))
	}
	todo := slices.Sorted(maps.Keys(dest))
	var destRates, srcRates []Rates
	for _, i := range todo {
		destRates = append(destRates, in.rates(dest[i]))
		srcRates = append(srcRates, in.rates(g.Placement[i]))
	}
	d := Decision{Waiting: waiting, Costs: map[Method]float64{}}
	d.Cost = in.Model.predict(Copy, in.shape(len(todo)), destRates, srcRates)
	d.Predicted, d.Bytes, d.Costs[Copy] = d.Cost.Seconds, d.Cost.Bytes, d.Cost.Seconds
	var err error
	if d.Task, err = in.task(Copy, todo, dest, nil); err != nil {
		return Decision{}, err
	}
	return d, nil
}

// rates returns node id's rates, unmeasured ones from the model's
// defaults, shared with the repairs already running on it.
func (in PlanInput) rates(id string) Rates {
	ni := in.Nodes[id]
	r := ni.Rates
	if r.Net == 0 {
		r.Net = in.Model.Default.Net
	}
	if r.DiskRead == 0 {
		r.DiskRead = in.Model.Default.DiskRead
	}
	if r.DiskWrite == 0 {
		r.DiskWrite = in.Model.Default.DiskWrite
	}
	if r.Latency == 0 {
		r.Latency = in.Model.Default.Latency
	}
	return eff(r, ni.Load)
}

// shape is the group's geometry for t rebuilt (or moved) shards.
func (in PlanInput) shape(t int) shape {
	g := in.Group
	k := g.Code.DataShards()
	return shape{n: g.Code.TotalShards(), k: k, t: t, b: float64(metadata.StripeGeometry{
		K: k, ChunkSize: g.ChunkSize, Multiple: int64(g.Code.ShardMultiple()),
	}.ShardFileSize(g.PartSize))}
}

// task builds and validates the Task rebuilding (or moving) todo onto dest.
func (in PlanInput) task(m Method, todo []int, dest map[int]string, helpers []int) (Task, error) {
	g := in.Group
	t := Task{
		Code: g.Code.Name(), FileID: g.FileID, ChunkSize: g.ChunkSize, PartSize: g.PartSize,
		ShardCRC: slices.Clone(g.ShardCRC), Lost: todo, Method: m, Helpers: slices.Clone(helpers),
		Dest: map[int]Node{}, SRU: in.Model.SRU,
	}
	for _, id := range g.Placement {
		t.Placement = append(t.Placement, Node{ID: id, Addr: in.Nodes[id].Addr})
	}
	for _, i := range todo {
		t.Dest[i] = Node{ID: dest[i], Addr: in.Nodes[dest[i]].Addr}
	}
	return t, t.Validate()
}

// nonSurvivors is every shard index of n not in survivors, ascending.
func nonSurvivors(n int, survivors []int) []int {
	var out []int
	for i := range n {
		if !slices.Contains(survivors, i) {
			out = append(out, i)
		}
	}
	return out
}

// survivorsOf returns the shard indexes not lost whose node is live and
// not suspect (a suspect node would stall a chain), in index order.
func survivorsOf(pl []string, lost []int, nodes map[string]NodeInfo) []int {
	var out []int
	for i, id := range pl {
		ni := nodes[id]
		if !slices.Contains(lost, i) && ni.Live && !ni.Suspect && ni.Addr != "" {
			out = append(out, i)
		}
	}
	return out
}

// fastest picks k helpers among survivors: stragglers (below frac of the
// median network rate) are dropped while at least k others remain, then
// the fastest k are taken. Ties go to data shards (lower index), which
// decode cheapest. The result is in chain order: slowest first, so the
// fast hops near the destination absorb jitter.
func fastest(survivors []int, k int, frac float64, rates func(string) Rates, pl []string) (chosen []int, excluded []string) {
	type cand struct {
		idx int
		bw  float64
	}
	cs := make([]cand, len(survivors))
	bws := make([]float64, len(survivors))
	for j, i := range survivors {
		r := rates(pl[i])
		cs[j] = cand{i, math.Min(r.Net, r.DiskRead)}
		bws[j] = cs[j].bw
	}
	sort.Float64s(bws)
	median := bws[len(bws)/2]
	var keep []cand
	for _, c := range cs {
		if frac > 0 && c.bw < frac*median && len(cs)-len(excluded) > k {
			excluded = append(excluded, pl[c.idx])
			continue
		}
		keep = append(keep, c)
	}
	slices.SortStableFunc(keep, func(a, b cand) int {
		if c := cmp.Compare(b.bw, a.bw); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	keep = keep[:k]
	slices.SortStableFunc(keep, func(a, b cand) int {
		if c := cmp.Compare(a.bw, b.bw); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	for _, c := range keep {
		chosen = append(chosen, c.idx)
	}
	return chosen, excluded
}

// destinations assigns a server to each lost shard: pinned ones first,
// then a server started to replace the lost shard's node, then the least
// loaded live servers holding no shard of the group, in the key's
// rendezvous order (spreading rebuilt shards like new objects). Draining
// servers are never chosen (only pinned: an in-place rebuild). Once any
// shard is pinned, only pinned ones get a server: the later parts of an
// object rebuild exactly the shards its first part could place. Lost
// shards without a server are returned as waiting.
func destinations(in PlanInput, lost []int) (map[int]string, []int) {
	g := in.Group
	taken := map[string]bool{}
	for i, id := range g.Placement {
		if !slices.Contains(lost, i) {
			taken[id] = true
		}
	}
	dest := map[int]string{}
	var waiting []int
	for _, i := range lost {
		if id, ok := in.Dest[i]; ok && in.Nodes[id].Live && !taken[id] {
			dest[i] = id
			taken[id] = true
		}
	}
	if len(in.Dest) > 0 {
		var rest []int
		for _, i := range lost {
			if _, ok := in.Dest[i]; ok {
				rest = append(rest, i)
			} else {
				waiting = append(waiting, i)
			}
		}
		lost = rest
	}
	for _, i := range lost {
		if _, ok := dest[i]; ok {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(in.Nodes)) {
			ni := in.Nodes[id]
			if ni.Live && !ni.Suspect && !ni.Draining && ni.Replaces != "" && ni.Replaces == g.Placement[i] && !taken[id] {
				dest[i] = id
				taken[id] = true
				break
			}
		}
	}
	var pool []string
	for id, ni := range in.Nodes {
		if ni.Live && !ni.Suspect && !ni.Draining && ni.Addr != "" && !taken[id] && !slices.Contains(g.Placement, id) {
			pool = append(pool, id)
		}
	}
	order := placement.Order(g.Key, pool)
	rank := map[string]int{}
	for r, id := range order {
		rank[id] = r
	}
	slices.SortStableFunc(order, func(a, b string) int {
		if c := cmp.Compare(in.Nodes[a].Load, in.Nodes[b].Load); c != 0 {
			return c
		}
		return cmp.Compare(rank[a], rank[b])
	})
	for _, i := range lost {
		if _, ok := dest[i]; ok {
			continue
		}
		if len(order) == 0 {
			waiting = append(waiting, i)
			continue
		}
		dest[i], order = order[0], order[1:]
	}
	slices.Sort(waiting)
	return dest, waiting
}

// candidates lists the methods to compare.
func candidates(force string, s shape, allowed []Method) []Method {
	var ms []Method
	switch force {
	case "core":
		ms = []Method{Core}
		if s.gamma <= 0 {
			ms = []Method{PushSur, PushRep} // not an MSR stripe: nearest alternative
		}
	case "push":
		ms = []Method{PushRep, PushSur}
	case "pull":
		ms = []Method{PullRep, PullSur}
	default:
		ms = []Method{PullRep, PullSur, PushRep, PushSur}
		if s.gamma > 0 {
			ms = append(ms, Core)
		}
	}
	if len(allowed) == 0 {
		return ms
	}
	var out []Method
	for _, m := range ms {
		if slices.Contains(allowed, m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		// The executor cannot run the forced family: fall back to what it
		// can, rather than leave the stripe degraded.
		for _, m := range Methods {
			if slices.Contains(allowed, m) && (m != Core || s.gamma > 0) {
				out = append(out, m)
			}
		}
	}
	return out
}
