package repair

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/regen-s3/regen/codec"
)

// cluster12 returns 12 live nodes n00..n11 with default rates.
func cluster12() map[string]NodeInfo { return clusterN(12) }

// clusterN returns n live nodes n00.. with default rates.
func clusterN(n int) map[string]NodeInfo {
	nodes := map[string]NodeInfo{}
	for i := range n {
		id := fmt.Sprintf("n%02d", i)
		nodes[id] = NodeInfo{ID: id, Addr: id + ":1", Live: true}
	}
	return nodes
}

func group(t testing.TB, code string) Group {
	c, err := codec.Parse(code)
	if err != nil {
		t.Fatal(err)
	}
	return groupOf(c)
}

// groupOf is a group of code c placed on n00, n01...
func groupOf(c codec.Code) Group {
	n := c.TotalShards()
	pl := make([]string, n)
	for i := range pl {
		pl[i] = fmt.Sprintf("n%02d", i)
	}
	return Group{Key: "b/k", FileID: "f1", Code: c, ChunkSize: 1 << 20, PartSize: 64 << 20, ShardCRC: make([]uint32, n), Placement: pl}
}

func TestPlan(t *testing.T) {
	type want struct {
		methods  []Method // the chosen method is one of these
		dest     map[int]string
		notDest  []string
		waiting  []int
		excluded []string
		err      error
		noHelper []int
		// unavailable, when set, is the task's Unavailable exactly.
		unavailable []int
	}
	tests := []struct {
		name  string
		code  string
		lost  []int
		force string
		allow []Method
		pin   map[int]string // PlanInput.Dest
		edit  func(map[string]NodeInfo)
		want  want
	}{
		{
			name: "rs single loss on 1 Gb/s: a chain beats k-to-1 incast",
			code: "rs-6-3", lost: []int{2},
			edit: func(n map[string]NodeInfo) { setRates(n, Rates{Net: 125e6}) },
			want: want{methods: []Method{PushRep, PushSur}},
		},
		{
			name: "rs two losses go to two different servers",
			code: "rs-6-3", lost: []int{0, 5},
			edit: func(n map[string]NodeInfo) { dead(n, "n00", "n05"); setRates(n, Rates{Net: 125e6}) },
			want: want{methods: []Method{PushSur, PushRep}, notDest: []string{"n00", "n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08"}},
		},
		{
			name: "rs single loss on 10 Gb/s with disks: small shards pull",
			code: "rs-6-3", lost: []int{2},
			want: want{methods: []Method{PullRep, PullSur}},
		},
		{
			name: "forced pull",
			code: "rs-6-3", lost: []int{1}, force: "pull",
			want: want{methods: []Method{PullRep, PullSur}},
		},
		{
			name: "executor that only pulls",
			code: "clay-6-3", lost: []int{1}, allow: []Method{PullRep},
			want: want{methods: []Method{PullRep}},
		},
		{
			name: "forced core on clay",
			code: "clay-6-3", lost: []int{4}, force: "core",
			want: want{methods: []Method{Core}},
		},
		{
			name: "forced core on rs falls back to push",
			code: "rs-6-3", lost: []int{4}, force: "core",
			want: want{methods: []Method{PushRep, PushSur}},
		},
		{
			name: "slow network: clay repairs with fewest bytes",
			code: "clay-6-3", lost: []int{3},
			edit: func(n map[string]NodeInfo) { setRates(n, Rates{Net: 10e6, DiskRead: 1e9, DiskWrite: 1e9}) },
			// One lost shard: PUSH's floor is one block into the
			// destination, CORE's (n-1)/(n-k)=2.67 blocks; both beat PULL.
			want: want{methods: []Method{PushRep, PushSur}},
		},
		{
			name: "clay, two losses, slow helpers, fast new servers: CORE",
			code: "clay-6-3", lost: []int{0, 1},
			edit: func(n map[string]NodeInfo) {
				dead(n, "n00", "n01")
				setRates(n, Rates{Net: 50e6, DiskRead: 1e9, DiskWrite: 1e9})
				for _, id := range []string{"n09", "n10", "n11"} {
					ni := n[id]
					ni.Rates.Net = 1e9
					n[id] = ni
				}
			},
			want: want{methods: []Method{Core}},
		},
		{
			name: "replacement server gets the dead node's shard",
			code: "rs-6-3", lost: []int{3},
			edit: func(n map[string]NodeInfo) {
				dead(n, "n03")
				n["n11"] = NodeInfo{ID: "n11", Addr: "n11:1", Live: true, Replaces: "n03"}
			},
			want: want{dest: map[int]string{3: "n11"}},
		},
		{
			name: "loaded servers are avoided",
			code: "rs-6-3", lost: []int{3},
			edit: func(n map[string]NodeInfo) {
				dead(n, "n03")
				for _, id := range []string{"n09", "n10"} {
					ni := n[id]
					ni.Load = 3
					n[id] = ni
				}
			},
			want: want{dest: map[int]string{3: "n11"}},
		},
		{
			name: "no spare server: waiting for capacity",
			code: "rs-6-3", lost: []int{3},
			edit: func(n map[string]NodeInfo) { dead(n, "n03", "n09", "n10", "n11") },
			want: want{err: ErrNoCapacity, waiting: []int{3}},
		},
		{
			name: "one spare for two losses: the other waits",
			code: "rs-6-3", lost: []int{3, 7},
			edit: func(n map[string]NodeInfo) { dead(n, "n03", "n07", "n09", "n10") },
			want: want{dest: map[int]string{3: "n11"}, waiting: []int{7}},
		},
		{
			name: "one spare for two losses, clay: CORE plans for both",
			code: "clay-6-3", lost: []int{3, 7},
			edit:  func(n map[string]NodeInfo) { dead(n, "n03", "n07", "n09", "n10") },
			force: "core",
			want:  want{dest: map[int]string{3: "n11"}, waiting: []int{7}, methods: []Method{Core}},
		},
		{
			name: "a later part: only the shard the first part placed is rebuilt, though a server is free",
			code: "clay-6-3", lost: []int{3, 7}, pin: map[int]string{3: "n11"},
			edit: func(n map[string]NodeInfo) { dead(n, "n03", "n07", "n09") },
			want: want{dest: map[int]string{3: "n11"}, waiting: []int{7}},
		},
		{
			name: "straggler left out of the chain",
			code: "rs-6-3", lost: []int{8},
			edit: func(n map[string]NodeInfo) {
				ni := n["n01"]
				ni.Rates = Rates{Net: 1e6, DiskRead: 1e6}
				n["n01"] = ni
			},
			want: want{excluded: []string{"n01"}, noHelper: []int{1}},
		},
		{
			name: "suspect survivor is not a helper",
			code: "rs-6-3", lost: []int{8},
			edit: func(n map[string]NodeInfo) {
				ni := n["n02"]
				ni.Suspect = true
				n["n02"] = ni
			},
			want: want{noHelper: []int{2}, unavailable: []int{2}},
		},
		{
			name: "a dead server the caller did not list: unavailable, and CORE plans for it",
			code: "clay-6-3", lost: []int{1}, force: "core",
			edit: func(n map[string]NodeInfo) { dead(n, "n05") },
			want: want{methods: []Method{Core}, noHelper: []int{5}, unavailable: []int{5}},
		},
		{
			name: "too many losses",
			code: "rs-6-3", lost: []int{0, 1, 2, 3},
			edit: func(n map[string]NodeInfo) { dead(n, "n00", "n01", "n02", "n03") },
			want: want{err: errors.New("survive")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := cluster12()
			if tc.edit != nil {
				tc.edit(nodes)
			}
			d, err := Plan(PlanInput{Group: group(t, tc.code), Lost: tc.lost, Nodes: nodes, Model: DefaultCostModel(), Force: tc.force, Allowed: tc.allow, Dest: tc.pin})
			if tc.want.err != nil {
				if err == nil {
					t.Fatalf("want error %v, got plan %+v", tc.want.err, d)
				}
				if errors.Is(tc.want.err, ErrNoCapacity) && !errors.Is(err, ErrNoCapacity) {
					t.Fatalf("want ErrNoCapacity, got %v", err)
				}
				if !slices.Equal(d.Waiting, tc.want.waiting) {
					t.Fatalf("waiting %v, want %v", d.Waiting, tc.want.waiting)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Task.Validate(); err != nil {
				t.Fatal(err)
			}
			if tc.want.methods != nil && !slices.Contains(tc.want.methods, d.Task.Method) {
				t.Errorf("method %s, want one of %v (costs %v)", d.Task.Method, tc.want.methods, d.Costs)
			}
			for i, id := range tc.want.dest {
				if d.Task.Dest[i].ID != id {
					t.Errorf("dest[%d] = %s, want %s", i, d.Task.Dest[i].ID, id)
				}
			}
			for _, dst := range d.Task.Dest {
				if slices.Contains(tc.want.notDest, dst.ID) {
					t.Errorf("dest %s holds a shard of the group", dst.ID)
				}
			}
			if !slices.Equal(d.Waiting, tc.want.waiting) {
				t.Errorf("waiting %v, want %v", d.Waiting, tc.want.waiting)
			}
			// A waiting shard is lost too: the task must say so, and never
			// ask it (or any other unavailable shard) for data.
			for _, w := range tc.want.waiting {
				if !slices.Contains(d.Task.Unavailable, w) {
					t.Errorf("waiting shard %d not in the task's unavailable %v", w, d.Task.Unavailable)
				}
			}
			for _, h := range d.Task.Helpers {
				if slices.Contains(d.Task.Unavailable, h) {
					t.Errorf("unavailable shard %d is a helper: %v", h, d.Task.Helpers)
				}
			}
			if tc.want.unavailable != nil && !slices.Equal(d.Task.Unavailable, tc.want.unavailable) {
				t.Errorf("task unavailable %v, want %v", d.Task.Unavailable, tc.want.unavailable)
			}
			if !slices.Equal(d.Excluded, tc.want.excluded) {
				t.Errorf("excluded %v, want %v", d.Excluded, tc.want.excluded)
			}
			for _, h := range tc.want.noHelper {
				if slices.Contains(d.Task.Helpers, h) {
					t.Errorf("helper %d chosen: %v", h, d.Task.Helpers)
				}
			}
			if d.Predicted <= 0 || d.Costs[d.Task.Method] != d.Predicted {
				t.Errorf("predicted %v, costs %v", d.Predicted, d.Costs)
			}
			for m, c := range d.Costs {
				if c < d.Predicted {
					t.Errorf("%s predicted %v < chosen %v", m, c, d.Predicted)
				}
			}
		})
	}
}

// The cost model reproduces the worked table of repair-anchors §5.2:
// (9,6), b = 64 MB, 1 Gb/s, 200 MB/s disks.
func TestCostModelWorkedTable(t *testing.T) {
	cm := CostModel{Default: Rates{Net: 125e6, DiskRead: 200e6, DiskWrite: 200e6}, SRU: 64 << 10}
	r := []Rates{cm.Default}
	tests := []struct {
		m    Method
		t    int
		want float64
	}{
		{PullRep, 1, 3.07},
		{PushSur, 1, 0.52},
		{PushSur, 2, 0.88},
		{PushSur, 3, 1.54},
	}
	for _, tc := range tests {
		s := shape{n: 9, k: 6, t: tc.t, b: 64e6}
		got := cm.predict(tc.m, s, r, r).Seconds
		if got < tc.want*0.95 || got > tc.want*1.05 {
			t.Errorf("%s t=%d: %.2fs, want about %.2fs", tc.m, tc.t, got, tc.want)
		}
	}
}

func dead(n map[string]NodeInfo, ids ...string) {
	for _, id := range ids {
		ni := n[id]
		ni.Live = false
		n[id] = ni
	}
}

func setRates(n map[string]NodeInfo, r Rates) {
	for id, ni := range n {
		ni.Rates = r
		n[id] = ni
	}
}

// A drain moves a shard by copying it from its (live, draining) holder to
// a server outside the group, never to another draining server, and
// moves one shard's bytes, not the k a rebuild reads.
func TestPlanMove(t *testing.T) {
	for _, code := range []string{"rs-6-3", "clay-6-3"} {
		t.Run(code, func(t *testing.T) {
			nodes := cluster12()
			drain := func(ids ...string) {
				for _, id := range ids {
					ni := nodes[id]
					ni.Draining = true
					nodes[id] = ni
				}
			}
			drain("n03", "n09") // n09 holds nothing of the group: no destination either
			g := group(t, code)
			in := PlanInput{Group: g, Lost: []int{3}, Nodes: nodes, Model: DefaultCostModel()}
			d, err := PlanMove(in)
			if err != nil {
				t.Fatal(err)
			}
			task := d.Task
			if task.Method != Copy || !slices.Equal(task.Lost, []int{3}) || len(task.Helpers) != 0 {
				t.Fatalf("want a copy of shard 3, got %s of %v helpers %v", task.Method, task.Lost, task.Helpers)
			}
			dst := task.Dest[3].ID
			if slices.Contains(g.Placement, dst) || dst == "n09" {
				t.Fatalf("destination %s is in the group or draining", dst)
			}
			if task.Placement[3].ID != "n03" || task.Placement[3].Addr == "" {
				t.Fatalf("the copy's source must stay the draining holder, got %+v", task.Placement[3])
			}
			b := float64(in.shape(1).b)
			if d.Bytes != b {
				t.Fatalf("a move predicts %.0f bytes, want one shard file, %.0f", d.Bytes, b)
			}
			// The same shard rebuilt moves k times as many.
			rebuilt, err := Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			if rebuilt.Task.Dest[3].ID == "n09" || rebuilt.Bytes <= d.Bytes {
				t.Fatalf("rebuild fallback: dest %s, %.0f bytes vs the copy's %.0f", rebuilt.Task.Dest[3].ID, rebuilt.Bytes, d.Bytes)
			}
		})
	}
}

// With every other live server already holding a shard of the group, a
// move waits for capacity instead of dropping or doubling up a shard.
func TestPlanMoveWaitsForCapacity(t *testing.T) {
	nodes := cluster12()
	for _, id := range []string{"n09", "n10", "n11"} {
		dead(nodes, id)
	}
	ni := nodes["n04"]
	ni.Draining = true
	nodes["n04"] = ni
	d, err := PlanMove(PlanInput{Group: group(t, "rs-6-3"), Lost: []int{4}, Nodes: nodes, Model: DefaultCostModel()})
	if !errors.Is(err, ErrNoCapacity) || !slices.Equal(d.Waiting, []int{4}) {
		t.Fatalf("want ErrNoCapacity with shard 4 waiting, got %v, waiting %v", err, d.Waiting)
	}
	// A holder that died is no move: its shard is lost, for Plan.
	dead(nodes, "n04")
	if _, err := PlanMove(PlanInput{Group: group(t, "rs-6-3"), Lost: []int{4}, Nodes: nodes, Model: DefaultCostModel()}); err == nil || errors.Is(err, ErrNoCapacity) {
		t.Fatalf("a dead holder cannot be copied from, got %v", err)
	}
}

// Rebuilt shards never go to a draining server either.
func TestPlanAvoidsDraining(t *testing.T) {
	nodes := cluster12()
	dead(nodes, "n02")
	for _, id := range []string{"n09", "n10"} {
		ni := nodes[id]
		ni.Draining = true
		nodes[id] = ni
	}
	d, err := Plan(PlanInput{Group: group(t, "rs-6-3"), Lost: []int{2}, Nodes: nodes, Model: DefaultCostModel()})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Task.Dest[2].ID; got != "n11" {
		t.Fatalf("rebuilt shard goes to %s, want n11, the only live non-draining server outside the group", got)
	}
}
