package connguard

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config configures a guarded listener. The zero value guards nothing but
// the accept loop (which survives running out of descriptors either way).
type Config struct {
	// MaxConns caps the connections open at once; 0: no cap.
	MaxConns int
	// MaxConnsPerIP caps the connections open at once from one client IP
	// address; 0: no cap. Clients behind one NAT or load balancer share
	// an address, so raise it (or set 0) behind one.
	MaxConnsPerIP int
	// ReadIdle bounds how long one Read may wait for data once the server
	// has called StartBody; 0: no bound.
	ReadIdle time.Duration
	// WriteIdle bounds how long one Write may wait; 0: no bound.
	WriteIdle time.Duration
	// Refusal is written to a connection refused for a cap or while the
	// process is out of descriptors: a complete HTTP response (with
	// "Connection: close"). Nil: the connection is closed without a word.
	Refusal []byte
	// Linger is how long a connection the server closes keeps reading
	// (and discarding) what the client still sends, after a half-close
	// that tells the client the answer is complete; 0: it is closed at
	// once. Why: closing a socket with unread bytes makes the kernel send
	// a reset, which can destroy an answer the client has not read yet;
	// an HTTP server that answers a request before reading its body (a
	// refused PUT) loses its answer to a client still writing that body.
	// At most maxLingering connections linger at once; others close at
	// once, as do all while the process is short of descriptors, and TLS
	// connections.
	Linger time.Duration
	// LingerBytes bounds what one lingering connection reads; once it is
	// read the connection is closed. Needed with Linger.
	LingerBytes int64
	// Logger receives warnings, at most one per kind every 10 s; nil
	// discards them.
	Logger *slog.Logger
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case c.MaxConns < 0 || c.MaxConnsPerIP < 0:
		return fmt.Errorf("connguard: negative connection cap (%d overall, %d per address)", c.MaxConns, c.MaxConnsPerIP)
	case c.ReadIdle < 0 || c.WriteIdle < 0:
		return fmt.Errorf("connguard: negative idle timeout (read %v, write %v)", c.ReadIdle, c.WriteIdle)
	case c.Linger < 0 || c.LingerBytes < 0 || (c.Linger > 0) != (c.LingerBytes > 0):
		return fmt.Errorf("connguard: linger %v for %d bytes: want both positive or both 0", c.Linger, c.LingerBytes)
	}
	return nil
}

// Refusal timing: a refused client gets refuseTimeout to take the answer;
// at most maxRefusing refusals run at once (beyond that a refused
// connection is closed at once, so refusals never pile up descriptors).
const (
	refuseTimeout = 2 * time.Second
	maxRefusing   = 64
	// maxLingering bounds the connections lingering at once (Linger):
	// each holds a descriptor and a goroutine for up to Config.Linger.
	maxLingering = 256
	maxBackoff   = time.Second
	warnEvery    = 10 * time.Second
	// reclaimIdle: while out of descriptors, a connection that is not in
	// a request body and has moved no byte for this long is closed (a
	// flood of silent connections, or idle keep-alives), so that new
	// clients get descriptors again.
	reclaimIdle = time.Second
)

// Listener is a guarded net.Listener (see the package doc). Its Accept
// returns *Conn values (or, over TLS, values that also expose the TLS
// connection state, as *tls.Conn does).
type Listener struct {
	net.Listener
	cfg Config
	log *slog.Logger

	mu struct {
		sync.Mutex
		open    int
		perIP   map[netip.Addr]int
		conns   map[*Conn]struct{} // the open ones, for reclaim
		reserve *os.File           // held so that a refusal can be answered at EMFILE
	}
	refusing  chan struct{}
	lingering chan struct{}
	refused   atomic.Int64
	fdShort   atomic.Int64
	reclaimed atomic.Int64
	warned    sync.Map // kind -> *atomic.Int64 (unix nanos of the last warning)
}

// Listen guards ln. Closing the Listener closes ln.
func Listen(ln net.Listener, cfg Config) (*Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Listener{Listener: ln, cfg: cfg, log: cfg.Logger, refusing: make(chan struct{}, maxRefusing),
		lingering: make(chan struct{}, maxLingering)}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.mu.perIP = map[netip.Addr]int{}
	l.mu.conns = map[*Conn]struct{}{}
	l.keepReserve()
	return l, nil
}

