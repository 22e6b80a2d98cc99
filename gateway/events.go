package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/cluster"
)

// Event is one entry of the gateway's recent-events log, shown by the
// status page and `regen admin status --json`.
type Event struct {
	Time time.Time `json:"time"`
	// Kind is a short word: "node-joined", "node-suspect", "node-dead",
	// "node-left", "node-updated"; the repair worker adds
	// "repair-started" and "repair-finished".
	Kind   string `json:"kind"`
	Node   string `json:"node,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// eventLogSize bounds the log: the page shows what happened lately, not a
// history (the logs are the history).
const eventLogSize = 100

// eventLog is a small ring of recent events; the zero value is ready.
type eventLog struct {
	mu     sync.Mutex
	events []Event // oldest first, at most eventLogSize
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == eventLogSize {
		copy(l.events, l.events[1:])
		l.events = l.events[:eventLogSize-1]
	}
	l.events = append(l.events, e)
}

func (l *eventLog) recent() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// RecordEvent adds an event to the recent-events log (for producers
// outside the gateway, such as a repair status feed).
func (g *Gateway) RecordEvent(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	g.events.add(e)
}

// WatchMembership records membership changes as events until ctx ends or
// events closes. The caller wires it to the cluster node's event stream
// (it is the stream's only consumer).
func (g *Gateway) WatchMembership(ctx context.Context, events <-chan cluster.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			g.RecordEvent(membershipEvent(ev.Member))
		}
	}
}

func membershipEvent(m cluster.Member) Event {
	kind := "node-" + string(m.State)
	switch m.State {
	case cluster.StateAlive:
		kind = "node-joined"
	case cluster.StateSuspect, cluster.StateDead, cluster.StateLeft:
	default:
		kind = "node-updated"
	}
	where := m.HTTP
	if where == "" {
		where = m.Gossip
	}
	return Event{
		Time: m.Since.UTC(), Kind: kind, Node: m.ID,
		Detail: fmt.Sprintf("%s %s (%s) is %s", m.Role, m.ID, where, m.State),
	}
}
