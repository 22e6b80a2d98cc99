package tests

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sys/unix"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/sigv4"
)

// TestHostileInput replays, against a real regen dev, what a security
// review of the front door found (issue 17): each hostile request must get
// the S3-correct error, store nothing, and leave the gateway serving
// everyone else within bounded memory. Internal traffic is checked too: a
// shard request captured on the wire cannot be replayed.
func TestHostileInput(t *testing.T) {
	d := startDev(t, "--read-header-timeout", "2s", "--idle-timeout", "3s", "--read-timeout", "3s", "--max-conns-per-ip", "200")
	h := &hostile{t: t, d: d, c: d.client(t), pid: d.cmd.Process.Pid}
	mustMakeBucket(t, h.c, "hostile")
	put(t, h.c, "hostile", "keep", []byte("kept"), minio.PutObjectOptions{})

	// A shard server of our own joins the cluster behind a logging proxy
	// (its advertised address), so the gateway's requests to it are
	// captured as they cross the network.
	spy := h.startSpiedShard()

	t.Run("SlowHeaders", h.slowHeaders)
	t.Run("IdleConnection", h.idleConnection)
	t.Run("UnusedConnection", h.unusedConnection)
	t.Run("StalledBody", h.stalledBody)
	t.Run("EarlyRefusal", h.earlyRefusal)
	t.Run("HugeHeaders", h.hugeHeaders)
	t.Run("BadFraming", h.badFraming)
	t.Run("XMLBodies", h.xmlBodies)
	t.Run("HeldBodies", h.heldBodies)
	t.Run("SlowReaders", h.slowReaders)
	t.Run("Digests", h.digests)
	t.Run("Keys", h.keys)
	t.Run("PayloadHash", h.payloadHash)
	t.Run("Presigned", h.presigned)
	t.Run("Checksums", h.checksums)
	t.Run("PerAddressCap", h.perAddressCap)
	t.Run("DescriptorFlood", h.descriptorFlood)
	t.Run("ShardListener", func(t *testing.T) { h.shardListener(t, spy) })
	t.Run("CapturedShardRequest", func(t *testing.T) { h.capturedShardRequest(t, spy) })
	t.Run("PrivateFiles", h.privateFiles)
	t.Run("ConcurrentUploads", h.concurrentUploads)
	t.Run("Memory", func(t *testing.T) {
		if hwm := h.peakRSS(t); hwm >= 256<<20 {
			t.Fatalf("gateway peak RSS %d MiB, want under 256 MiB", hwm>>20)
		} else {
			t.Logf("gateway (regen dev process) peak RSS over the whole table: %d MiB", hwm>>20)
		}
	})
}

type hostile struct {
	t        *testing.T
	d        *devCluster
	c        *minio.Client
	pid      int
	n        int    // objects written by serves
	spiedDir string // data directory of the spied shard server
}

// serves checks the gateway still answers a normal client: a PUT and a GET
// of a fresh object, and the object kept from the start.
func (h *hostile) serves(t *testing.T) {
	t.Helper()
	h.n++
	key := fmt.Sprintf("normal-%d", h.n)
	data := []byte("still serving " + key)
	put(t, h.c, "hostile", key, data, minio.PutObjectOptions{})
	if got := get(t, h.c, "hostile", key, minio.GetObjectOptions{}); !bytes.Equal(got, data) {
		t.Fatalf("GET %s after the hostile request: %q", key, got)
	}
	if got := get(t, h.c, "hostile", "keep", minio.GetObjectOptions{}); string(got) != "kept" {
		t.Fatalf("GET keep: %q", got)
	}
}

// absent checks that nothing was stored under key.
func (h *hostile) absent(t *testing.T, bucket, key string) {
	t.Helper()
	_, err := h.c.StatObject(ctx(t), bucket, key, minio.StatObjectOptions{})
	if code := minio.ToErrorResponse(err).Code; code != "NoSuchKey" && code != "NoSuchBucket" {
		t.Fatalf("%s/%s: stat says %v, want it absent", bucket, key, err)
	}
}

// raw is a request written byte by byte on its own connection.
type raw struct {
	method, path string
	hdr          map[string]string // signed headers
	lines        []string          // header lines written as given, unsigned
	payload      string            // x-amz-content-sha256; "": UNSIGNED-PAYLOAD
	length       int64             // Content-Length to write; -1: none
	body         io.Reader
	unsigned     bool
	from         string // local IP to dial from, "" for any
}

// reply is what came back.
type reply struct {
	status int
	code   string
	header http.Header
	body   string
	err    error // the connection failed before a response
	// after is how long after the dial the response came or the
	// connection failed.
	after time.Duration
}

var codeRE = regexp.MustCompile(`<Code>([^<]*)</Code>`)

