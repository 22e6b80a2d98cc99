package shardserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

const (
	testSecret = "s3cret"
	testNode   = "00112233445566aa"
	testBlock  = 1024
)

type testEnv struct {
	srv    *Server
	client *shardrpc.Client
	addr   string
	url    string
}

func newEnv(t *testing.T, mod func(*Config)) *testEnv {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Secret = testSecret
	cfg.NodeID = testNode
	cfg.BlockSize = testBlock
	cfg.Registerer = prometheus.NewRegistry()
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	return &testEnv{srv: srv, client: shardrpc.New(testSecret, nil), addr: strings.TrimPrefix(ts.URL, "http://"), url: ts.URL}
}

func randBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func crc(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// onlyReader hides the concrete type, so the client cannot learn the length
// and sends the body chunked.
type onlyReader struct{ io.Reader }

func (e *testEnv) put(t *testing.T, id string, idx int, data []byte) {
	t.Helper()
	info, err := e.client.PutShard(context.Background(), e.addr, id, idx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(data)) || info.CRC != crc(data) {
		t.Fatalf("put %s.%d: info %+v, want size %d crc %d", id, idx, info, len(data), crc(data))
	}
}

func (e *testEnv) get(id string, idx int, off, length int64) ([]byte, error) {
	rc, err := e.client.GetShard(context.Background(), e.addr, id, idx, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestShardRoundTripAndRanges(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, size := range []int{0, 1, testBlock - 1, testBlock, testBlock + 1, 5*testBlock + 77} {
		data := randBytes(uint64(size), size)
		id := fmt.Sprintf("f%04d", size)
		// Known length and chunked (unknown length) bodies alike.
		e.put(t, id, 3, data)
		info, err := e.client.PutShard(ctx, e.addr, id, 4, onlyReader{bytes.NewReader(data)})
		if err != nil || info.Size != int64(len(data)) || info.CRC != crc(data) {
			t.Fatalf("chunked put of %d bytes: %+v %v", size, info, err)
		}
		st, err := e.client.StatShard(ctx, e.addr, id, 4)
		if err != nil || st.Size != int64(size) || st.CRC != crc(data) {
			t.Fatalf("stat %d: %+v %v", size, st, err)
		}
		got, err := e.get(id, 3, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("full get of %d bytes: got %d bytes, %v", size, len(got), err)
		}
		// Ranges starting and ending on, before and after block boundaries.
		points := []int64{0, 1, testBlock - 1, testBlock, testBlock + 1, 2*testBlock + 5, int64(size) - 1, int64(size)}
		for _, off := range points {
			for _, end := range points {
				if off < 0 || end < off || end > int64(size) {
					continue
				}
				got, err := e.get(id, 4, off, end-off)
				if err != nil || !bytes.Equal(got, data[off:end]) {
					t.Fatalf("size %d range [%d,%d): got %d bytes, %v", size, off, end, len(got), err)
				}
			}
		}
	}
	if _, err := e.get("f0005", 3, 0, 0); !errors.Is(err, shardrpc.ErrNotFound) {
		t.Fatalf("absent shard: got %v", err)
	}
	_, err := e.get("f0001", 3, 1, 1)
	if !errors.Is(err, shardrpc.ErrBadRequest) {
		t.Fatalf("range past the end: got %v", err)
	}
	if got := counterValue(e.srv.m.shardWrites); got != 12 {
		t.Fatalf("shard writes metric = %v, want 12", got)
	}
}

func TestDeleteShard(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.put(t, "abc", 0, []byte("hello"))
	for range 2 { // deleting twice is fine
		if err := e.client.DeleteShard(ctx, e.addr, "abc", 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.client.StatShard(ctx, e.addr, "abc", 0); !errors.Is(err, shardrpc.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// corrupt flips one byte of a shard file at the given data offset (the byte
// lands in the block that holds that offset).
func (e *testEnv) corrupt(t *testing.T, id string, idx int, dataOff int64) {
	t.Helper()
	p := e.srv.shards.path(id, idx)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	block := dataOff / testBlock
	pos := headerSize + block*(testBlock+blockCRCSize) + dataOff%testBlock
	raw[pos] ^= 0x40
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptFirstBlockIs409(t *testing.T) {
	e := newEnv(t, nil)
	data := randBytes(1, 3*testBlock)
	e.put(t, "c1", 0, data)
	e.corrupt(t, "c1", 0, 10)
	_, err := e.client.GetShard(context.Background(), e.addr, "c1", 0, 0, -1)
	if !errors.Is(err, shardrpc.ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt before any body", err)
	}
	var re *shardrpc.RemoteError
	if !errors.As(err, &re) || re.Status != http.StatusConflict {
		t.Fatalf("got %v, want a 409", err)
	}
	// Blocks that are not touched are not checked: the rest reads fine.
	got, err := e.get("c1", 0, testBlock, -1)
	if err != nil || !bytes.Equal(got, data[testBlock:]) {
		t.Fatalf("read of good blocks: %d bytes, %v", len(got), err)
	}
	if n := counterValue(e.srv.m.checksumFailures); n != 1 {
		t.Fatalf("checksum failures = %v, want 1", n)
	}
}

// TestCorruptMidStream: a block that fails its CRC after good ones ends
// the stream with ErrCorrupt after at most the good prefix: found by the
// client in a framed stream (what shardrpc's client asks for), by the
// server, which says so in the trailer, in an unframed one.
func TestCorruptMidStream(t *testing.T) {
	e := newEnv(t, nil)
	data := randBytes(2, 5*testBlock+10)
	e.put(t, "c2", 1, data)
	e.corrupt(t, "c2", 1, 3*testBlock+7)
	rc, err := e.client.GetShard(context.Background(), e.addr, "c2", 1, 0, -1)
	if err != nil {
		t.Fatalf("first block is good, want a stream: %v", err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if !errors.Is(err, shardrpc.ErrCorrupt) {
		t.Fatalf("got %d bytes and %v, want ErrCorrupt", len(got), err)
	}
	var ne *shardrpc.NodeError
	if !errors.As(err, &ne) || ne.Addr != e.addr {
		t.Fatalf("error does not name the node: %v", err)
	}
	if len(got) > 3*testBlock || !bytes.Equal(got, data[:len(got)]) {
		t.Fatalf("got %d bytes before the error, want at most the good prefix", len(got))
	}

	// Unframed (a client that predates framing): the server checks.
	req := httptest.NewRequest(http.MethodGet, shardrpc.ShardPath("c2", 1)+"?offset=0&length=-1", nil)
	req.SetPathValue("file", "c2")
	req.SetPathValue("idx", "1")
	rec := httptest.NewRecorder()
	e.srv.getShard(rec, req)
	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || res.Trailer.Get(shardrpc.TrailerError) != shardrpc.TrailerCorrupt {
		t.Fatalf("unframed: status %d, trailer %q; want 200 and %q", res.StatusCode, res.Trailer.Get(shardrpc.TrailerError), shardrpc.TrailerCorrupt)
	}
	if len(body) > 3*testBlock || !bytes.Equal(body, data[:len(body)]) {
		t.Fatalf("unframed: %d bytes before the trailer, want at most the good prefix", len(body))
	}
	if n := counterValue(e.srv.m.checksumFailures); n != 1 {
		t.Fatalf("checksum failures = %v, want 1", n)
	}
}

func TestStatCorruptHeader(t *testing.T) {
	e := newEnv(t, nil)
	e.put(t, "h1", 0, []byte("data"))
	p := e.srv.shards.path("h1", 0)
	raw, _ := os.ReadFile(p)
	raw[0] = 'X'
	os.WriteFile(p, raw, 0o644)
	if _, err := e.client.StatShard(context.Background(), e.addr, "h1", 0); !errors.Is(err, shardrpc.ErrCorrupt) {
		t.Fatalf("stat of a bad header: %v", err)
	}
}

func TestBadSecretIs401(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.put(t, "s1", 0, []byte("x"))
	bad := shardrpc.New("wrong", nil)
	checks := map[string]error{}
	_, checks["put"] = bad.PutShard(ctx, e.addr, "s1", 0, strings.NewReader("y"))
	_, checks["get"] = bad.GetShard(ctx, e.addr, "s1", 0, 0, -1)
	_, checks["stat"] = bad.StatShard(ctx, e.addr, "s1", 0)
	checks["delete"] = bad.DeleteShard(ctx, e.addr, "s1", 0)
	_, _, checks["manifest"] = bad.PutManifest(ctx, e.addr, &metadata.Manifest{Bucket: "b", Key: "k"})
	_, checks["stats"] = bad.Stats(ctx, e.addr)
	for op, err := range checks {
		if !errors.Is(err, shardrpc.ErrUnauthorized) {
			t.Errorf("%s with a bad secret: %v", op, err)
		}
	}
	// Nothing was changed by the rejected requests.
	if got, err := e.get("s1", 0, 0, -1); err != nil || string(got) != "x" {
		t.Fatalf("shard after rejected writes: %q %v", got, err)
	}
	// Health probes need no secret.
	resp, err := http.Get(e.url + shardrpc.PathHealth)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestBadShardNamesAre400(t *testing.T) {
	e := newEnv(t, nil)
	for _, p := range []string{
		"/v1/shards/..%2fetc/0", "/v1/shards/a.b/0", "/v1/shards/-ab/0", "/v1/shards/a_b/0",
		"/v1/shards/ab/01", "/v1/shards/ab/256", "/v1/shards/ab/-1", "/v1/shards/ab/x",
		"/v1/shards/" + strings.Repeat("a", 129) + "/0",
	} {
		req, _ := http.NewRequest(http.MethodPut, e.url+p, strings.NewReader("data"))
		resp, err := signedHTTP().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(shardrpc.HeaderCode) != shardrpc.CodeBadRequest {
			t.Errorf("PUT %s: %d %s, want 400 BadRequest", p, resp.StatusCode, resp.Header.Get(shardrpc.HeaderCode))
		}
	}
	// Nothing escaped the shard directory.
	ents, _ := os.ReadDir(e.srv.cfg.DataDir)
	for _, d := range ents {
		if d.Name() != "shards" && d.Name() != "meta" {
			t.Errorf("unexpected entry %s in data dir", d.Name())
		}
	}
	// The client refuses bad names before sending anything.
	if _, err := e.client.PutShard(context.Background(), e.addr, "../x", 0, nil); !errors.Is(err, shardrpc.ErrBadRequest) {
		t.Errorf("client-side validation: %v", err)
	}
}

func TestUnknownRouteIsNotNotFound(t *testing.T) {
	e := newEnv(t, nil)
	req, _ := http.NewRequest(http.MethodGet, e.url+"/v2/whatever", nil)
	resp, err := signedHTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get(shardrpc.HeaderCode) != shardrpc.CodeNoRoute {
		t.Fatalf("code %q, want NoRoute", resp.Header.Get(shardrpc.HeaderCode))
	}
}

func TestStats(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	m := manifest("b", "k", 1, "p1")
	if _, _, err := e.client.PutManifest(ctx, e.addr, m); err != nil {
		t.Fatal(err)
	}
	st, err := e.client.Stats(ctx, e.addr)
	if err != nil {
		t.Fatal(err)
	}
	if st.NodeID != testNode || st.Objects != 1 || st.Bytes != m.Size || st.Shards != 1 || st.DiskFreeBytes <= 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.DataDir, good.Secret, good.NodeID = "/d", "s", testNode
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Config){
		"no dir":      func(c *Config) { c.DataDir = "" },
		"no secret":   func(c *Config) { c.Secret = "" },
		"bad node":    func(c *Config) { c.NodeID = "xyz" },
		"tiny block":  func(c *Config) { c.BlockSize = 16 },
		"huge block":  func(c *Config) { c.BlockSize = MaxBlockSize + 1 },
		"orphan age":  func(c *Config) { c.OrphanAge = time.Second },
		"gc interval": func(c *Config) { c.GCInterval = 0 },
		"settle":      func(c *Config) { c.TombstoneSettle = -time.Second },
	} {
		c := good
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestNodeIDStable(t *testing.T) {
	dir := t.TempDir()
	id, err := LoadOrCreateNodeID(dir)
	if err != nil || !validNodeID(id) {
		t.Fatalf("%q %v", id, err)
	}
	again, err := LoadOrCreateNodeID(dir)
	if err != nil || again != id {
		t.Fatalf("second load %q %v, want %q", again, err, id)
	}
	other, _ := LoadOrCreateNodeID(t.TempDir())
	if other == id {
		t.Fatal("two data dirs got the same node ID")
	}
	os.WriteFile(dir+"/node-id", []byte("garbage\n"), 0o644)
	if _, err := LoadOrCreateNodeID(dir); err == nil {
		t.Fatal("a damaged node-id file was accepted")
	}
}

func dtoOf(m prometheus.Metric) *dto.Metric {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	return &d
}

// signedHTTP is a plain HTTP client whose requests are signed with the
// test secret, for requests the shardrpc.Client cannot make.
func signedHTTP() *http.Client {
	return &http.Client{Transport: shardrpc.NewAuthTransport(testSecret, nil)}
}
