package connguard

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const refusal = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbusy"

func listen(t *testing.T, cfg Config) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// acceptAll accepts until l closes and keeps the connections open.
func acceptAll(l *Listener) <-chan net.Conn {
	ch := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(ch)
				return
			}
			ch <- c
		}
	}()
	return ch
}

func dial(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readRefusal reads what the server says to a refused connection.
func readRefusal(t *testing.T, c net.Conn) string {
	t.Helper()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

func TestConnectionCap(t *testing.T) {
	l := listen(t, Config{MaxConns: 2, Refusal: []byte(refusal)})
	accepted := acceptAll(l)
	a, b := dial(t, l), dial(t, l)
	first := <-accepted
	<-accepted
	_ = a
	_ = b
	third := dial(t, l)
	if got := readRefusal(t, third); got != refusal {
		t.Fatalf("third connection got %q, want the refusal", got)
	}
	if st := l.Stats(); st.Open != 2 || st.Refused != 1 {
		t.Fatalf("stats %+v, want 2 open, 1 refused", st)
	}
	// A closed connection frees its place.
	first.Close()
	dial(t, l)
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a connection after one closed was not accepted")
	}
}

func TestPerAddressCap(t *testing.T) {
	l := listen(t, Config{MaxConnsPerIP: 1, Refusal: []byte(refusal)})
	accepted := acceptAll(l)
	dial(t, l)
	<-accepted
	if got := readRefusal(t, dial(t, l)); got != refusal {
		t.Fatalf("second connection from one address got %q, want the refusal", got)
	}
	// Another address (127.0.0.2 is loopback too on Linux) is admitted.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Skipf("cannot dial from 127.0.0.2: %v", err)
	}
	defer c.Close()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a connection from another address was not accepted")
	}
}

// fdShortListener fails its first n Accepts with EMFILE.
type fdShortListener struct {
	net.Listener
	mu sync.Mutex
	n  int
}