// send writes r on a new connection and reads the response, writing the
// body concurrently (a server may answer before reading all of it).
func (h *hostile) send(t *testing.T, r raw) reply {
	t.Helper()
	host := strings.TrimPrefix(h.d.info.Endpoint, "http://")
	req, err := http.NewRequest(r.method, h.d.info.Endpoint+r.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range r.hdr {
		req.Header.Set(k, v)
	}
	if !r.unsigned {
		ph := r.payload
		if ph == "" {
			ph = sigv4.UnsignedPayload
		}
		sigv4.Sign(req, h.d.info.AccessKey, h.d.info.SecretKey, "us-east-1", time.Now(), ph)
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	if r.from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(r.from)}
	}
	conn, err := d.Dial("tcp", host)
	if err != nil {
		return reply{err: err}
	}
	defer conn.Close()
	dialed := time.Now()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.method, r.path, host)
	for k, vs := range req.Header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	for _, l := range r.lines {
		b.WriteString(l + "\r\n")
	}
	if r.length >= 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", r.length)
	}
	b.WriteString("\r\n")
	// NB: the head is written before anything else can be scheduled: a
	// connection that sends nothing before the header timeout is closed
	// without an answer by design (connguard.NothingReadOf), and a loaded
	// machine can keep a goroutine waiting for that long.
	// A head the gateway refuses part way (HugeHeaders) may fail to
	// write: its answer is read all the same.
	conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, werr := io.WriteString(conn, b.String())
	conn.SetWriteDeadline(time.Time{})
	if werr == nil && r.body != nil {
		go io.Copy(conn, r.body)
	}
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return reply{err: err, after: time.Since(dialed)}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	out := reply{status: resp.StatusCode, header: resp.Header, body: string(body), after: time.Since(dialed)}
	if m := codeRE.FindStringSubmatch(out.body); m != nil {
		out.code = m[1]
	}
	return out
}

// want checks a reply's status and S3 error code.
func want(t *testing.T, what string, got reply, status int, code string) {
	t.Helper()
	if got.err != nil {
		t.Fatalf("%s: no response: %v", what, got.err)
	}
	if got.status != status || got.code != code {
		t.Fatalf("%s: %d %s, want %d %s (%s)", what, got.status, got.code, status, code, got.body)
	}
}

// slowHeaders: headers trickled a line a second are cut off at the
// header timeout (2s here), not accepted whenever they end.
func (h *hostile) slowHeaders(t *testing.T) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.d.info.Endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	closed := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn)
		closed <- string(b)
	}()
	fmt.Fprintf(conn, "GET /hostile HTTP/1.1\r\nHost: x\r\n")
	for i := 0; ; i++ {
		select {
		case resp := <-closed:
			if d := time.Since(start); d > 6*time.Second {
				t.Fatalf("trickled headers were cut off only after %v", d)
			}
			if resp != "" && !strings.Contains(resp, "<Code>RequestTimeout</Code>") {
				t.Fatalf("trickled headers got %q, want RequestTimeout or a closed connection", resp)
			}
			h.serves(t)
			return
		case <-time.After(time.Second):
			if time.Since(start) > 20*time.Second {
				t.Fatal("trickled headers were still accepted after 20s")
			}
			fmt.Fprintf(conn, "X-Slow-%d: v\r\n", i)
		}
	}
}

// idleConnection: a keep-alive connection left idle is closed at the
// idle timeout (3s here).
func (h *hostile) idleConnection(t *testing.T) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.d.info.Endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /hostile HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: %v, want closed by the server", err)
	}
	if d := time.Since(start); d < 2*time.Second || d > 8*time.Second {
		t.Fatalf("idle connection closed after %v, want about the 3s idle timeout", d)
	}
	h.serves(t)
}

// unusedConnection: a connection the client opened and never used (HTTP
// clients park spare ones) is closed at the header timeout (2s here)
// without an answer: Go's client logs one as an "unsolicited response",
// and others could take it for the answer to their next request.
func (h *hostile) unusedConnection(t *testing.T) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.d.info.Endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("unused connection: %v, want it closed by the server", err)
	}
	if len(b) > 0 {
		t.Fatalf("unused connection got %q, want no answer", b)
	}
	if d := time.Since(start); d < time.Second || d > 8*time.Second {
		t.Fatalf("unused connection closed after %v, want about the 2s header timeout", d)
	}
	h.serves(t)
}

// stalledBody: a client that stops sending mid-body gets RequestTimeout
// at the read timeout (3s here), and nothing is stored.
func (h *hostile) stalledBody(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(make([]byte, 2<<20)) // 2 of the 4 MiB announced, then silence
	start := time.Now()
	got := h.send(t, raw{method: "PUT", path: "/hostile/stalled", length: 4 << 20, body: pr})
	want(t, "stalled body", got, 400, "RequestTimeout")
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("stalled body answered after %v", d)
	}
	h.absent(t, "hostile", "stalled")
	h.serves(t)
}

// hugeHeaders: a 20 KB key or 3000 headers answer 400 (the header limit),
// never 500.
func (h *hostile) hugeHeaders(t *testing.T) {
	got := h.send(t, raw{method: "PUT", path: "/hostile/" + strings.Repeat("k", 20000), length: 1, body: strings.NewReader("x")})
	want(t, "20 KB key", got, 400, "RequestHeaderSectionTooLarge")
	lines := make([]string, 3000)
	for i := range lines {
		lines[i] = fmt.Sprintf("X-H-%d: v", i)
	}
	got = h.send(t, raw{method: "GET", path: "/hostile/keep", lines: lines, length: -1})
	want(t, "3000 headers", got, 400, "RequestHeaderSectionTooLarge")
	h.serves(t)
}

