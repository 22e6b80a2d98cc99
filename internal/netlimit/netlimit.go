// Package netlimit caps a process's network traffic with token buckets, to
// emulate a cluster of servers with real NICs on one machine.
//
// A Limiter holds one bucket per direction. Every connection it wraps (the
// server's accepted ones and the ones it dials) draws from the same two
// buckets, so the cap is per server, like a NIC's line rate: bytes read
// count against In, bytes written against Out.
//
// What it does not emulate: switch buffers and incast. All servers share
// the loopback interface, which never drops; many senders converging on one
// receiver are simply throttled by the receiver's In bucket, without the
// retransmission timeouts a real switch's overflowing buffer causes. Results
// with it are therefore optimistic for many-to-one patterns (PULL).
package netlimit

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limiter caps traffic in each direction at a rate in bytes per second.
// The zero value and nil are unlimited.
type Limiter struct {
	in, out *pacer
	burst   int
}

// burstFor is the largest piece one Read or Write moves between waits.
func burstFor(bytesPerSec int64) int {
	return int(max(64<<10, min(1<<20, bytesPerSec/50)))
}

// Catch-up rules of a pacer (see pacer).
const (
	// catchUp is how far a busy link may fall behind its schedule and
	// still make the time up: a goroutine of a busy process that wakes
	// late (the machine is loaded) finds the late time's bytes allowed.
	catchUp = 250 * time.Millisecond
	// idleGap is a pause with no traffic after which the link counts as
	// idle: its schedule restarts at now, with no credit, so a transfer
	// after a pause never gets a free burst.
	idleGap = 100 * time.Millisecond
)

// pacer schedules bytes on a virtual clock: each transfer of n bytes
// moves the link's next free time n/rate on and waits for it. Unlike a
// token bucket, whose depth both forgives late wake-ups and hands out a
// free burst after every pause (a deep bucket favoured short transfers,
// a shallow one (the former 2 ms) lost every late wake-up's bandwidth
// for good, so a loaded CPU made single-stream links slower than the
// rate), it forgives lateness up to catchUp only while the link is busy,
// and restarts without credit after idleGap of silence.
type pacer struct {
	mu       sync.Mutex
	perByte  float64 // seconds
	next     time.Time
	lastDone time.Time
}

func newPacer(bytesPerSec int64) *pacer {
	return &pacer{perByte: 1 / float64(bytesPerSec)}
}

// wait accounts n bytes and sleeps until the link has carried them.
func (p *pacer) wait(n int) {
	p.mu.Lock()
	now := time.Now()
	switch {
	case now.Sub(p.lastDone) > idleGap && p.next.Before(now):
		p.next = now // idle: no credit
	case p.next.Before(now.Add(-catchUp)):
		p.next = now.Add(-catchUp) // busy but late: bounded catch-up
	}
	p.next = p.next.Add(time.Duration(float64(n) * p.perByte * float64(time.Second)))
	target := p.next
	p.mu.Unlock()
	if d := time.Until(target); d > 0 {
		time.Sleep(d)
	}
	p.mu.Lock()
	p.lastDone = time.Now()
	p.mu.Unlock()
}

// New returns a Limiter of bytesPerSec per direction; 0 means unlimited.
func New(bytesPerSec int64) *Limiter {
	if bytesPerSec <= 0 {
		return nil
	}
	return &Limiter{in: newPacer(bytesPerSec), out: newPacer(bytesPerSec), burst: burstFor(bytesPerSec)}
}

// ParseRate parses a rate such as "125MB", "1Gbit", "100MiB" or "0" into
// bytes per second. Units: B, KB, MB, GB (powers of 1000), KiB, MiB, GiB,
// and bit variants Kbit, Mbit, Gbit; a bare number is bytes.
func ParseRate(s string) (int64, error) {
	t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "/s"))
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("netlimit: bad rate %q", s)
	}
	mult := map[string]float64{
		"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
		"kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8,
	}
	m, ok := mult[unit]
	if !ok {
		return 0, fmt.Errorf("netlimit: bad rate unit in %q", s)
	}
	if v*m > 1<<62 { // int64 would overflow
		return 0, fmt.Errorf("netlimit: rate %q is too large", s)
	}
	return int64(v * m), nil
}

// Listener wraps ln so that every accepted connection is limited.
func (l *Limiter) Listener(ln net.Listener) net.Listener {
	if l == nil {
		return ln
	}
	return &listener{Listener: ln, l: l}
}

// Dialer wraps dial so that every dialled connection is limited.
func (l *Limiter) Dialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if l == nil {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return l.Conn(c), nil
	}
}

// Conn wraps c.
func (l *Limiter) Conn(c net.Conn) net.Conn {
	if l == nil {
		return c
	}
	return &conn{Conn: c, l: l}
}

type listener struct {
	net.Listener
	l *Limiter
}

func (ln *listener) Accept() (net.Conn, error) {
	c, err := ln.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return ln.l.Conn(c), nil
}

type conn struct {
	net.Conn
	l *Limiter
}

// Read takes tokens after the read: the bytes are already here, but the
// wait delays the next read, so a sustained stream runs at the rate (and
// TCP back-pressure slows the sender, as a full NIC would).
func (c *conn) Read(p []byte) (int, error) {
	if len(p) > c.l.burst {
		p = p[:c.l.burst]
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		// NB: no ctx: a Read has none; the wait is at most one piece
		// (plus what concurrent streams have booked) long.
		c.l.in.wait(n)
	}
	return n, err
}

// Write takes tokens before each burst-sized piece.
func (c *conn) Write(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		n := min(len(p), c.l.burst)
		c.l.out.wait(n)
		m, err := c.Conn.Write(p[:n])
		total += m
		if err != nil {
			return total, err
		}
		p = p[n:]
	}
	return total, nil
}
