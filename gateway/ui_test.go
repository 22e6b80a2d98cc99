package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/sigv4"
)

type fakeMembers []cluster.Member

// liveShards is n live shard servers whose IDs and addresses are
// fmt.Sprintf(idFormat, i).
func liveShards(n int, idFormat string) fakeMembers {
	var members fakeMembers
	for i := range n {
		id := fmt.Sprintf(idFormat, i)
		members = append(members, cluster.Member{ID: id, State: cluster.StateAlive, Meta: cluster.Meta{Role: cluster.RoleShard, HTTP: id}})
	}
	return members
}

func (f fakeMembers) Members() []cluster.Member { return f }
func (f fakeMembers) Live(role cluster.Role) []cluster.Member {
	var out []cluster.Member
	for _, m := range f {
		if m.Role == role && m.Alive() {
			out = append(out, m)
		}
	}
	return out
}

// uiGateway is a gateway with no shard servers behind it: enough for the
// status page, which must not need them to render.
func uiGateway(t *testing.T) *Gateway {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID = "gw-test"
	cfg.Credentials = map[string]string{"admin": "s3cret"}
	members := fakeMembers{
		{ID: "gw-test", State: cluster.StateAlive, Meta: cluster.Meta{Role: cluster.RoleGateway, HTTP: "gw:9000"}},
		{ID: "s1", State: cluster.StateDead, Meta: cluster.Meta{Role: cluster.RoleShard, HTTP: "s1:9100"}},
	}
	g, err := New(cfg, nil, members)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func do(t *testing.T, g *Gateway, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := g.Test(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestUIAuth(t *testing.T) {
	g := uiGateway(t)
	for _, tc := range []struct {
		name       string
		user, pass string
		basic      bool
		want       int
	}{
		{"no credentials", "", "", false, http.StatusUnauthorized},
		{"wrong secret", "admin", "nope", true, http.StatusUnauthorized},
		{"unknown key", "someone", "s3cret", true, http.StatusUnauthorized},
		{"right", "admin", "s3cret", true, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/ui/", nil)
			if tc.basic {
				req.SetBasicAuth(tc.user, tc.pass)
			}
			resp, body := do(t, g, req)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if tc.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("401 without a Basic challenge: %v", resp.Header)
			}
			if tc.want == http.StatusOK && !strings.Contains(body, "app.js") {
				t.Errorf("not the page: %s", body)
			}
		})
	}
}

func TestUIStatusJSON(t *testing.T) {
	g := uiGateway(t)
	g.RecordEvent(Event{Kind: "node-dead", Node: "s1", Detail: "shard s1 (s1:9100) is dead"})
	req := httptest.NewRequest(http.MethodGet, "/ui/api/status", nil)
	req.SetBasicAuth("admin", "s3cret")
	resp, body := do(t, g, req)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if nodes := st["nodes"].([]any); len(nodes) != 2 {
		t.Errorf("%d nodes, want 2", len(nodes))
	}
	if _, ok := st["stripes"]; ok {
		t.Errorf("stripes reported without a repair source: %s", body)
	}
	if evs := st["events"].([]any); len(evs) != 1 || evs[0].(map[string]any)["kind"] != "node-dead" {
		t.Errorf("events = %v", st["events"])
	}
}

// A signed request to /ui/... is S3 (the bucket "ui"), never the page.
func TestUISignedRequestIsS3(t *testing.T) {
	g := uiGateway(t)
	req := httptest.NewRequest(http.MethodGet, "/ui/some-key", nil)
	sigv4.Sign(req, "admin", "wrong-secret", "us-east-1", time.Now(), sigv4.UnsignedPayload)
	resp, body := do(t, g, req)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Fatalf("signed request to /ui/some-key: %d %s", resp.StatusCode, body)
	}
}

func TestEventLogBounded(t *testing.T) {
	var l eventLog
	for i := range eventLogSize + 10 {
		l.add(Event{Kind: "k", Detail: strings.Repeat("x", i)})
	}
	got := l.recent()
	if len(got) != eventLogSize || len(got[0].Detail) != 10 || len(got[len(got)-1].Detail) != eventLogSize+9 {
		t.Fatalf("ring kept %d events, first %d, last %d", len(got), len(got[0].Detail), len(got[len(got)-1].Detail))
	}
}

// Every S3 request leaves one log line carrying the request ID the client
// was given in x-amz-request-id.
func TestAccessLogCarriesRequestID(t *testing.T) {
	var buf strings.Builder
	cfg := DefaultConfig()
	cfg.NodeID = "gw-test"
	cfg.Credentials = map[string]string{"admin": "s3cret"}
	cfg.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	g, err := New(cfg, nil, fakeMembers{})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/photos/cat.jpg", nil)
	sigv4.Sign(req, "admin", "wrong-secret", "us-east-1", time.Now(), sigv4.UnsignedPayload)
	resp, _ := do(t, g, req)
	id := resp.Header.Get("x-amz-request-id")
	var line struct {
		Msg       string `json:"msg"`
		RequestID string `json:"request_id"`
		Status    int    `json:"status"`
		Bucket    string `json:"bucket"`
		Key       string `json:"key"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(buf.String())), &line); err != nil {
		t.Fatalf("want one JSON log line, got %q: %v", buf.String(), err)
	}
	if id == "" || line.Msg != "request" || line.RequestID != id || line.Status != resp.StatusCode || line.Bucket != "photos" || line.Key != "cat.jpg" {
		t.Fatalf("log line %+v does not match the response (request id %q, status %d)", line, id, resp.StatusCode)
	}
}