// Stats counts what the guard has done.
type Stats struct {
	Open      int   // connections open now
	Refused   int64 // connections refused (caps, descriptor shortage)
	FDShort   int64 // accepts that failed for want of descriptors
	Reclaimed int64 // idle connections closed for want of descriptors
}

// Stats returns the current counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.mu.open, Refused: l.refused.Load(), FDShort: l.fdShort.Load(), Reclaimed: l.reclaimed.Load()}
}

// Accept waits for the next connection within the caps. Errors that a
// busy server recovers from (no descriptors, no buffers) are waited out
// here and never returned: only a closed or broken listener ends it.
func (l *Listener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !transient(err) {
				return nil, err
			}
			if outOfDescriptors(err) {
				l.fdShort.Add(1)
				l.warn("fd", "out of file descriptors: closing idle connections and refusing new ones until some close", "err", err)
				l.reclaim()
				l.shed()
			}
			delay = min(max(2*delay, 5*time.Millisecond), maxBackoff)
			time.Sleep(delay)
			continue
		}
		delay = 0
		l.keepReserve()
		if gc, reason := l.admit(c); reason != "" {
			l.refuse(c, reason)
		} else {
			return gc, nil
		}
	}
}

// Close closes the listener and lets go of the reserve descriptor.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.mu.reserve != nil {
		l.mu.reserve.Close()
		l.mu.reserve = nil
	}
	l.mu.Unlock()
	return l.Listener.Close()
}

// transient reports whether an Accept error is one to wait out.
func transient(err error) bool {
	if outOfDescriptors(err) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// keepReserve reopens the reserve descriptor if it was spent.
func (l *Listener) keepReserve() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.reserve != nil {
		return
	}
	if f, err := os.Open(os.DevNull); err == nil {
		l.mu.reserve = f
	}
}

// reclaim closes connections idle for reclaimIdle that are not in a
// request body (see reclaimIdle), at least 16 and an eighth of the open
// ones at a time.
func (l *Listener) reclaim() {
	cutoff := time.Now().Add(-reclaimIdle).UnixNano()
	l.mu.Lock()
	limit := max(16, len(l.mu.conns)/8)
	var idle []*Conn
	for c := range l.mu.conns {
		if len(idle) == limit {
			break
		}
		if c.lingers.Load() || !c.body.Load() && c.active.Load() < cutoff {
			idle = append(idle, c)
		}
	}
	l.mu.Unlock()
	// NB: counted before they close: a peer that sees its connection end
	// finds it counted (TestReclaimIdleWhenOutOfDescriptors read the
	// stats between the two on a loaded machine).
	l.reclaimed.Add(int64(len(idle)))
	for _, c := range idle {
		// NB: at once, without lingering: the server's blocked Read (or
		// a lingering connection's) fails and it lets go.
		c.closeNow()
	}
}

// shed spends the reserve descriptor on one waiting connection and
// refuses it, so that a client of a server out of descriptors hears
// "slow down" instead of hanging in the backlog.
func (l *Listener) shed() {
	l.mu.Lock()
	r := l.mu.reserve
	l.mu.reserve = nil
	l.mu.Unlock()
	if r == nil {
		return
	}
	r.Close()
	// NB: this Accept may block until a client connects; that is what
	// the accept loop would do next anyway.
	c, err := l.Listener.Accept()
	if err != nil {
		return
	}
	l.refuse(c, "out of file descriptors")
}

// admit counts c against the caps; reason is non-empty if it is over one.
func (l *Listener) admit(c net.Conn) (net.Conn, string) {
	ip := addrOf(c.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.MaxConns > 0 && l.mu.open >= l.cfg.MaxConns {
		return nil, "connection cap"
	}
	if l.cfg.MaxConnsPerIP > 0 && ip.IsValid() && l.mu.perIP[ip] >= l.cfg.MaxConnsPerIP {
		return nil, "per-address connection cap"
	}
	l.mu.open++
	if ip.IsValid() {
		l.mu.perIP[ip]++
	}
	gc := &Conn{Conn: c, l: l, ip: ip}
	gc.active.Store(time.Now().UnixNano())
	l.mu.conns[gc] = struct{}{}
	if tc, ok := c.(*tls.Conn); ok {
		return &TLSConn{Conn: gc, tls: tc}, ""
	}
	return gc, ""
}

// release undoes admit's count.
func (l *Listener) release(c *Conn) {
	ip := c.ip
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.mu.conns, c)
	l.mu.open--
	if ip.IsValid() {
		if n := l.mu.perIP[ip] - 1; n > 0 {
			l.mu.perIP[ip] = n
		} else {
			delete(l.mu.perIP, ip)
		}
	}
}

