package shardrpc

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/regen-s3/regen/metadata"
)

// fake serves h behind the signature check and returns a client and
// address.
func fake(t *testing.T, h http.HandlerFunc) (*Client, string) {
	t.Helper()
	ts := httptest.NewServer(AuthMiddleware("sec", h))
	t.Cleanup(ts.Close)
	return New("sec", nil), strings.TrimPrefix(ts.URL, "http://")
}

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		status int
		code   string
		want   error
	}{
		{404, CodeNotFound, ErrNotFound},
		{409, CodeCorrupt, ErrCorrupt},
		{400, CodeBadRequest, ErrBadRequest},
		{401, CodeUnauthorized, ErrUnauthorized},
		{409, CodeLocked, ErrLocked},
		{500, CodeInternal, nil},
		{404, CodeNoRoute, nil},
	}
	for _, c := range cases {
		client, addr := fake(t, func(w http.ResponseWriter, r *http.Request) { WriteError(w, c.status, c.code, "msg") })
		// HEAD has no body: the code must travel in the header.
		_, errStat := client.StatShard(context.Background(), addr, "f", 1)
		_, errGet := client.GetManifest(context.Background(), addr, "b", "k")
		for _, err := range []error{errStat, errGet} {
			var ne *NodeError
			if !errors.As(err, &ne) || ne.Addr != addr || ne.Op == "" {
				t.Fatalf("%d %s: %v is not a NodeError naming %s", c.status, c.code, err, addr)
			}
			var re *RemoteError
			if !errors.As(err, &re) || re.Status != c.status || re.Code != c.code {
				t.Fatalf("%d %s: remote error %+v", c.status, c.code, re)
			}
			for _, s := range []error{ErrNotFound, ErrCorrupt, ErrBadRequest, ErrUnauthorized, ErrLocked} {
				if got := errors.Is(err, s); got != (s == c.want) {
					t.Errorf("%d %s: errors.Is(%v) = %v", c.status, c.code, s, got)
				}
			}
		}
	}
}

func TestWrongSecret(t *testing.T) {
	_, addr := fake(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	_, err := New("other", nil).Stats(context.Background(), addr)
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("got %v", err)
	}
}

func TestUnreachableNode(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = New("sec", nil).Stats(context.Background(), addr)
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Addr != addr || errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v", err)
	}
}

// stream answers a shard GET announcing announce bytes, sending body, then
// the trailer (if any).
func stream(announce, body, trailer string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", TrailerError)
		w.Header().Set(HeaderLength, announce)
		w.WriteHeader(200)
		io.WriteString(w, body)
		if trailer != "" {
			w.Header().Set(TrailerError, trailer)
		}
	}
}

func TestShardReader(t *testing.T) {
	cases := []struct {
		name                    string
		announce, body, trailer string
		wantErr                 error
		wantData                string
	}{
		{"whole", "5", "hello", "", nil, "hello"},
		{"empty", "0", "", "", nil, ""},
		{"short", "10", "hello", "", io.ErrUnexpectedEOF, ""},
		{"corrupt trailer", "10", "hello", TrailerCorrupt, ErrCorrupt, ""},
		{"io trailer", "10", "hello", "io", io.ErrUnexpectedEOF, ""},
		{"too long", "3", "hello", "", errors.New("any"), ""},
		{"bad length header", "x", "hello", "", errors.New("any"), ""},
	}
	for _, c := range cases {
		client, addr := fake(t, stream(c.announce, c.body, c.trailer))
		rc, err := client.GetShard(context.Background(), addr, "f", 0, 0, -1)
		var data []byte
		if err == nil {
			data, err = io.ReadAll(rc)
			rc.Close()
		}
		switch {
		case c.wantErr == nil && (err != nil || string(data) != c.wantData):
			t.Errorf("%s: got %q, %v", c.name, data, err)
		case c.wantErr != nil && err == nil:
			t.Errorf("%s: no error, data %q", c.name, data)
		case c.wantErr != nil && c.wantErr.Error() != "any" && !errors.Is(err, c.wantErr):
			t.Errorf("%s: got %v, want %v", c.name, err, c.wantErr)
		}
		if err != nil {
			var ne *NodeError
			if !errors.As(err, &ne) || ne.Addr != addr {
				t.Errorf("%s: error %v does not name the node", c.name, err)
			}
		}
	}
}