// badFraming: malformed or ambiguous body framing is refused before the
// body is read; the message never quotes the request.
func (h *hostile) badFraming(t *testing.T) {
	got := h.send(t, raw{method: "PUT", path: "/hostile/neg", lines: []string{"Content-Length: -5"}, length: -1})
	want(t, "Content-Length: -5", got, 400, "BadRequest")
	if strings.Contains(got.body, "AWS4-HMAC-SHA256") || strings.Contains(got.body, "Signature=") || strings.Contains(got.body, "Authorization") {
		t.Fatalf("the error echoes the request's headers: %s", got.body)
	}
	got = h.send(t, raw{method: "PUT", path: "/hostile/twolen", lines: []string{"Content-Length: 3", "Content-Length: 5"}, length: -1, body: strings.NewReader("abcde")})
	want(t, "two Content-Lengths", got, 400, "BadRequest")
	got = h.send(t, raw{method: "PUT", path: "/hostile/clte", lines: []string{"Content-Length: 3", "Transfer-Encoding: chunked"}, length: -1, body: strings.NewReader("3\r\nabc\r\n0\r\n\r\n")})
	want(t, "Content-Length and Transfer-Encoding", got, 400, "BadRequest")
	got = h.send(t, raw{method: "PUT", path: "/hostile/gzipte", lines: []string{"Transfer-Encoding: gzip, chunked"}, length: -1})
	want(t, "Transfer-Encoding gzip", got, 501, "NotImplemented")
	got = h.send(t, raw{method: "PUT", path: "/hostile/nolen", length: -1, body: strings.NewReader("body without a length")})
	want(t, "PUT without Content-Length", got, 411, "MissingContentLength")
	for _, k := range []string{"neg", "twolen", "clte", "gzipte", "nolen"} {
		h.absent(t, "hostile", k)
	}
	h.serves(t)
}

// earlyRefusal: a PUT refused before its body is read (here, a bad
// signature) gets its S3 error, not a connection reset, when the client
// writes the whole body before it reads the answer, as Go's net/http and
// the SDKs do: the gateway's connection lingers (connguard's Linger).
func (h *hostile) earlyRefusal(t *testing.T) {
	host := strings.TrimPrefix(h.d.info.Endpoint, "http://")
	req, err := http.NewRequest("PUT", h.d.info.Endpoint+"/hostile/refused", nil)
	if err != nil {
		t.Fatal(err)
	}
	sigv4.Sign(req, h.d.info.AccessKey, "not-the-secret", "us-east-1", time.Now(), sigv4.UnsignedPayload)
	conn, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 12 << 20
	var b strings.Builder
	fmt.Fprintf(&b, "PUT /hostile/refused HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", host, size)
	for k, vs := range req.Header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n")
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(conn, io.LimitReader(zeroReader{}, size)); err != nil {
		t.Fatalf("writing the body of a refused PUT: %v (the gateway closed without reading it)", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("reading the answer to a refused PUT: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := codeRE.FindStringSubmatch(string(body)); resp.StatusCode != 403 || m == nil || m[1] != "SignatureDoesNotMatch" {
		t.Fatalf("refused PUT: %d %s, want 403 SignatureDoesNotMatch", resp.StatusCode, body)
	}
	h.absent(t, "hostile", "refused")
	h.serves(t)
}

// xmlBodies: XML bodies are read through a 2 MiB limit and never
// decompressed, whatever Content-Encoding says.
func (h *hostile) xmlBodies(t *testing.T) {
	// 512 MiB of zeros in about half a megabyte: 64 gzip members of 8 MiB
	// each (a gzip stream may hold many; decoders read them all).
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zw.Write(make([]byte, 8<<20))
	zw.Close()
	bomb := bytes.NewBuffer(bytes.Repeat(member.Bytes(), 64))
	got := h.send(t, raw{method: "PUT", path: "/hostile?acl", hdr: map[string]string{"Content-Encoding": "gzip"},
		payload: sha(bomb.Bytes()), length: int64(bomb.Len()), body: bytes.NewReader(bomb.Bytes())})
	want(t, fmt.Sprintf("?acl with %d KB of gzip", bomb.Len()>>10), got, 400, "MalformedXML")
	got = h.send(t, raw{method: "PUT", path: "/hostile?acl", length: 200 << 20, body: io.LimitReader(zeroReader{}, 200<<20)})
	if got.err == nil {
		want(t, "?acl with a plain 200 MiB body", got, 400, "MalformedXML")
	} else {
		t.Logf("200 MiB ?acl body: connection reset before the answer was read (%v)", got.err)
	}
	if hwm := h.peakRSS(t); hwm >= 256<<20 {
		t.Fatalf("gateway peak RSS %d MiB after the XML bombs", hwm>>20)
	}
	h.serves(t)
}

// heldBodies: many connections that each send all but the last byte of
// a 2 MiB XML body share one memory budget (--body-memory, 32 MiB): the
// gateway stays small, every one is answered (SlowDown past the budget,
// RequestTimeout for the held ones), and it serves as before. Each used to
// hold its body: 400 of them took the gateway to 1 GiB.
func (h *hostile) heldBodies(t *testing.T) {
	const n, size = 300, 2 << 20
	hold := make(chan struct{})
	replies := make([]reply, n)
	// One buffer for every body: 300 copies were 600 MiB for the test
	// process to fill and collect while the gateway is timed.
	spaces := bytes.Repeat([]byte(" "), size-1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := io.MultiReader(bytes.NewReader(spaces), blockUntil(hold))
			replies[i] = h.send(t, raw{method: "PUT", path: "/hostile?acl", length: size, body: body, from: fmt.Sprintf("127.0.0.%d", 6+i%3)})
		})
	}
	wg.Wait()
	close(hold)
	codes, unconnected := map[string]int{}, 0
	for _, r := range replies {
		var op *net.OpError
		switch {
		case errors.As(r.err, &op) && op.Op == "dial":
			unconnected++ // the accept backlog overflowed
		case r.err != nil:
			codes[fmt.Sprintf("no answer: %v (after %.1fs)", r.err, r.after.Seconds())]++
		default:
			codes[fmt.Sprintf("%d %s", r.status, r.code)]++
		}
	}
	t.Logf("%d connections each holding 2 MiB - 1 of a PUT ?acl body: %v; %d could not connect", n, codes, unconnected)
	for c := range codes {
		if c != "503 SlowDown" && c != "400 RequestTimeout" {
			t.Errorf("a held body got %s, want 503 SlowDown or 400 RequestTimeout", c)
		}
	}
	if unconnected > n/2 {
		t.Fatalf("%d of %d connections could not connect", unconnected, n)
	}
	hwm := h.peakRSS(t)
	t.Logf("gateway peak RSS so far: %d MiB", hwm>>20)
	if hwm >= 256<<20 {
		t.Fatalf("gateway peak RSS %d MiB with %d held XML bodies", hwm>>20, n)
	}
	h.serves(t)
}

