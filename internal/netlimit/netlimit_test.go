package netlimit

import (
	"io"
	"net"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]int64{"125MB": 125e6, "1Gbit": 125e6, "1MiB": 1 << 20, "0": 0, "500": 500, "2.5MB/s": 2.5e6} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseRate("fast"); err == nil {
		t.Error("ParseRate(fast) succeeded")
	}
}

// TestRate checks that a stream through a limited listener runs at about
// the rate, not faster.
func TestRate(t *testing.T) {
	const rate = 8 << 20 // 8 MiB/s
	l := New(rate)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lln := l.Listener(ln)
	done := make(chan int64)
	go func() {
		c, err := lln.Accept()
		if err != nil {
			done <- -1
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		done <- n
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	for range 4 {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	n := <-done
	el := time.Since(start)
	if n != 4<<20 {
		t.Fatalf("got %d bytes", n)
	}
	// 4 MiB at 8 MiB/s: 0.5 s, less the initial burst.
	lo := time.Duration(float64(4<<20-burstFor(rate)) / rate * 0.9 * float64(time.Second))
	if el < lo || el > 2*time.Second {
		t.Errorf("4 MiB took %v at 8 MiB/s", el)
	}
}
