package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/regen-s3/regen/gateway"
	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// statusServer answers GET /_regen/status with the given statuses, one per
// request, repeating the last; it counts POSTs and DELETEs of drain.
func statusServer(t *testing.T, sts ...gateway.Status) (*httptest.Server, *drainCalls) {
	t.Helper()
	var mu sync.Mutex
	calls := &drainCalls{}
	i := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case gateway.AdminPrefix + "status":
			json.NewEncoder(w).Encode(sts[min(i, len(sts)-1)])
			i++
		case gateway.AdminPrefix + "drain":
			calls.add(r.Method + " " + r.URL.Query().Get("node"))
			json.NewEncoder(w).Encode(gateway.DrainResult{Node: r.URL.Query().Get("node"), Draining: r.Method == http.MethodPost, Changed: true, Visible: true})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, calls
}

type drainCalls struct {
	mu    sync.Mutex
	calls []string
}

func (d *drainCalls) add(c string) {
	d.mu.Lock()
	d.calls = append(d.calls, c)
	d.mu.Unlock()
}

func (d *drainCalls) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// regen admin drain NODE starts the drain, then draws what the node still
// holds shrinking to nothing; a cancelled drain ends the watch with an
// error, not a success.
func TestAdminDrain(t *testing.T) {
	uploads := int64(0)
	node := func(draining bool, shards, inline int64) gateway.Status {
		n := gateway.NodeStatus{Member: cluster.Member{ID: "n1", State: cluster.StateAlive, Meta: cluster.Meta{Role: cluster.RoleShard, Draining: draining}},
			Stats: &shardrpc.Stats{Shards: shards, Inline: inline, Uploads: uploads}}
		gw := gateway.NodeStatus{Member: cluster.Member{ID: "gw", State: cluster.StateAlive, Meta: cluster.Meta{Role: cluster.RoleGateway}}}
		return gateway.Status{Nodes: []gateway.NodeStatus{gw, n}, Stripes: &gateway.StripeStatus{Draining: shards + inline}}
	}
	uploads = 1
	withUpload := node(true, 0, 0) // nothing left but an open upload: not done
	uploads = 0
	srv, calls := statusServer(t, node(true, 8, 2), node(true, 3, 0), withUpload, node(true, 0, 0))
	var out strings.Builder
	if err := runAdmin(context.Background(), []string{"drain", "n1", "--endpoint", srv.URL, "--timeout", "30s"}, &out); err != nil {
		t.Fatalf("drain: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{"node n1 is draining", "(0/10)", "10 shards left on n1", "(7/10)", "1 open multipart uploads", "100%", "(10/10)", "holds no shards"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, strings.ReplaceAll(got, "\r", "\n"))
		}
	}
	if c := calls.list(); !slices.Equal(c, []string{"POST n1"}) {
		t.Errorf("drain calls %v, want one POST", c)
	}

	cancelled, calls := statusServer(t, node(true, 8, 0), node(false, 8, 0))
	err := runAdmin(context.Background(), []string{"drain", "n1", "--watch", "--endpoint", cancelled.URL, "--timeout", "30s"}, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "not draining") {
		t.Errorf("a cancelled drain: error %v, want one saying it is not draining", err)
	}
	if c := calls.list(); len(c) != 0 {
		t.Errorf("--watch changed the drain: %v", c)
	}
	if err := runAdmin(context.Background(), []string{"drain", "n1", "--cancel", "--endpoint", cancelled.URL}, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	if c := calls.list(); !slices.Equal(c, []string{"DELETE n1"}) {
		t.Errorf("--cancel calls %v, want one DELETE", c)
	}
	for _, args := range [][]string{{"drain", "gw"}, {"drain", "nope"}, {"drain"}, {"drain", "n1", "--cancel", "--watch"}} {
		err := runAdmin(context.Background(), append(args, "--watch", "--endpoint", cancelled.URL), &strings.Builder{})
		if err == nil {
			t.Errorf("regen admin %v: no error", args)
		}
	}
}
