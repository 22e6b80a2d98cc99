package repair

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/regen-s3/regen/metadata"
)

// A group whose other down servers turn lost within the window waits for
// them, so that all its failures are rebuilt in one repair; it does not
// wait when they are far from the grace's end, when it has no redundancy
// left, or when it is an inline object.
func TestCoalesceWaitsForFailuresAboutToTurnLost(t *testing.T) {
	now := time.Unix(10_000, 0)
	const grace = 10 * time.Minute
	place := make([]string, 9)
	for i := range place {
		place[i] = fmt.Sprintf("n%d", i)
	}
	parts := []metadata.Part{{Number: 1, ID: "f", Size: 100}}
	for _, tc := range []struct {
		name        string
		code        string
		parts       []metadata.Part
		downFor     map[int]time.Duration // placement index -> down since
		lost        []int
		wantWaiting bool
	}{
		{"all lost", "rs-6-3", parts, map[int]time.Duration{1: grace, 2: grace + time.Second}, []int{1, 2}, false},
		{"other turns lost in 10s", "rs-6-3", parts, map[int]time.Duration{1: grace, 2: grace - 10*time.Second}, []int{1}, true},
		{"other turns lost in 5m", "rs-6-3", parts, map[int]time.Duration{1: grace, 2: grace - 5*time.Minute}, []int{1}, false},
		{"one of two others far off", "rs-5-4", parts, map[int]time.Duration{1: grace, 2: grace - time.Second, 3: time.Second}, []int{1}, false},
		{"no redundancy left", "rs-6-3", parts, map[int]time.Duration{1: grace, 2: grace - time.Second, 3: grace - time.Second}, []int{1}, false},
		{"inline object", "rs-6-3", nil, map[int]time.Duration{1: grace, 2: grace - time.Second}, []int{1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scanner{grace: grace, now: func() time.Time { return now }}
			v := nodeView{since: map[string]time.Time{}}
			var downs []int
			for i := range place {
				if d, ok := tc.downFor[i]; ok {
					v.since[place[i]] = now.Add(-d)
					downs = append(downs, i)
				}
			}
			m := &metadata.Manifest{Code: tc.code, Placement: place, Parts: tc.parts}
			if got := s.coalesce(v, m, downs, tc.lost); got != tc.wantWaiting {
				t.Fatalf("coalesce = %v, want %v", got, tc.wantWaiting)
			}
		})
	}
}

// A placement node gossip never showed this worker is down at once but
// lost only after unknownGrace: right after start-up gossip may not have
// reached the worker yet.
func TestUnknownNodeLostOnlyAfterUnknownGrace(t *testing.T) {
	t0 := time.Unix(10_000, 0)
	now := t0
	w := &Worker{cfg: Config{Grace: 5 * time.Second}, started: t0, now: func() time.Time { return now }}
	v := nodeView{nodes: map[string]NodeInfo{"known": {ID: "known", Live: true}}, since: map[string]time.Time{}}
	for _, tc := range []struct {
		after      time.Duration
		down, lost bool
	}{
		{time.Second, true, false},
		{10 * time.Second, true, false}, // past the grace, not past unknownGrace
		{unknownGrace + time.Second, true, true},
	} {
		now = t0.Add(tc.after)
		if d, l := w.status(v, "stranger"); d != tc.down || l != tc.lost {
			t.Errorf("after %s: down %v lost %v, want %v %v", tc.after, d, l, tc.down, tc.lost)
		}
	}
	if d, _ := w.status(v, "known"); d {
		t.Error("a live known node is down")
	}
}

func TestWalkWait(t *testing.T) {
	for _, tc := range []struct{ interval, took, want time.Duration }{
		{time.Second, 10 * time.Millisecond, 990 * time.Millisecond}, // quick walk: every interval
		{time.Second, 200 * time.Millisecond, 800 * time.Millisecond},
		{time.Second, 300 * time.Millisecond, 1200 * time.Millisecond}, // slow walk: 1/5 of the time
		{30 * time.Second, 20 * time.Second, 80 * time.Second},
		{time.Second, 0, time.Second},
	} {
		if got := walkWait(tc.interval, tc.took); got != tc.want {
			t.Errorf("walkWait(%s, %s) = %s, want %s", tc.interval, tc.took, got, tc.want)
		}
	}
}

// TestDrainWakesPacedScan: after a covered walk (a repair queued all it
// found), the queue's draining ends the pace's wait, an interval after the
// walk began, so the walk that checks the repaired groups is not paced by
// one slowed by the repair; after any other walk a drain leaves the pace
// alone.
func TestDrainWakesPacedScan(t *testing.T) {
	const interval = 100 * time.Millisecond
	s := &scanner{interval: interval, wake: make(chan struct{}, 1)}
	s.walk.covered = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	done := make(chan bool, 1)
	go func() { done <- s.waitNext(ctx, start, time.Hour) }() // paced: 4 hours
	s.drained()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("waitNext reported the context ended")
		}
		if since := time.Since(start); since < interval {
			t.Fatalf("the drain walk came %s after the last began, want at least the interval %s", since, interval)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the queue drained after a covered walk and the scan still waits its pace")
	}

	s.walk.covered = false
	s.drained()
	if len(s.wake) != 0 {
		t.Fatal("a drain after a walk that was not covered woke the scan")
	}
}
