package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/pause"
)

// Target is what the nemesis breaks: a cluster's shard servers and its
// second gateway. *DevCluster is one.
type Target interface {
	Shards() int
	KillShard(i int) error
	RestartShard(ctx context.Context, i int) error
	PauseShard(i int) error
	ResumeShard(i int) error
	KillGateway() error
	RestartGateway(ctx context.Context) error
	Status(ctx context.Context) (Status, error)
}

// Nemesis injects seeded faults, one at a time, each followed by a heal
// and a wait for full redundancy: kill -9 of up to MaxDown shard servers
// (restarted later from the same data), SIGSTOP/SIGCONT of some, both at
// once, a rolling kill (some servers, then others once the first are
// back, the sequence that once turned a live key into a 404), and kill -9
// of the second gateway.
type Nemesis struct {
	Target  Target
	Seed    uint64
	MaxDown int // shard servers down or paused at once: n-k of the code
	// HealWait bounds the wait for full redundancy after each heal during
	// the run; the run goes on after it either way.
	HealWait time.Duration
	// Since turns a time into the history's offset (for the event log).
	Since func(time.Time) time.Duration

	// hold waits out a fault or a quiet spell; nil: really wait (tests
	// pass a clock of their own).
	hold func(ctx context.Context, d time.Duration) bool

	mu      sync.Mutex
	state   string
	events  []Event
	heals   []time.Duration // measured heal times
	timeout int             // heals that did not reach redundancy within HealWait
	faults  int
	killed  map[int]bool
	paused  map[int]bool
	gwDown  bool
}

// Event is one nemesis action, at an offset of the history.
type Event struct {
	At   time.Duration `json:"at"`
	What string        `json:"what"`
}

// String is the event's offset and what happened.
func (e Event) String() string { return fmt.Sprintf("%8.3fs %s", e.At.Seconds(), e.What) }

// State is what the nemesis is doing now, for the progress line.
func (n *Nemesis) State() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state == "" {
		return "starting"
	}
	return n.state
}

// Events returns the nemesis's actions so far.
func (n *Nemesis) Events() []Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Event(nil), n.events...)
}

// Faults is how many faults the nemesis injected.
func (n *Nemesis) Faults() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.faults
}

// Heals returns the heal times measured and how many heals did not reach
// full redundancy within their wait.
func (n *Nemesis) Heals() ([]time.Duration, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]time.Duration(nil), n.heals...), n.timeout
}

func (n *Nemesis) set(state string, event bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.state = state
	if event {
		at := time.Duration(0)
		if n.Since != nil {
			at = n.Since(time.Now())
		}
		n.events = append(n.events, Event{At: at, What: state})
	}
}

func (n *Nemesis) wait(ctx context.Context, d time.Duration) bool {
	if n.hold != nil {
		return n.hold(ctx, d)
	}
	return pause.For(ctx, d) == nil
}

func secs(rng *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo*1000+rng.IntN((hi-lo)*1000+1)) * time.Millisecond
}

// Run injects faults until ctx ends. It leaves the last fault in place:
// Heal undoes it.
func (n *Nemesis) Run(ctx context.Context) error {
	if n.MaxDown < 1 || n.MaxDown > n.Target.Shards() {
		return fmt.Errorf("nemesis: MaxDown %d of %d shard servers", n.MaxDown, n.Target.Shards())
	}
	n.mu.Lock()
	n.killed, n.paused = map[int]bool{}, map[int]bool{}
	n.mu.Unlock()
	rng := rand.New(rand.NewPCG(n.Seed, 0x6e656d65736973))
	for ctx.Err() == nil {
		n.set("quiet", false)
		if !n.wait(ctx, secs(rng, 1, 4)) {
			return nil
		}
		if err := n.fault(ctx, rng); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		err := n.Heal(hctx)
		cancel()
		if err != nil {
			return err
		}
		n.WaitRedundant(ctx, n.HealWait)
	}
	return nil
}

// pick returns m distinct shard servers.
func pick(rng *rand.Rand, shards, m int) []int {
	p := rng.Perm(shards)[:m]
	slices.Sort(p)
	return p
}