func (f *fdShortListener) Accept() (net.Conn, error) {
	f.mu.Lock()
	if f.n > 0 {
		f.n--
		f.mu.Unlock()
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	f.mu.Unlock()
	return f.Listener.Accept()
}

// TestOutOfDescriptors: EMFILE from accept never ends Accept; the first
// waiting client is refused with the reserve descriptor, later ones are
// served once descriptors are back.
func TestOutOfDescriptors(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(&fdShortListener{Listener: inner, n: 1}, Config{Refusal: []byte(refusal)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	refused := dial(t, l)
	accepted := acceptAll(l)
	if got := readRefusal(t, refused); got != refusal {
		t.Fatalf("client waiting while out of descriptors got %q, want the refusal", got)
	}
	served := dial(t, l)
	select {
	case c := <-accepted:
		c.Write([]byte("hi"))
		buf := make([]byte, 2)
		served.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(served, buf); err != nil || string(buf) != "hi" {
			t.Fatalf("served connection read %q, %v", buf, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not recover from EMFILE")
	}
	if st := l.Stats(); st.FDShort < 1 || st.Refused < 1 {
		t.Fatalf("stats %+v: want the shortage and the refusal counted", st)
	}
}

func TestClosedListenerEndsAccept(t *testing.T) {
	l := listen(t, Config{})
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v", err)
	}
}

func TestReadIdleInBodyPhase(t *testing.T) {
	l := listen(t, Config{ReadIdle: 200 * time.Millisecond})
	accepted := acceptAll(l)
	client := dial(t, l)
	c := <-accepted
	// Before StartBody, reads are the server's business: no bound.
	c.SetReadDeadline(time.Now().Add(time.Second))
	go func() { time.Sleep(400 * time.Millisecond); client.Write([]byte("a")) }()
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil {
		t.Fatalf("read before the body phase: %v (ReadIdle applied too early)", err)
	}
	StartBodyOf(c)
	client.Write([]byte("b"))
	if _, err := c.Read(buf); err != nil || buf[0] != 'b' {
		t.Fatalf("read in body phase: %q %v", buf, err)
	}
	start := time.Now()
	_, err := c.Read(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a silent client's body read returned %v, want a timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

func TestWriteIdle(t *testing.T) {
	l := listen(t, Config{WriteIdle: 200 * time.Millisecond})
	accepted := acceptAll(l)
	dial(t, l) // never reads
	c := <-accepted
	chunk := make([]byte, 1<<20)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.Write(chunk); err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("write to a stalled client: %v, want a timeout", err)
			}
			return
		}
	}
	t.Fatal("writes to a client that never reads did not time out")
}

// TestBodyIdleHandler: a stalled body fails the handler's read; a
// handler that works long after reading its body is not cancelled.
func TestBodyIdleHandler(t *testing.T) {
	l := listen(t, Config{})
	results := make(chan string, 4)
	h := BodyIdleHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		if err != nil {
			results <- "read error"
			return
		}
		select {
		case <-r.Context().Done():
			results <- "cancelled"
		case <-time.After(700 * time.Millisecond):
			results <- "ok"
		}
		w.WriteHeader(http.StatusOK)
	}), 200*time.Millisecond)
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())

	resp, err := http.Post("http://"+l.Addr().String()+"/", "text/plain", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-results; got != "ok" {
		t.Fatalf("handler working after its body: %s", got)
	}

	c := dial(t, l)
	c.Write([]byte("PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npartial"))
	select {
	case got := <-results:
		if got != "read error" {
			t.Fatalf("stalled body: %s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled body was not cut off")
	}
}

// TestReclaimIdleWhenOutOfDescriptors: silent connections are closed when
// descriptors run out, those in a request body are kept.
func TestReclaimIdleWhenOutOfDescriptors(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &fdShortListener{Listener: inner}
	l, err := Listen(fl, Config{Refusal: []byte(refusal)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := acceptAll(l)
	silent := []net.Conn{dial(t, l), dial(t, l)}
	<-accepted
	<-accepted
	busyClient := dial(t, l)
	busy := <-accepted
	StartBodyOf(busy) // a request whose body is being read
	time.Sleep(reclaimIdle + 200*time.Millisecond)
	fl.mu.Lock()
	fl.n = 1
	fl.mu.Unlock()
	dial(t, l) // its accept meets EMFILE
	for _, c := range silent {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("silent connection: read %v, want EOF (closed)", err)
		}
	}
	busyClient.Write([]byte("x"))
	buf := make([]byte, 1)
	busy.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := busy.Read(buf); err != nil {
		t.Fatalf("connection in a body was reclaimed: %v", err)
	}
	if st := l.Stats(); st.Reclaimed != 2 {
		t.Fatalf("stats %+v: want 2 reclaimed", st)
	}
}

// TestNothingRead: a connection counts as unused until its peer sends a
// byte, so that a server can close an unused one without an answer.
func TestNothingRead(t *testing.T) {
	l := listen(t, Config{})
	conns := acceptAll(l)
	c := dial(t, l)
	sc := <-conns
	if !NothingReadOf(sc) {
		t.Fatal("a connection nothing was sent on counts as used")
	}
	if _, err := c.Write([]byte("G")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(sc, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if NothingReadOf(sc) {
		t.Fatal("a connection a byte was read from still counts as unused")
	}
	if NothingReadOf(c) {
		t.Fatal("an unguarded connection counts as a guarded unused one")
	}
}

// answerEarly accepts one connection of l, reads the first 64 bytes the
// client sends, answers and closes it, as an HTTP server refusing a PUT
// before reading its body does.
func answerEarly(t *testing.T, l *Listener, answer string) {
	t.Helper()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		io.ReadFull(c, make([]byte, 64))
		c.Write([]byte(answer))
		c.Close()
	}()
}

// sendThenRead writes size bytes to a new connection of l, then reads
// what comes back to its end: the client of answerEarly.
func sendThenRead(t *testing.T, l *Listener, size int64) (got string, werr, rerr error) {
	t.Helper()
	c := dial(t, l)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	_, werr = io.Copy(c, io.LimitReader(zeros{}, size))
	b, rerr := io.ReadAll(c)
	c.Close()
	return string(b), werr, rerr
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// An answer written before the request was read whole reaches a client
// that writes all of its request before it reads: closed at once, the
// unread bytes make the kernel reset the connection, and the client's
// write or read fails.
func TestLingerKeepsTheAnswer(t *testing.T) {
	const size = 24 << 20 // more than the socket buffers of both ends hold
	l := listen(t, Config{Linger: 2 * time.Second, LingerBytes: 32 << 20})
	answerEarly(t, l, "refused")
	got, werr, rerr := sendThenRead(t, l, size)
	if werr != nil || rerr != nil || got != "refused" {
		t.Fatalf("lingering: wrote with %v, read %q with %v; want the whole request written and the answer read", werr, got, rerr)
	}
	waitOpen(t, l, 0, time.Second)

	l = listen(t, Config{})
	answerEarly(t, l, "refused")
	got, werr, rerr = sendThenRead(t, l, size)
	if werr == nil && rerr == nil && got == "refused" {
		t.Fatal("without lingering the answer came through too: this test shows nothing")
	}
	t.Logf("without lingering: wrote with %v, read %q with %v", werr, got, rerr)
}

// A lingering connection ends at LingerBytes, at Linger for a client that
// neither sends nor closes, and at once when the process runs short of
// descriptors; the client sees the answer's end at the close, not after
// the linger.
func TestLingerBounded(t *testing.T) {
	l := listen(t, Config{Linger: time.Second, LingerBytes: 1 << 20})
	answerEarly(t, l, "refused")
	_, werr, _ := sendThenRead(t, l, 64<<20)
	if werr == nil {
		t.Fatal("a client sending 64 MiB to a connection lingering for 1 MiB wrote it all")
	}
	waitOpen(t, l, 0, time.Second)

	answerEarly(t, l, "refused")
	c := dial(t, l)
	c.Write(make([]byte, 64))
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if b, err := io.ReadAll(c); err != nil || string(b) != "refused" {
		t.Fatalf("silent client: read %q with %v before the linger ended, want the answer and EOF", b, err)
	}
	if n := l.Stats().Open; n != 1 {
		t.Fatalf("%d connections open while one lingers, want 1", n)
	}
	start := time.Now()
	waitOpen(t, l, 0, 3*time.Second)
	t.Logf("silent client's connection closed %v after its answer", time.Since(start).Round(10*time.Millisecond))

	answerEarly(t, l, "refused")
	c = dial(t, l)
	c.Write(make([]byte, 64))
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	io.ReadAll(c)
	l.reclaim()
	waitOpen(t, l, 0, 200*time.Millisecond)
}

// waitOpen waits up to d for l to count n open connections.
func waitOpen(t *testing.T, l *Listener, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for l.Stats().Open != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open after %v, want %d", l.Stats().Open, d, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLingerConfig(t *testing.T) {
	for _, c := range []Config{{Linger: time.Second}, {LingerBytes: 1}, {Linger: -1, LingerBytes: -1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: valid, want an error", c)
		}
	}
}

// TestReadFromFile: a file range handed to ReadFrom (as net/http hands a
// response body over a file) arrives whole and from the file's offset, in
// pieces each under its own write deadline; a stalled client still times
// it out.
func TestReadFromFile(t *testing.T) {
	l := listen(t, Config{WriteIdle: 500 * time.Millisecond})
	accepted := acceptAll(l)
	client := dial(t, l)
	c := <-accepted
	data := make([]byte, 3*readFromPiece+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	f, err := os.CreateTemp(t.TempDir(), "src")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	const from = 1000
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	want := data[from : len(data)-10]
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(io.LimitReader(client, int64(len(want)))); got <- b }()
	lr := &io.LimitedReader{R: f, N: int64(len(want))}
	n, err := c.(*Conn).ReadFrom(lr)
	if err != nil || n != int64(len(want)) || lr.N != 0 {
		t.Fatalf("ReadFrom: %d bytes, %v, %d left; want %d, nil, 0", n, err, lr.N, len(want))
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the client got %d bytes, not the file's range of %d", len(b), len(want))
	}

	// A client that stops reading: each piece waits at most WriteIdle.
	big, err := os.CreateTemp(t.TempDir(), "big")
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	if err := big.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.(*Conn).ReadFrom(&io.LimitedReader{R: big, N: 64 << 20})
		done <- err
	}()
	select {
	case err := <-done:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("ReadFrom to a stalled client: %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ReadFrom to a client that never reads did not time out")
	}
}
