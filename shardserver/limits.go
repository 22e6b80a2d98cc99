package shardserver

import (
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/regen-s3/regen/internal/connguard"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// Limits bound what one peer (or anyone who can reach the port) can hold
// of a shard server's listener. Shard streams are long, so there is no
// whole-request deadline: body reads and response writes are bounded per
// call instead (connguard), by how long they may wait for the other side.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds each wait for more of a request body. It must
	// outlast a gateway's wait for its own S3 client (the gateway
	// forwards as it receives). Default 5m.
	ReadTimeout time.Duration
	// WriteTimeout bounds each wait to hand response bytes to the peer;
	// a gateway reads shard streams as fast as its S3 client reads.
	// Default 5m.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request. It must exceed the clients' own idle timeout (90 s in
	// shardrpc), or a client may send a request on a connection the
	// server is closing. Default 2m.
	IdleTimeout time.Duration
	// MaxConns caps open connections; one over it is answered 503
	// Unavailable and closed. Peers keep up to 128 idle connections each
	// (shardrpc), so the default 8192 serves 60 peers. 0: no cap.
	MaxConns int
	// MaxConnsPerIP caps connections from one address. Default 0 (none):
	// on one machine every peer shares 127.0.0.1.
	MaxConnsPerIP int
	// MaxHeaderBytes bounds a request's headers. Default 64 KiB.
	MaxHeaderBytes int
}

// DefaultLimits returns the default Limits.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxConns:          8192,
		MaxHeaderBytes:    64 << 10,
	}
}

// Validate checks l.
func (l Limits) Validate() error {
	switch {
	case l.ReadHeaderTimeout <= 0 || l.ReadTimeout <= 0 || l.WriteTimeout <= 0 || l.IdleTimeout <= 0:
		return fmt.Errorf("%w: timeouts must be positive (read header %v, read %v, write %v, idle %v)", ErrInvalidConfig, l.ReadHeaderTimeout, l.ReadTimeout, l.WriteTimeout, l.IdleTimeout)
	case l.MaxConns < 0 || l.MaxConnsPerIP < 0:
		return fmt.Errorf("%w: negative connection cap", ErrInvalidConfig)
	case l.MaxHeaderBytes < 4<<10:
		return fmt.Errorf("%w: MaxHeaderBytes %d below 4 KiB", ErrInvalidConfig, l.MaxHeaderBytes)
	}
	return nil
}

// HTTPServer returns an http.Server for h within l: header and idle
// timeouts, the header size limit, and each body read bounded by
// ReadTimeout. Serve it on Listener(ln).
func (l Limits) HTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	var el *slog.Logger
	if log != nil {
		el = log.With("component", "http")
	}
	return &http.Server{
		Handler:           connguard.BodyIdleHandler(h, l.ReadTimeout),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slogErrorLog(el),
	}
}

// Listener guards ln within l: connection caps answered 503, each write
// bounded by WriteTimeout, and an accept loop that outlives running out of
// file descriptors. Close it to stop serving.
func (l Limits) Listener(ln net.Listener, log *slog.Logger) (net.Listener, error) {
	return connguard.Listen(ln, connguard.Config{
		MaxConns: l.MaxConns, MaxConnsPerIP: l.MaxConnsPerIP, WriteIdle: l.WriteTimeout,
		Refusal: unavailableResponse(), Logger: log,
	})
}

// unavailableResponse answers a connection over a cap, in the shard
// protocol's error form.
func unavailableResponse() []byte {
	body := `{"code":"` + shardrpc.CodeUnavailable + `","message":"too many connections; retry"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n" +
		shardrpc.HeaderCode + ": " + shardrpc.CodeUnavailable + "\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// slogErrorLog routes net/http's own messages (failed handshakes, broken
// connections) to log at debug level; nil keeps net/http's default.
func slogErrorLog(log *slog.Logger) *stdlog.Logger {
	if log == nil {
		return nil
	}
	return slog.NewLogLogger(log.Handler(), slog.LevelDebug)
}