func list(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// fault injects one fault and holds it; it returns early when ctx ends.
func (n *Nemesis) fault(ctx context.Context, rng *rand.Rand) error {
	shards := n.Target.Shards()
	n.mu.Lock()
	n.faults++
	n.mu.Unlock()
	switch p := rng.IntN(100); {
	case p < 30: // kill -9, sometimes past the repair grace
		ids := pick(rng, shards, 1+rng.IntN(n.MaxDown))
		hold := secs(rng, 2, 12)
		n.set(fmt.Sprintf("kill -9 shards %s for %s", list(ids), hold), true)
		if err := n.kill(ids); err != nil {
			return err
		}
		n.wait(ctx, hold)
	case p < 50: // pause
		ids := pick(rng, shards, 1+rng.IntN(n.MaxDown))
		hold := secs(rng, 2, 10)
		n.set(fmt.Sprintf("SIGSTOP shards %s for %s", list(ids), hold), true)
		if err := n.pause(ids); err != nil {
			return err
		}
		n.wait(ctx, hold)
	case p < 65 && n.MaxDown >= 2: // some killed, some paused
		ids := pick(rng, shards, 2+rng.IntN(max(n.MaxDown-1, 1)))
		ids = ids[:min(len(ids), n.MaxDown)]
		cut := 1 + rng.IntN(len(ids)-1)
		hold := secs(rng, 2, 10)
		n.set(fmt.Sprintf("kill -9 shards %s, SIGSTOP shards %s for %s", list(ids[:cut]), list(ids[cut:]), hold), true)
		if err := n.kill(ids[:cut]); err != nil {
			return err
		}
		if err := n.pause(ids[cut:]); err != nil {
			return err
		}
		n.wait(ctx, hold)
	case p < 85: // rolling: some servers, back, then others
		m := max(1, n.MaxDown-1)
		perm := rng.Perm(shards)
		first, second := perm[:m], perm[m:2*m]
		slices.Sort(first)
		slices.Sort(second)
		hold := secs(rng, 2, 4)
		n.set(fmt.Sprintf("rolling: kill -9 shards %s for %s", list(first), hold), true)
		if err := n.kill(first); err != nil {
			return err
		}
		if !n.wait(ctx, hold) {
			return nil
		}
		if err := n.Heal(ctx); err != nil {
			return err
		}
		hold = secs(rng, 2, 8)
		n.set(fmt.Sprintf("rolling: back, now kill -9 shards %s for %s", list(second), hold), true)
		if err := n.kill(second); err != nil {
			return err
		}
		n.wait(ctx, hold)
	default: // the second gateway
		hold := secs(rng, 1, 5)
		n.set(fmt.Sprintf("kill -9 gateway 2 for %s", hold), true)
		n.mu.Lock()
		n.gwDown = true
		n.mu.Unlock()
		if err := n.Target.KillGateway(); err != nil {
			return err
		}
		n.wait(ctx, hold)
	}
	return nil
}

func (n *Nemesis) kill(ids []int) error {
	for _, i := range ids {
		n.mu.Lock()
		n.killed[i] = true
		n.mu.Unlock()
		if err := n.Target.KillShard(i); err != nil {
			return err
		}
	}
	return nil
}

func (n *Nemesis) pause(ids []int) error {
	for _, i := range ids {
		n.mu.Lock()
		n.paused[i] = true
		n.mu.Unlock()
		if err := n.Target.PauseShard(i); err != nil {
			return err
		}
	}
	return nil
}

// Heal restarts every killed process and resumes every paused one.
func (n *Nemesis) Heal(ctx context.Context) error {
	n.mu.Lock()
	killed, paused, gw := n.killed, n.paused, n.gwDown
	n.killed, n.paused, n.gwDown = map[int]bool{}, map[int]bool{}, false
	n.mu.Unlock()
	if len(killed)+len(paused) == 0 && !gw {
		return nil
	}
	n.set("heal: restart and resume everything", true)
	var errs []error
	// In order: the same seed makes the same moves.
	for _, i := range slices.Sorted(maps.Keys(paused)) {
		errs = append(errs, n.Target.ResumeShard(i))
	}
	for _, i := range slices.Sorted(maps.Keys(killed)) {
		errs = append(errs, n.Target.RestartShard(ctx, i))
	}
	if gw {
		errs = append(errs, n.Target.RestartGateway(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nemesis heal: %w", err)
	}
	return nil
}

// WaitRedundant polls the cluster status until it is fully redundant or
// wait passes, and records the time it took. It returns that time and
// whether redundancy was reached.
func (n *Nemesis) WaitRedundant(parent context.Context, wait time.Duration) (time.Duration, bool) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(parent, wait)
	defer cancel()
	why := "waiting for status"
	for {
		st, err := n.Target.Status(ctx)
		if err == nil {
			var ok bool
			if ok, why = Redundant(st, n.Target.Shards()); ok {
				d := time.Since(start)
				n.mu.Lock()
				n.heals = append(n.heals, d)
				n.mu.Unlock()
				n.set(fmt.Sprintf("redundant after %.1fs", d.Seconds()), true)
				return d, true
			}
		} else if ctx.Err() == nil {
			// A status cut short by the wait's end says nothing; the
			// last one that answered does.
			why = err.Error()
		}
		n.set("healing: "+why, false)
		if pause.For(ctx, 500*time.Millisecond) != nil {
			if parent.Err() != nil {
				return time.Since(start), false // cut short by the end of the run: not measured
			}
			n.mu.Lock()
			n.timeout++
			n.mu.Unlock()
			n.set(fmt.Sprintf("not redundant after %.1fs: %s", time.Since(start).Seconds(), why), true)
			return time.Since(start), false
		}
	}
}