// refuse answers c with the refusal in the background (bounded) and
// closes it.
func (l *Listener) refuse(c net.Conn, reason string) {
	l.refused.Add(1)
	l.warn(reason, "refusing connections: "+reason, "remote", c.RemoteAddr().String())
	select {
	case l.refusing <- struct{}{}:
		go func() {
			defer func() { <-l.refusing }()
			l.answerRefusal(c)
		}()
	default:
		c.Close()
	}
}

func (l *Listener) answerRefusal(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(refuseTimeout))
	if len(l.cfg.Refusal) > 0 {
		if _, err := c.Write(l.cfg.Refusal); err != nil {
			return
		}
	}
	// NB: read what the client sent before closing: closing a socket with
	// unread data makes the kernel send a reset, which can destroy the
	// answer before the client reads it.
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// warn logs at most once per warnEvery for each kind.
func (l *Listener) warn(kind, msg string, args ...any) {
	v, _ := l.warned.LoadOrStore(kind, new(atomic.Int64))
	last := v.(*atomic.Int64)
	now := time.Now().UnixNano()
	prev := last.Load()
	if now-prev < int64(warnEvery) || !last.CompareAndSwap(prev, now) {
		return
	}
	l.log.Warn(msg, args...)
}

func addrOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// Conn is an accepted connection: counted against the caps until closed,
// with idle bounds on its reads (in the body phase) and writes.
type Conn struct {
	net.Conn
	l      *Listener
	ip     netip.Addr
	body   atomic.Bool  // in the body phase: reads bounded by ReadIdle
	wdl    atomic.Int64 // the server's own write deadline, unix nanos; 0: none
	active atomic.Int64 // unix nanos of the last byte moved (or accept)
	// read: the peer has sent at least one byte (see NothingReadOf).
	read atomic.Bool
	// lingers: closed by the server, reading what the client still
	// sends (Config.Linger).
	lingers atomic.Bool
	once    sync.Once
}

// StartBody starts the body phase: until the server next sets a read
// deadline, every Read must receive data within Config.ReadIdle. Call it
// once a request's headers are read (fasthttp servers: first thing in the
// handler).
func (c *Conn) StartBody() { c.body.Store(true) }

// Read reads, waiting at most Config.ReadIdle for data in the body phase.
func (c *Conn) Read(p []byte) (int, error) {
	if d := c.l.cfg.ReadIdle; d > 0 && c.body.Load() {
		c.Conn.SetReadDeadline(time.Now().Add(d))
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.active.Store(time.Now().UnixNano())
		c.read.Store(true)
	}
	return n, err
}

// Write writes, waiting at most Config.WriteIdle (or the server's own
// deadline, if sooner) for the peer to take the bytes.
func (c *Conn) Write(p []byte) (int, error) {
	c.armWrite()
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.active.Store(time.Now().UnixNano())
	}
	return n, err
}

// armWrite sets the write deadline of the next write: Config.WriteIdle
// from now, or the server's own deadline if sooner.
func (c *Conn) armWrite() {
	if d := c.l.cfg.WriteIdle; d > 0 {
		dl := time.Now().Add(d)
		if own := c.wdl.Load(); own != 0 && own < dl.UnixNano() {
			dl = time.Unix(0, own)
		}
		c.Conn.SetWriteDeadline(dl)
	}
}

// readFromPiece is the most ReadFrom sends under one write deadline.
const readFromPiece = 1 << 20

// ReadFrom lets a file reach the connection's own ReadFrom (sendfile on a
// TCP connection: net/http passes a *io.LimitedReader over the file), a
// piece of at most readFromPiece bytes at a time, each waiting at most as
// long as a Write would. Anything else is copied through Write.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.Conn.(io.ReaderFrom)
	lr, limited := r.(*io.LimitedReader)
	if !ok || !limited {
		return io.Copy(writeOnly{c}, r)
	}
	var sent int64
	for lr.N > 0 {
		piece := &io.LimitedReader{R: lr.R, N: min(lr.N, readFromPiece)}
		c.armWrite()
		n, err := rf.ReadFrom(piece)
		sent += n
		lr.N -= n
		if n > 0 {
			c.active.Store(time.Now().UnixNano())
		}
		if err != nil || n == 0 {
			return sent, err
		}
	}
	return sent, nil
}