// slowReaders: GETs of a large object whose clients read nothing share
// one read budget (--read-memory, 64 MiB): the gateway stays small. Each
// used to hold up to three stripes until its write timeout: 100 of them
// took the gateway to 1 GiB.
func (h *hostile) slowReaders(t *testing.T) {
	const n, size = 100, 24 << 20
	put(t, h.c, "hostile", "slow-read", randomData(size, 5), minio.PutObjectOptions{DisableMultipart: true})
	req, _ := http.NewRequest(http.MethodGet, h.d.info.Endpoint+"/hostile/slow-read", nil)
	sigv4.Sign(req, h.d.info.AccessKey, h.d.info.SecretKey, "us-east-1", time.Now(), sigv4.UnsignedPayload)
	var head bytes.Buffer
	fmt.Fprintf(&head, "GET /hostile/slow-read HTTP/1.1\r\nHost: %s\r\n", req.URL.Host)
	req.Header.Write(&head)
	head.WriteString("\r\n")
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.0.%d", 9+i%3))}
		c, err := d.Dial("tcp", req.URL.Host)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write(head.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	// Every GET is streaming once its response line is in; then the
	// read-ahead of each would fill within moments.
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := bufio.NewReaderSize(c, 16).ReadString('\n')
		if err != nil || !strings.Contains(line, " 200 ") {
			t.Fatalf("GET %d: %q %v", i, line, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if rss := h.peakRSS(t); rss >= 256<<20 {
			t.Fatalf("gateway peak RSS %d MiB with %d GETs whose clients read nothing", rss>>20, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d GETs of %d MiB whose clients read nothing: gateway peak RSS so far %d MiB", n, size>>20, h.peakRSS(t)>>20)
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	h.serves(t)
	if got := get(t, h.c, "hostile", "slow-read", minio.GetObjectOptions{}); len(got) != size {
		t.Fatalf("GET slow-read after the slow readers left: %d bytes", len(got))
	}
	h.c.RemoveObject(ctx(t), "hostile", "slow-read", minio.RemoveObjectOptions{})
}

// blockUntil is a reader that blocks until done is closed, then ends.
type blockUntil chan struct{}

func (b blockUntil) Read([]byte) (int, error) { <-b; return 0, io.EOF }

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// digests: XML bodies are checked against Content-MD5 and checksums, and
// DeleteObjects needs one, as in S3. Nothing is deleted by a bad one.
func (h *hostile) digests(t *testing.T) {
	put(t, h.c, "hostile", "victim", []byte("victim"), minio.PutObjectOptions{})
	body := []byte(`<Delete><Object><Key>victim</Key></Object></Delete>`)
	b64md5 := func(b []byte) string { s := md5.Sum(b); return base64.StdEncoding.EncodeToString(s[:]) }
	send := func(hdr map[string]string) reply {
		return h.send(t, raw{method: "POST", path: "/hostile?delete", hdr: hdr, payload: sha(body), length: int64(len(body)), body: bytes.NewReader(body)})
	}
	want(t, "DeleteObjects without Content-MD5", send(nil), 400, "InvalidRequest")
	want(t, "DeleteObjects with a wrong Content-MD5", send(map[string]string{"Content-MD5": b64md5([]byte("other"))}), 400, "BadDigest")
	want(t, "DeleteObjects with a wrong CRC32", send(map[string]string{"x-amz-checksum-crc32": "AAAAAA=="}), 400, "BadDigest")
	if got := get(t, h.c, "hostile", "victim", minio.GetObjectOptions{}); string(got) != "victim" {
		t.Fatalf("victim after refused deletes: %q", got)
	}
	if got := send(map[string]string{"Content-MD5": b64md5(body)}); got.status != 200 || !strings.Contains(got.body, "<Deleted>") {
		t.Fatalf("DeleteObjects with the right Content-MD5: %d %s", got.status, got.body)
	}
	h.absent(t, "hostile", "victim")

	// CompleteMultipartUpload with a wrong Content-MD5 completes nothing.
	core := minio.Core{Client: h.c}
	id, err := core.NewMultipartUpload(ctx(t), "hostile", "mpu", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	part, err := core.PutObjectPart(ctx(t), "hostile", "mpu", id, 1, bytes.NewReader([]byte("part")), 4, minio.PutObjectPartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cbody := []byte(fmt.Sprintf(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part></CompleteMultipartUpload>`, part.ETag))
	got := h.send(t, raw{method: "POST", path: "/hostile/mpu?uploadId=" + url.QueryEscape(id), hdr: map[string]string{"Content-MD5": b64md5([]byte("x"))},
		payload: sha(cbody), length: int64(len(cbody)), body: bytes.NewReader(cbody)})
	want(t, "CompleteMultipartUpload with a wrong Content-MD5", got, 400, "BadDigest")
	h.absent(t, "hostile", "mpu")
	core.AbortMultipartUpload(ctx(t), "hostile", "mpu", id)

	// A bucket policy (JSON, read whole like the XML bodies) is checked
	// too, and read through its 20 KiB limit.
	pol := []byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::hostile/*"}]}`)
	got = h.send(t, raw{method: "PUT", path: "/hostile?policy", hdr: map[string]string{"Content-MD5": b64md5([]byte("other"))},
		payload: sha(pol), length: int64(len(pol)), body: bytes.NewReader(pol)})
	want(t, "PutBucketPolicy with a wrong Content-MD5", got, 400, "BadDigest")
	big := io.LimitReader(zeroReader{}, 64<<20)
	got = h.send(t, raw{method: "PUT", path: "/hostile?policy", length: 64 << 20, body: big})
	if got.err == nil {
		want(t, "PutBucketPolicy of 64 MiB", got, 400, "MalformedPolicy")
	}
	if p, err := h.c.GetBucketPolicy(ctx(t), "hostile"); p != "" || err != nil {
		t.Fatalf("bucket policy after refused PUTs: %q %v", p, err)
	}
	h.serves(t)
}

// keys: keys are UTF-8 (else 400 InvalidURI, never a silent rename), with
// the XML-illegal controls refused alike on PUT, GET, LIST and DELETE,
// and the 1024-byte limit counted in bytes.
func (h *hostile) keys(t *testing.T) {
	for _, k := range []string{"x%FF", "x%FE", "nul%00key", "ctl%01key"} {
		got := h.send(t, raw{method: "PUT", path: "/hostile/" + k, payload: sha([]byte("v")), length: 1, body: strings.NewReader("v")})
		want(t, "PUT "+k, got, 400, "InvalidURI")
		for _, m := range []string{"GET", "HEAD", "DELETE"} {
			got = h.send(t, raw{method: m, path: "/hostile/" + k, length: -1})
			if got.err != nil || got.status != 400 {
				t.Fatalf("%s %s: %d %v, want 400", m, k, got.status, got.err)
			}
		}
	}
	want(t, "LIST prefix %FF", h.send(t, raw{method: "GET", path: "/hostile?list-type=2&prefix=%FF", length: -1}), 400, "InvalidURI")
	// Nothing was stored under a replacement character either.
	for o := range h.c.ListObjects(ctx(t), "hostile", minio.ListObjectsOptions{Recursive: true}) {
		if strings.ContainsRune(o.Key, '\uFFFD') || strings.ContainsRune(o.Key, 0) {
			t.Fatalf("listing holds %q", o.Key)
		}
	}
	longest := strings.Repeat("é", 512) // 1024 bytes, 512 characters
	want(t, "1025-byte key", h.send(t, raw{method: "PUT", path: "/hostile/a" + url.PathEscape(longest), payload: sha([]byte("v")), length: 1, body: strings.NewReader("v")}), 400, "KeyTooLongError")
	put(t, h.c, "hostile", longest, []byte("longest"), minio.PutObjectOptions{})
	if got := get(t, h.c, "hostile", longest, minio.GetObjectOptions{}); string(got) != "longest" {
		t.Fatalf("1024-byte key: %q", got)
	}
	found := false
	for o := range h.c.ListObjects(ctx(t), "hostile", minio.ListObjectsOptions{Prefix: "é"}) {
		found = found || o.Key == longest
	}
	if !found {
		t.Fatal("the 1024-byte key is not listed")
	}
	if err := h.c.RemoveObject(ctx(t), "hostile", longest, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	h.absent(t, "hostile", longest)
	// A NUL in a DeleteObjects key is malformed XML, not a deletion.
	body := []byte(`<Delete><Object><Key>keep&#0;</Key></Object></Delete>`)
	s := md5.Sum(body)
	want(t, "DeleteObjects of a key with NUL", h.send(t, raw{method: "POST", path: "/hostile?delete", hdr: map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString(s[:])},
		payload: sha(body), length: int64(len(body)), body: bytes.NewReader(body)}), 400, "MalformedXML")
	h.serves(t)
}

// shardFiles counts the shard files on every dev shard server.
func (h *hostile) shardFiles(t *testing.T) int {
	t.Helper()
	n := 0
	dirs := []string{h.spiedDir}
	for _, s := range h.d.info.Shards {
		dirs = append(dirs, s.Data)
	}
	for _, dir := range dirs {
		filepath.WalkDir(filepath.Join(dir, "shards"), func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				n++
			}
			return nil
		})
	}
	return n
}

// payloadHash: bodies that do not match their signed x-amz-content-sha256
// store nothing: not a CreateBucket with a body past 64 KiB, not a striped
// object (whose shards used to stay behind as committed orphans).
func (h *hostile) payloadHash(t *testing.T) {
	conf := []byte("<CreateBucketConfiguration>" + strings.Repeat(" ", 70000) + "</CreateBucketConfiguration>")
	sent := bytes.Replace(conf, []byte("  "), []byte("xx"), 1)
	got := h.send(t, raw{method: "PUT", path: "/hostile-bucket", payload: sha(conf), length: int64(len(sent)), body: bytes.NewReader(sent)})
	want(t, "CreateBucket with a 70 KB body not matching its hash", got, 400, "XAmzContentSHA256Mismatch")
	if ok, err := h.c.BucketExists(ctx(t), "hostile-bucket"); ok || err != nil {
		t.Fatalf("bucket created by a mismatched body: %v %v", ok, err)
	}

	before := h.shardFiles(t)
	data := randomData(3<<20, 17)
	sent = append([]byte("X"), data[1:]...)
	got = h.send(t, raw{method: "PUT", path: "/hostile/mismatch", payload: sha(data), length: int64(len(sent)), body: bytes.NewReader(sent)})
	want(t, "striped PUT not matching its hash", got, 400, "XAmzContentSHA256Mismatch")
	h.absent(t, "hostile", "mismatch")
	waitFor(t, 15*time.Second, "no shard file of the failed PUT to remain", func() bool { return h.shardFiles(t) == before })
	h.serves(t)
}

// presigned: a presigned URL with a second X-Amz-Signature is refused.
func (h *hostile) presigned(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, h.d.info.Endpoint+"/hostile/keep", nil)
	sigv4.Presign(req, h.d.info.AccessKey, h.d.info.SecretKey, "us-east-1", time.Now(), time.Minute)
	resp, err := http.Get(req.URL.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("presigned URL: %d", resp.StatusCode)
	}
	u := req.URL.String() + "&X-Amz-Signature=" + strings.Repeat("0", 64)
	got := h.send(t, raw{method: "GET", path: strings.TrimPrefix(u, h.d.info.Endpoint), unsigned: true, length: -1})
	want(t, "presigned URL with two signatures", got, 400, "AuthorizationQueryParametersError")
	h.serves(t)
}

// checksums: a checksum algorithm regen does not compute is refused.
func (h *hostile) checksums(t *testing.T) {
	for _, hdr := range []map[string]string{{"x-amz-checksum-algorithm": "MD7"}, {"x-amz-sdk-checksum-algorithm": "BLAKE3"}, {"x-amz-checksum-md5": "AAAA"}} {
		got := h.send(t, raw{method: "PUT", path: "/hostile/algo", hdr: hdr, payload: sha([]byte("zz")), length: 2, body: strings.NewReader("zz")})
		want(t, fmt.Sprint("PUT with ", hdr), got, 400, "InvalidRequest")
	}
	h.absent(t, "hostile", "algo")
	h.serves(t)
}

// perAddressCap: one address cannot take more than its share (200 here):
// the rest are answered 503 SlowDown while others are served.
func (h *hostile) perAddressCap(t *testing.T) {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	for range 260 {
		c, err := d.Dial("tcp", strings.TrimPrefix(h.d.info.Endpoint, "http://"))
		if err != nil {
			t.Fatalf("dial from 127.0.0.2: %v", err)
		}
		conns = append(conns, c)
	}
	slowDown := 0
	data, _ := readAll(conns, time.Second)
	for _, b := range data {
		if bytes.Contains(b, []byte("503 Service Unavailable")) && bytes.Contains(b, []byte("<Code>SlowDown</Code>")) {
			slowDown++
		}
	}
	if slowDown < 50 {
		t.Fatalf("%d of 260 connections from one address answered SlowDown, want at least the 60 over the cap of 200 (some may have been read as they closed)", slowDown)
	}
	t.Logf("260 connections from one address: %d answered SlowDown", slowDown)
	h.serves(t) // from 127.0.0.1, while 127.0.0.2 holds its 200
}

// descriptorFlood: with the gateway's descriptor limit lowered, a flood
// of idle connections cannot stop it: the accept loop backs off, idle
// connections are reclaimed, clients hear SlowDown, and a normal client
// gets through; afterwards it serves as before.
func (h *hostile) descriptorFlood(t *testing.T) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", h.pid))
	if err != nil {
		t.Fatal(err)
	}
	var old unix.Rlimit
	if err := unix.Prlimit(h.pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		t.Fatal(err)
	}
	limit := uint64(len(fds) + 60)
	if err := unix.Prlimit(h.pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: old.Max}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	t.Logf("gateway holds %d descriptors; limit lowered to %d", len(fds), limit)
	restored := false
	restore := func() {
		if !restored {
			unix.Prlimit(h.pid, unix.RLIMIT_NOFILE, &old, nil)
			restored = true
		}
	}
	defer restore()

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Dial in batches until the gateway has had no free descriptor below
	// its limit after a few batches (then connections wait in the backlog
	// and its accepts fail with EMFILE). A fixed number of
	// connections is not enough: pooled connections to the shard servers
	// close during the flood, and the flood's own connections take the
	// descriptors they free, so the limit may never be reached (the
	// flake this loop replaces: 320 connections, no EMFILE).
	const batch, maxConns, fullBatches = 20, 2000, 3
	full, dialed := 0, 0
	for dialed < maxConns && full < fullBatches {
		for range batch {
			d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.0.%d", 3+dialed%3))}}
			dialed++
			c, err := d.Dial("tcp", strings.TrimPrefix(h.d.info.Endpoint, "http://"))
			if err != nil {
				continue // the backlog is full: that is the point
			}
			conns = append(conns, c)
		}
		time.Sleep(50 * time.Millisecond) // let the gateway accept them
		if freeDescriptors(t, h.pid, limit) == 0 {
			full++
		}
	}
	t.Logf("dialed %d flood connections (%d connected); the gateway's descriptors were all in use after %d of the batches", dialed, len(conns), full)
	// A normal client gets through during the flood (its SDK retries
	// SlowDown answers).
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := h.c.StatObject(ctx(t), "hostile", "keep", minio.StatObjectOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no normal request got through the flood in 30s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := syscall.Kill(h.pid, 0); err != nil {
		t.Fatalf("gateway died in the flood: %v", err)
	}
	answered, closed := 0, 0
	// NB: seconds, not a fraction of one: on a loaded machine the
	// gateway may take that long to reach the flood's connections.
	data, errs := readAll(conns, 5*time.Second)
	for i, b := range data {
		switch {
		case bytes.Contains(b, []byte("<Code>SlowDown</Code>")):
			answered++
		case errs[i] == nil:
			closed++ // reclaimed: EOF
		}
	}
	t.Logf("flood of %d connections: %d answered SlowDown, %d closed as idle", len(conns), answered, closed)
	if answered+closed == 0 {
		t.Fatal("no flood connection was refused or reclaimed")
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	restore()
	// The gateway really ran out of descriptors (and said so).
	if n := h.metric(t, "regen_s3_accept_fd_exhausted_total"); n < 1 {
		t.Fatalf("regen_s3_accept_fd_exhausted_total = %v: the flood never exhausted the descriptors", n)
	}
	t.Logf("listener: %v accepts hit EMFILE, %v connections refused, %v reclaimed",
		h.metric(t, "regen_s3_accept_fd_exhausted_total"), h.metric(t, "regen_s3_connections_refused_total"), h.metric(t, "regen_s3_connections_reclaimed_total"))
	h.serves(t)
}

// freeDescriptors counts the descriptor numbers below limit that process
// pid does not use: 0 means its next open or accept fails with EMFILE.
func freeDescriptors(t *testing.T, pid int, limit uint64) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	used := 0
	for _, fd := range fds {
		if n, err := strconv.ParseUint(fd.Name(), 10, 64); err == nil && n < limit {
			used++
		}
	}
	return int(limit) - used
}

// metric reads one unlabelled metric from the gateway's /metrics.
func (h *hostile) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get(h.d.info.Endpoint + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// concurrentUploads: many large uploads at once stay within the memory
// bound too (their stripe buffers share one budget).
func (h *hostile) concurrentUploads(t *testing.T) {
	const n, size = 16, 24 << 20
	data := randomData(size, 99)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := h.c.PutObject(ctx(t), "hostile", fmt.Sprintf("big-%d", i), bytes.NewReader(data), size, minio.PutObjectOptions{DisableMultipart: true}); err != nil {
				t.Errorf("upload %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if hwm := h.peakRSS(t); hwm >= 256<<20 {
		t.Fatalf("gateway peak RSS %d MiB after %d concurrent %d MiB uploads", hwm>>20, n, size>>20)
	}
	for i := range n {
		h.c.RemoveObject(ctx(t), "hostile", fmt.Sprintf("big-%d", i), minio.RemoveObjectOptions{})
	}
	h.serves(t)
}

// peakRSS is the gateway's (regen dev process's) peak resident set.
func (h *hostile) peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// privateFiles: data directories are the owner's alone.
func (h *hostile) privateFiles(t *testing.T) {
	filepath.WalkDir(h.d.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := e.Info()
		if err == nil && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: readable by others", p, fi.Mode().Perm())
		}
		return nil
	})
}

// spiedShard is a shard server whose advertised address is a logging
// proxy in front of it.
type spiedShard struct {
	addr  string // the real listener
	proxy *wireTap
}

// startSpiedShard starts a shard server that joins the dev cluster with
// the proxy's address as its own, and short header and idle timeouts.
func (h *hostile) startSpiedShard() *spiedShard {
	t := h.t
	addr := freeAddr(t)
	tap := newWireTap(t, addr)
	dir := t.TempDir()
	h.spiedDir = dir
	cmd := exec.Command(regenBin, "shard", "--data", dir, "--listen", addr, "--advertise-http", tap.addr,
		"--gossip", freeAddr(t), "--join", h.d.info.Gateways[0].Gossip, "--gossip-profile", "local",
		"--read-header-timeout", "2s", "--idle-timeout", "2s")
	cmd.Env = append(os.Environ(), "REGEN_CLUSTER_SECRET="+h.d.info.Secret)
	logf, err := os.Create(filepath.Join(dir, "..", "spied-shard.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
		logf.Close()
	})
	waitFor(t, 60*time.Second, "the spied shard server to join", func() bool {
		return h.liveShards(t) == len(h.d.info.Shards)+1
	})
	return &spiedShard{addr: addr, proxy: tap}
}

// liveShards counts the shard servers the gateway sees alive.
func (h *hostile) liveShards(t *testing.T) int {
	out, err := exec.Command(regenBin, "admin", "status", "--json", "--endpoint", h.d.info.Endpoint,
		"--access-key", h.d.info.AccessKey, "--secret-key", h.d.info.SecretKey).Output()
	if err != nil {
		return 0
	}
	var st struct {
		Nodes []struct {
			Role  string `json:"r"`
			State string `json:"state"`
		} `json:"nodes"`
	}
	if json.Unmarshal(out, &st) != nil {
		return 0
	}
	n := 0
	for _, nd := range st.Nodes {
		if nd.Role == "shard" && nd.State == "alive" {
			n++
		}
	}
	return n
}

// readAll reads what each connection says within wait, all at once.
func readAll(conns []net.Conn, wait time.Duration) (data [][]byte, errs []error) {
	data, errs = make([][]byte, len(conns)), make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(wait))
			data[i], errs[i] = io.ReadAll(c)
		})
	}
	wg.Wait()
	return data, errs
}

// shardListener: a shard server closes connections that send nothing
// (header timeout) and keep-alive connections left idle (idle timeout),
// which it never did before.
func (h *hostile) shardListener(t *testing.T, s *spiedShard) {
	silent, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	silent.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(silent); err != nil {
		t.Fatalf("silent connection to a shard server: %v, want closed", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("silent connection closed after %v (header timeout 2s)", d)
	}
	idle, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", shardrpc.PathHealth)
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health probe: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	start = time.Now()
	idle.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle keep-alive connection to a shard server: %v, want closed", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("idle shard connection closed after %v (idle timeout 2s)", d)
	}
}

// capturedShardRequest: a request the gateway sent to a shard server,
// captured on the wire, carries no reusable secret: replayed at once, or
// after the window, or altered, it is refused, and the secret is nowhere
// in the capture.
func (h *hostile) capturedShardRequest(t *testing.T, s *spiedShard) {
	var captured []byte
	for i := 0; captured == nil; i++ {
		if i == 50 {
			t.Fatal("no manifest write reached the spied shard server in 50 PUTs")
		}
		// NB: only this PUT's requests: an older one may be past the
		// window already.
		mark := s.proxy.mark()
		put(t, h.c, "hostile", fmt.Sprintf("spied-%d", i), []byte("small object, stored in its manifest"), minio.PutObjectOptions{})
		// NB: a client's manifest write carries its lease fence.
		captured = s.proxy.request(mark, "POST "+shardrpc.PathManifests+"?"+shardrpc.ParamLease+"=")
	}
	if bytes.Contains(captured, []byte(h.d.info.Secret)) {
		t.Fatal("the captured request contains the cluster secret")
	}
	if !bytes.Contains(captured, []byte(shardrpc.HeaderAuth+": v1 ")) {
		t.Fatalf("captured request has no signature header:\n%s", captured)
	}
	head, _, _ := bytes.Cut(captured, []byte("\r\n\r\n"))
	t.Logf("captured on the wire (gateway -> shard server), headers:\n%s", head)
	// replay sends req to the shard server itself and checks it is
	// refused as Unauthorized for the reason given.
	replay := func(what string, req []byte, reason string) {
		t.Helper()
		conn, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Write(req)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("%s: %d %s", what, resp.StatusCode, bytes.TrimSpace(body))
		if resp.StatusCode != 401 || resp.Header.Get(shardrpc.HeaderCode) != shardrpc.CodeUnauthorized || !bytes.Contains(body, []byte(reason)) {
			t.Fatalf("%s: %d %s, want 401 Unauthorized (%s)", what, resp.StatusCode, body, reason)
		}
	}
	replay("replayed at once", captured, "nonce already used")
	altered := append([]byte(nil), captured...)
	altered[len(altered)-2] ^= 1 // one bit of the body
	// (Its nonce is spent too, so that is the reason given; a fresh
	// nonce cannot be signed without the key.)
	replay("one bit of the body altered", altered, "")
	// After the window (30 s from the time it was signed at) the nonce
	// is forgotten and the time refuses it.
	m := regexp.MustCompile(shardrpc.HeaderAuth + `: v1 t=(\d+) `).FindSubmatch(captured)
	if m == nil {
		t.Fatalf("no signing time in the captured request")
	}
	ms, _ := strconv.ParseInt(string(m[1]), 10, 64)
	if wait := time.Until(time.UnixMilli(ms).Add(shardrpc.DefaultAuthWindow + 2*time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	replay("replayed after the 30 s window", captured, "request time")
	h.serves(t)
}

// wireTap is a TCP proxy that records every byte clients send.
type wireTap struct {
	addr string
	mu   sync.Mutex
	sent [][]byte // per connection, client to server
}

func newWireTap(t *testing.T, target string) *wireTap {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wireTap{addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go w.pipe(c, target)
		}
	}()
	return w
}

func (w *wireTap) pipe(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	w.mu.Lock()
	i := len(w.sent)
	w.sent = append(w.sent, nil)
	w.mu.Unlock()
	// NB: a close by the server reaches the client, as on a real network
	// (else the client would write its next request into a dead pipe).
	go func() { io.Copy(c, up); c.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			w.mu.Lock()
			w.sent[i] = append(w.sent[i], buf[:n]...)
			w.mu.Unlock()
			if _, err := up.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// mark returns how much of each connection has been captured so far.
func (w *wireTap) mark() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make([]int, len(w.sent))
	for i, s := range w.sent {
		m[i] = len(s)
	}
	return m
}

// request returns the first whole request starting with prefix (request
// line and method/path) captured after mark, bytes as sent, or nil.
func (w *wireTap) request(mark []int, prefix string) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, s := range w.sent {
		if i < len(mark) {
			s = s[mark[i]:]
		}
		for off := bytes.Index(s, []byte(prefix)); off >= 0; {
			rest := s[off:]
			br := bufio.NewReader(bytes.NewReader(rest))
			req, err := http.ReadRequest(br)
			if err == nil {
				_, err = io.Copy(io.Discard, req.Body)
			}
			if err == nil {
				n := len(rest) - br.Buffered()
				return append([]byte(nil), rest[:n]...)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				break // still arriving
			}
			next := bytes.Index(rest[1:], []byte(prefix))
			if next < 0 {
				break
			}
			off += 1 + next
		}
	}
	return nil
}
