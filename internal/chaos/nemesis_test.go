package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/cluster"
)

// fakeTarget records what the nemesis does to a cluster of n shard
// servers and checks it never breaks more than maxDown at once.
type fakeTarget struct {
	t       *testing.T
	n       int
	maxDown int

	mu     sync.Mutex
	killed map[int]bool
	paused map[int]bool
	gwDown bool
	log    []string
	peak   int
}

func (f *fakeTarget) Shards() int { return f.n }

func (f *fakeTarget) note(what string) {
	f.log = append(f.log, what)
	if down := len(f.killed) + len(f.paused); down > f.peak {
		f.peak = down
	}
	if down := len(f.killed) + len(f.paused); down > f.maxDown {
		f.t.Errorf("%d shard servers down or paused at once (max %d): %v", down, f.maxDown, f.log)
	}
}

func (f *fakeTarget) KillShard(i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.killed[i] || f.paused[i] {
		f.t.Errorf("shard %d killed while down or paused", i)
	}
	f.killed[i] = true
	f.note(fmt.Sprintf("kill %d", i))
	return nil
}

func (f *fakeTarget) RestartShard(_ context.Context, i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.killed[i] {
		f.t.Errorf("shard %d restarted but not killed", i)
	}
	delete(f.killed, i)
	f.note(fmt.Sprintf("restart %d", i))
	return nil
}

func (f *fakeTarget) PauseShard(i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused[i] = true
	f.note(fmt.Sprintf("pause %d", i))
	return nil
}

func (f *fakeTarget) ResumeShard(i int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.paused, i)
	f.note(fmt.Sprintf("resume %d", i))
	return nil
}

func (f *fakeTarget) KillGateway() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gwDown = true
	f.note("kill gateway")
	return nil
}

func (f *fakeTarget) RestartGateway(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gwDown = false
	f.note("restart gateway")
	return nil
}

// Status reports the cluster redundant once everything is back up.
func (f *fakeTarget) Status(context.Context) (Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var st Status
	for i := range f.n {
		state := cluster.StateAlive
		if f.killed[i] || f.paused[i] {
			state = cluster.StateDead
		}
		m := NodeStatus{}
		m.ID, m.State, m.Role = fmt.Sprint(i), state, cluster.RoleShard
		st.Nodes = append(st.Nodes, m)
	}
	st.Stripes, st.Repair = &StripeStatus{}, &RepairStatus{}
	return st, nil
}

func runFake(t *testing.T, seed uint64, faults int) (*fakeTarget, *Nemesis) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeTarget{t: t, n: 12, maxDown: 3, killed: map[int]bool{}, paused: map[int]bool{}}
	n := &Nemesis{Target: f, Seed: seed, MaxDown: 3, HealWait: time.Second}
	// No real waiting: each hold returns at once, and the run ends after
	// the wanted number of faults.
	n.hold = func(ctx context.Context, _ time.Duration) bool {
		if n.Faults() >= faults {
			cancel()
		}
		return ctx.Err() == nil
	}
	if err := n.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f, n
}

func TestNemesisStaysWithinTheCodesTolerance(t *testing.T) {
	f, n := runFake(t, 7, 200)
	if len(f.killed)+len(f.paused) != 0 || f.gwDown {
		t.Errorf("after Heal: killed %v paused %v gateway down %v", f.killed, f.paused, f.gwDown)
	}
	if f.peak != 3 {
		t.Errorf("at most %d servers down at once over 200 faults, want the tolerance, 3", f.peak)
	}
	log := strings.Join(f.log, " ")
	for _, want := range []string{"kill ", "pause ", "resume ", "restart ", "kill gateway", "restart gateway"} {
		if !strings.Contains(log, want) {
			t.Errorf("200 faults never did %q", want)
		}
	}
	heals, timeouts := n.Heals()
	if len(heals) == 0 || timeouts != 0 {
		t.Errorf("heals %d, timeouts %d", len(heals), timeouts)
	}
}

func TestNemesisIsSeeded(t *testing.T) {
	a, _ := runFake(t, 3, 30)
	b, _ := runFake(t, 3, 30)
	c, _ := runFake(t, 4, 30)
	if strings.Join(a.log, ",") != strings.Join(b.log, ",") {
		t.Errorf("same seed, different faults:\n%v\n%v", a.log, b.log)
	}
	if strings.Join(a.log, ",") == strings.Join(c.log, ",") {
		t.Errorf("seeds 3 and 4 gave the same faults")
	}
}
