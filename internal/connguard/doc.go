// Package connguard keeps a server's listener alive and its connections
// bounded, whatever clients do.
//
// Listen wraps a net.Listener so that:
//
//   - running out of file descriptors (EMFILE, ENFILE) never ends the
//     accept loop: Accept backs off (5 ms doubling to 1 s, as net/http
//     does) and keeps serving. Connections that sit silent (not in a
//     request body, no byte for a second) are closed to get descriptors
//     back: a flood of idle sockets cannot starve real clients for the
//     length of the header timeout. A descriptor is held in reserve; when
//     the process runs out, the reserve is let go for one connection,
//     which gets the canned refusal (for S3, 503 SlowDown) instead of
//     hanging in the kernel's backlog.
//   - connections are capped overall and per client address. A connection
//     over a cap is answered with the canned refusal and closed; it never
//     reaches the server, so the server's own per-connection memory stays
//     bounded.
//   - every Write of an accepted connection must make progress within
//     Config.WriteIdle, and, once the server calls StartBody, every Read
//     within Config.ReadIdle: a client that stops reading a response or
//     stops sending a body loses its connection instead of holding it (and
//     a handler goroutine) forever. Time spent between reads and writes
//     (the server working) does not count.
//
// The header and idle timeouts are the HTTP server's (fasthttp's
// ReadTimeout and IdleTimeout, net/http's ReadHeaderTimeout and
// IdleTimeout): any deadline the server sets on a connection ends the body
// phase started by StartBody, so the server's own timeouts govern headers
// and keep-alive waits. BodyIdleHandler does StartBody's job for net/http
// servers, whose background reads must never time out.
package connguard
