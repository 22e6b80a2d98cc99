package connguard

import (
	"io"
	"net/http"
	"time"
)

// BodyIdleHandler bounds request body reads of a net/http server: each
// Read of r.Body must receive data within idle, so a client that stops
// sending mid-body loses the request instead of holding it open. 0 leaves
// h as it is.
//
// It works through http.ResponseController read deadlines rather than
// through Conn.StartBody: net/http reads the connection in the background
// once a body is consumed (to notice the client going away), and a read
// deadline left on such a read would cancel a long-running handler. So the
// deadline is set around each body Read only and cleared at the body's
// end. A body that failed or was left unread keeps a deadline (idle from
// the handler's return), so net/http's own discarding of its rest cannot
// hang on a silent client either.
func BodyIdleHandler(h http.Handler, idle time.Duration) http.Handler {
	if idle <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		b := &idleBody{ReadCloser: r.Body, rc: rc, idle: idle}
		r.Body = b
		defer b.finish()
		h.ServeHTTP(w, r)
	})
}

type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	eof  bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.eof {
		return b.ReadCloser.Read(p)
	}
	b.rc.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		// NB: net/http starts its background read at EOF, inside the
		// Read above; clearing now keeps it from timing out.
		b.eof = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// finish bounds what net/http still reads of an unfinished body.
func (b *idleBody) finish() {
	if !b.eof {
		b.rc.SetReadDeadline(time.Now().Add(b.idle))
	}
}
