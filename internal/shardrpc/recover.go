package shardrpc

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
)

// HeaderRequestID carries the ID a shard server gives a request it
// answers with an internal error, so the client's report and the
// server's log can be matched.
const HeaderRequestID = "X-Regen-Request-Id"

// Recover returns h with its panics recovered: the stack is logged with a
// request ID, and the request alone is answered 500 Internal (if nothing
// was sent yet) with that ID in HeaderRequestID. Other requests go on.
// http.ErrAbortHandler, net/http's way to abort a response on purpose,
// passes through.
func Recover(log *slog.Logger, h http.Handler) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &trackingWriter{ResponseWriter: w}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			var b [8]byte
			rand.Read(b[:])
			id := hex.EncodeToString(b[:])
			log.Error("panic serving shard request", "request", id, "method", r.Method, "path", r.URL.Path,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if rw.wrote {
				// The status is out: the client sees a cut response.
				panic(http.ErrAbortHandler)
			}
			w.Header().Set(HeaderRequestID, id)
			w.Header().Set("Connection", "close")
			WriteError(w, http.StatusInternalServerError, CodeInternal, "internal error (request "+id+")")
		}()
		h.ServeHTTP(rw, r)
	})
}

// trackingWriter notes whether the response has started.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) {
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushes, full duplex) through the wrapper.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// Flush passes through, for handlers that assert http.Flusher.
func (t *trackingWriter) Flush() {
	t.wrote = true
	http.NewResponseController(t.ResponseWriter).Flush()
}