func TestRequestsOnTheWire(t *testing.T) {
	var got *http.Request
	var body string
	client, addr := fake(t, func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		switch r.URL.Path {
		case PathList:
			WriteJSON(w, 200, ListResponse{Entries: []metadata.ListEntry{{Key: "a"}}, Truncated: true})
		case PathManifests:
			WriteJSON(w, 200, PutManifestResponse{Stored: true, Current: metadata.Version{TS: 7, Writer: "w"}})
		default:
			WriteJSON(w, 200, ShardInfo{Size: 4, CRC: 9})
		}
	})
	ctx := context.Background()
	es, tr, err := client.List(ctx, addr, metadata.ListQuery{Bucket: "b", Prefix: "p/", Delimiter: "/", After: "p/a", Limit: 5})
	if err != nil || len(es) != 1 || !tr {
		t.Fatalf("list: %v %v %v", es, tr, err)
	}
	q := got.URL.Query()
	if q.Get(ParamBucket) != "b" || q.Get(ParamPrefix) != "p/" || q.Get(ParamDelimiter) != "/" || q.Get(ParamAfter) != "p/a" || q.Get(ParamLimit) != "5" {
		t.Fatalf("list query %v", q)
	}
	stored, cur, err := client.PutManifest(ctx, addr, &metadata.Manifest{Bucket: "b", Key: "k"})
	if err != nil || !stored || cur.TS != 7 || got.Method != http.MethodPost || !strings.Contains(body, `"key":"k"`) {
		t.Fatalf("put manifest: %v %v %v, %s %q", stored, cur, err, got.Method, body)
	}
	info, err := client.PutShard(ctx, addr, "abc-1", 3, strings.NewReader("data"))
	if err != nil || info != (ShardInfo{Size: 4, CRC: 9}) || got.URL.Path != "/v1/shards/abc-1/3" || got.Method != http.MethodPut || body != "data" {
		t.Fatalf("put shard: %+v %v, %s %s %q", info, err, got.Method, got.URL.Path, body)
	}
	rc, err := client.GetShard(ctx, addr, "abc-1", 3, 10, 20)
	if err == nil {
		rc.Close()
	}
	if got.URL.Query().Get(ParamOffset) != "10" || got.URL.Query().Get(ParamLength) != "20" {
		t.Fatalf("get shard query %v", got.URL.Query())
	}
}

func TestValidateShardName(t *testing.T) {
	good := []struct {
		id  string
		idx int
	}{{"a", 0}, {"0123abcdef", 255}, {"A-b-9", 1}, {strings.Repeat("f", MaxFileIDLen), 7}}
	for _, g := range good {
		if err := ValidateShardName(g.id, g.idx); err != nil {
			t.Errorf("%q.%d: %v", g.id, g.idx, err)
		}
	}
	bad := []struct {
		id  string
		idx int
	}{{"", 0}, {"a", -1}, {"a", 256}, {"-a", 0}, {"a/b", 0}, {"..", 0}, {"a.b", 0}, {"a b", 0}, {"é", 0}, {"a\x00", 0}, {strings.Repeat("f", MaxFileIDLen+1), 0}}
	for _, b := range bad {
		if err := ValidateShardName(b.id, b.idx); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q.%d: got %v, want ErrBadRequest", b.id, b.idx, err)
		}
	}
	for _, s := range []string{"01", "+1", "-0", " 1", "1e2", ""} {
		if _, err := ParseShardIdx("a", s); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseShardIdx(%q) = %v", s, err)
		}
	}
}

// A JSON reply is read to its end, so calls reuse one connection: the
// decoder stops before the encoder's newline and the chunked body's end,
// and a body closed there took its connection down with it.
func TestCallsReuseTheConnection(t *testing.T) {
	big := &metadata.Manifest{Bucket: "b", Key: "k", Code: "rs-6-3", Placement: []string{"n1"}}
	for i := range 2000 {
		big.Parts = append(big.Parts, metadata.Part{Number: i + 1, ID: "part", Size: 1, ShardCRC: make([]uint32, 9)})
	}
	var mu sync.Mutex
	conns := 0
	ts := httptest.NewUnstartedServer(AuthMiddleware("sec", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, big)
	})))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	client, addr := New("sec", nil), strings.TrimPrefix(ts.URL, "http://")
	for range 20 {
		if _, err := client.GetManifest(context.Background(), addr, "b", "k"); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 1 {
		t.Fatalf("20 calls opened %d connections, want 1", conns)
	}
}
