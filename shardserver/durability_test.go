package shardserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// requests returns how many requests of route the server has finished.
func (e *testEnv) requests(t *testing.T, route string) uint64 {
	t.Helper()
	var n uint64
	for _, code := range []string{"200", "400", "500"} {
		h := e.srv.m.requestSeconds.WithLabelValues(route, code)
		n += dtoOf(h.(prometheus.Metric)).GetHistogram().GetSampleCount()
	}
	return n
}

// waitRequests waits until route has finished n requests: the only way to
// know the server is done with a connection the client abandoned.
func (e *testEnv) waitRequests(t *testing.T, route string, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.requests(t, route) < n {
		if time.Now().After(deadline) {
			t.Fatalf("server never finished %d %s requests", n, route)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// assertInvisible checks that shard id.0 does not exist and that no temp
// file was left behind.
func (e *testEnv) assertInvisible(t *testing.T, id string) {
	t.Helper()
	if e.exists(t, id, 0) {
		t.Fatalf("shard %s.0 of an aborted PUT is visible", id)
	}
	ents, err := os.ReadDir(e.srv.shards.dir(id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	for _, d := range ents {
		if strings.Contains(d.Name(), id) {
			t.Fatalf("file %s left behind", d.Name())
		}
	}
}

func TestCutShortPutNeverVisible(t *testing.T) {
	e := newEnv(t, nil)
	data := bytes.Repeat([]byte("x"), 3*testBlock+100)
	for i, head := range []string{
		// Declared length, then fewer bytes and a closed connection.
		fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(data), data[:len(data)/2]),
		// Chunked: one whole chunk, then a closed connection mid-stream.
		fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s", 2*testBlock, data[:2*testBlock], testBlock, data[:10]),
	} {
		id := fmt.Sprintf("cut%d", i)
		conn, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: x\r\n%s: %s\r\n%s", shardrpc.ShardPath(id, 0), shardrpc.HeaderAuth, streamAuth(t, "x", shardrpc.ShardPath(id, 0)), head)
		conn.Close()
		e.waitRequests(t, "put_shard", uint64(i+1))
		e.assertInvisible(t, id)
	}
}

func TestCancelledPutNeverVisible(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	go func() {
		pw.Write(bytes.Repeat([]byte("y"), 5*testBlock))
		cancel() // the client gives up mid-body
		// and stops its body too: net/http's RoundTrip returns only once
		// its body read does, so a pipe left open would hang it (as the
		// gateway's senders, which close theirs when the PUT ends).
		pw.CloseWithError(context.Canceled)
	}()
	_, err := e.client.PutShard(ctx, e.addr, "cancelled", 0, pr)
	if err == nil {
		t.Fatal("PutShard succeeded after its context was cancelled")
	}
	e.waitRequests(t, "put_shard", 1)
	e.assertInvisible(t, "cancelled")
}

// faultFS fails one kind of operation on shard files.
type faultFS struct {
	OSFS
	failSync, failRename bool
}

type faultFile struct {
	File
	fs *faultFS
}

var errInjected = errors.New("injected fault")

func (f *faultFS) Create(name string) (File, error) {
	file, err := f.OSFS.Create(name)
	if err != nil {
		return nil, err
	}
	return faultFile{file, f}, nil
}

func (f *faultFS) Rename(o, n string) error {
	if f.failRename {
		return errInjected
	}
	return f.OSFS.Rename(o, n)
}

func (f faultFile) Sync() error {
	if f.fs.failSync {
		return errInjected
	}
	return f.File.Sync()
}

func TestFailedSyncOrRenameNeverVisible(t *testing.T) {
	for _, ff := range []*faultFS{{failSync: true}, {failRename: true}} {
		e := newEnv(t, func(c *Config) { c.FS = ff })
		_, err := e.client.PutShard(context.Background(), e.addr, "faulty", 0, strings.NewReader("data"))
		var re *shardrpc.RemoteError
		if !errors.As(err, &re) || re.Status != 500 {
			t.Fatalf("%+v: PutShard = %v, want a 500", *ff, err)
		}
		e.assertInvisible(t, "faulty")
	}
}

func TestRestartKeepsShardsAndManifests(t *testing.T) {
	dir := t.TempDir()
	id, err := LoadOrCreateNodeID(dir)
	if err != nil {
		t.Fatal(err)
	}
	mod := func(c *Config) { c.DataDir, c.NodeID = dir, id }
	e := newEnv(t, mod)
	e.put(t, "dur", 2, []byte("survives"))
	m := manifest("b", "k", 1, "dur")
	if _, _, err := e.client.PutManifest(context.Background(), e.addr, m); err != nil {
		t.Fatal(err)
	}
	e.srv.Close()
	// A second server over the same directory sees everything; the node ID
	// did not change.
	again, err := LoadOrCreateNodeID(filepath.Clean(dir))
	if err != nil || again != id {
		t.Fatalf("node ID after restart %q %v, want %q", again, err, id)
	}
	e2 := newEnv(t, mod)
	if got, err := e2.get("dur", 2, 0, -1); err != nil || string(got) != "survives" {
		t.Fatalf("shard after restart: %q %v", got, err)
	}
	if got, err := e2.client.GetManifest(context.Background(), e2.addr, "b", "k"); err != nil || got.Version != m.Version {
		t.Fatalf("manifest after restart: %+v %v", got, err)
	}
}

// streamAuth returns the signature header value of a PUT of a streamed
// body to host and path, for requests written by hand on a connection:
// the request is signed by the real transport and captured before it is
// sent.
func streamAuth(t *testing.T, host, path string) string {
	t.Helper()
	var got string
	rt := shardrpc.NewAuthTransport(testSecret, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Get(shardrpc.HeaderAuth)
		return nil, errors.New("captured, not sent")
	}))
	req, _ := http.NewRequest(http.MethodPut, "http://"+host+path, io.NopCloser(strings.NewReader("")))
	req.ContentLength = -1
	rt.RoundTrip(req)
	if got == "" {
		t.Fatal("no signature captured")
	}
	return got
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