// writeOnly hides a Conn's ReadFrom from io.Copy.
type writeOnly struct{ c *Conn }

func (w writeOnly) Write(p []byte) (int, error) { return w.c.Write(p) }

// SetReadDeadline ends the body phase: the server governs reads again.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.body.Store(false)
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline records the server's own deadline, which per-Write
// deadlines never extend.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wdl.Store(unixNano(t))
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline is SetReadDeadline and SetWriteDeadline.
func (c *Conn) SetDeadline(t time.Time) error {
	c.body.Store(false)
	c.wdl.Store(unixNano(t))
	return c.Conn.SetDeadline(t)
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Close closes the connection and frees its place under the caps. With
// Config.Linger it returns at once and the connection lingers: it is
// half-closed, so the client reads the answer to its end and sees the
// connection end, and what the client still sends is read and discarded
// until it closes its side, Config.LingerBytes are read or Config.Linger
// has passed; then it is closed and its place freed.
func (c *Conn) Close() error {
	first := false
	c.once.Do(func() { first = true })
	if first && c.linger() {
		return nil
	}
	if first {
		defer c.l.release(c)
	}
	return c.Conn.Close()
}

// linger starts Close's lingering (Config.Linger); false: the connection
// is to be closed at once (no linger configured, TLS, too many lingering,
// or the half-close failed).
func (c *Conn) linger() bool {
	// NB: plain TCP only: a TLS half-close writes an alert record, which
	// can block on a client that reads nothing.
	cw, ok := c.Conn.(*net.TCPConn)
	if c.l.cfg.Linger <= 0 || !ok {
		return false
	}
	select {
	case c.l.lingering <- struct{}{}:
	default:
		return false
	}
	// NB: marked before the half-close that ends the peer's reads, so
	// that a reclaim the peer's EOF may prompt finds it lingering
	// (TestLingerBounded reclaimed in between on a loaded machine).
	c.lingers.Store(true)
	// NB: half-closed before Close returns, so that nothing written
	// after it goes out (a server that closes a connection to answer
	// nothing, then writes, must not be heard).
	if err := cw.CloseWrite(); err != nil {
		c.lingers.Store(false)
		<-c.l.lingering
		return false
	}
	go func() {
		defer func() { <-c.l.lingering }()
		defer c.l.release(c)
		defer c.Conn.Close()
		c.Conn.SetReadDeadline(time.Now().Add(c.l.cfg.Linger))
		io.CopyN(io.Discard, c.Conn, c.l.cfg.LingerBytes)
	}()
	return true
}

// closeNow closes the connection without lingering.
func (c *Conn) closeNow() {
	c.once.Do(func() { c.l.release(c) })
	c.Conn.Close()
}

// CloseWrite half-closes the connection where the transport can.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// TLSConn is a Conn over TLS. It exposes the TLS handshake and state so
// that servers which look for them (fasthttp's IsTLS) still find them.
type TLSConn struct {
	*Conn
	tls *tls.Conn
}

// Handshake runs the TLS handshake if it has not run yet.
func (c *TLSConn) Handshake() error { return c.tls.Handshake() }

// ConnectionState returns the TLS connection's state.
func (c *TLSConn) ConnectionState() tls.ConnectionState { return c.tls.ConnectionState() }

// StartBodyOf calls StartBody on c if c is (or wraps, through *tls.Conn)
// a guarded connection; it reports whether it did.
func StartBodyOf(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	switch gc := c.(type) {
	case *Conn:
		gc.StartBody()
		return true
	case *TLSConn:
		gc.StartBody()
		return true
	}
	return false
}

// NothingReadOf reports whether c is a guarded plain-TCP connection whose
// peer never sent a byte. HTTP clients open connections they end up not
// using (Go's transport dials one per waiting request and parks it when
// another frees first); when such a connection times out the server
// should close it silently, since a response nobody asked for is logged
// by the client as an unsolicited response, or read as the answer to the
// next request it sends. Over TLS the handshake's bytes count as read, so
// it reports false there.
func NothingReadOf(c net.Conn) bool {
	gc, ok := c.(*Conn)
	return ok && !gc.read.Load()
}
