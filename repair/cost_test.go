package repair

import (
	"math"
	"testing"
	"time"
)

// A small, CPU-bound machine like the dev cluster's: 2 cores shared by
// every server, a data path of 100 MB/s per core.
func smallMachine() CostModel {
	cm := DefaultCostModel()
	cm.Decode, cm.MSRDecode, cm.Move, cm.Cores = 6e9, 420e6, 100e6, 2
	cm.Fsync, cm.Setup = 600*time.Microsecond, 40*time.Millisecond
	cm.Default.DiskWrite = 300e6
	return cm
}

// The planner's choice follows the model on either kind of machine.
func TestPlanChoosesByModel(t *testing.T) {
	slowNet := func(n map[string]NodeInfo) { setRates(n, Rates{Net: 125e6, DiskRead: 1e9, DiskWrite: 1e9}) }
	tests := []struct {
		name  string
		model CostModel
		code  string
		size  int64
		lost  []int
		edit  func(map[string]NodeInfo)
		want  Method
	}{
		{name: "cpu-bound clay: CORE moves and handles fewer bytes", model: smallMachine(), code: "clay-6-3", size: 40 << 20, lost: []int{8}, want: Core},
		{name: "cpu-bound clay, two losses: still CORE", model: smallMachine(), code: "clay-6-3", size: 40 << 20, lost: []int{0, 5}, want: Core},
		{name: "cpu-bound rs: PULL (a chain handles the same bytes plus hops)", model: smallMachine(), code: "rs-6-3", size: 40 << 20, lost: []int{8}, want: PullRep},
		{name: "large rs on 1 Gb/s: the destination's ingress dominates, PUSH", model: DefaultCostModel(), code: "rs-6-3", size: 256 << 20, lost: []int{8}, edit: slowNet, want: PushRep},
		{name: "small rs on 1 Gb/s: setup dominates, PULL", model: DefaultCostModel(), code: "rs-6-3", size: 256 << 10, lost: []int{8}, edit: slowNet, want: PullRep},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := group(t, tc.code)
			g.PartSize = tc.size
			nodes := cluster12()
			for _, i := range tc.lost {
				dead(nodes, g.Placement[i])
			}
			if tc.edit != nil {
				tc.edit(nodes)
			}
			d, err := Plan(PlanInput{Group: g, Lost: tc.lost, Nodes: nodes, Model: tc.model})
			if err != nil {
				t.Fatal(err)
			}
			// PUSH-Rep and PUSH-Sur are the same chain for one loss.
			got := d.Task.Method
			if got == PushSur && tc.want == PushRep && len(tc.lost) == 1 {
				got = PushRep
			}
			if got == PullSur && tc.want == PullRep && len(tc.lost) == 1 {
				got = PullRep
			}
			if got != tc.want {
				t.Errorf("chose %s, want %s (costs %v)", d.Task.Method, tc.want, d.Costs)
			}
			if d.Cost.CPU <= 0 || d.Cost.Written <= 0 || d.Cost.Bytes != d.Bytes {
				t.Errorf("cost %+v", d.Cost)
			}
		})
	}
}

func TestBatch(t *testing.T) {
	cm := smallMachine()
	job := Cost{Seconds: 1, CPU: 0.5, Written: 3e6, Fsyncs: 10}
	many := func(n int) []Cost {
		out := make([]Cost, n)
		for i := range out {
			out[i] = job
		}
		return out
	}
	tests := []struct {
		name    string
		jobs    []Cost
		workers int
		share   float64
		peers   []float64
		want    float64
	}{
		{name: "nothing", want: 0},
		{name: "one job is as long as itself", jobs: many(1), workers: 4, share: 1, want: 1},
		{name: "pool: 8 jobs on 4 workers, cores to spare", jobs: many(8), workers: 4, share: 1, want: 2},
		{name: "shared cores: 10 servers on 2 cores", jobs: many(8), workers: 4, share: 0.1, want: 8 * 0.5 / (2 * 0.1)},
		{name: "bad share is 1", jobs: many(8), workers: 4, share: 0, want: 2},
		// One job of a server sharing 2 cores with 9 others gets 0.2
		// cores: its 0.5 core-seconds take 2.5 s, longer than its 1 s idle.
		{name: "a lone job is slowed by the crowd", jobs: many(1), workers: 4, share: 0.1, want: 0.5 / (2 * 0.1)},
		// 8 jobs (4 core-seconds) beside peers with 1, 1 and 9: the host
		// does 4 + 1 + 1 + 4 before this batch ends, on 2 cores.
		{name: "peers known: processor sharing", jobs: many(8), workers: 4, share: 0.25, peers: []float64{1, 1, 9}, want: 10.0 / 2},
		{name: "peers known, all idle: the whole host", jobs: many(8), workers: 4, share: 0.25, peers: []float64{0, 0, 0}, want: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := cm.Batch(tc.jobs, tc.workers, tc.share, tc.peers)
			if math.Abs(got-tc.want) > 1e-6*math.Max(1, tc.want) {
				t.Errorf("Batch = %v, want %v", got, tc.want)
			}
		})
	}
}

// Learning a node's rate moves at most a factor learnStep per sample and
// never below the floor, however wild the sample.
func TestLearnIsBounded(t *testing.T) {
	w := &Worker{rates: map[string]Rates{}, cal: &calibrator{cm: DefaultCostModel()}}
	for range 3 {
		w.learn(Result{Seconds: 1, NodeIn: map[string]int64{"a": 1 << 30, "b": 2 << 20}}, nil)
	}
	def := DefaultCostModel().Default.Net
	if r := w.rates["b"].Net; r < def*math.Pow(1-learnWeight+learnWeight/learnStep, 3)*0.999 || r > def {
		t.Errorf("slow samples: rate %.3g from %.3g", r, def)
	}
	if r := w.rates["a"].Net; r > def {
		t.Errorf("rate went up to %.3g on a sample below it", r)
	}
	w.learn(Result{Seconds: 1, NodeIn: map[string]int64{"c": 1 << 10}}, nil)
	if _, ok := w.rates["c"]; ok {
		t.Error("learned from a transfer too small to measure a rate")
	}
}
