package shardserver

import (
	"context"
	"errors"
	"testing"

	"github.com/regen-s3/regen/internal/shardrpc"
)

func TestAbortManifestRestoresPrevious(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	v1, v2 := manifest("b", "k", 1, "p1"), manifest("b", "k", 2, "p2")
	if _, _, err := e.client.PutManifest(ctx, e.addr, v1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.client.PutManifest(ctx, e.addr, v2); err != nil {
		t.Fatal(err)
	}
	// Aborting a version that is not current changes nothing.
	if err := e.client.AbortManifest(ctx, e.addr, "b", "k", v1.Version); err != nil {
		t.Fatal(err)
	}
	if got, err := e.client.GetManifest(ctx, e.addr, "b", "k"); err != nil || got.Version != v2.Version {
		t.Fatalf("after aborting a non-current version: %+v %v", got, err)
	}
	// Aborting the current one brings the previous back.
	if err := e.client.AbortManifest(ctx, e.addr, "b", "k", v2.Version); err != nil {
		t.Fatal(err)
	}
	if got, err := e.client.GetManifest(ctx, e.addr, "b", "k"); err != nil || got.Version != v1.Version {
		t.Fatalf("after abort: %+v %v, want v1 back", got, err)
	}
	// A failed first write leaves nothing.
	first := manifest("b", "new", 5, "p5")
	if _, _, err := e.client.PutManifest(ctx, e.addr, first); err != nil {
		t.Fatal(err)
	}
	if err := e.client.AbortManifest(ctx, e.addr, "b", "new", first.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.GetManifest(ctx, e.addr, "b", "new"); !errors.Is(err, shardrpc.ErrNotFound) {
		t.Fatalf("aborted first write still there: %v", err)
	}
	// Bad input is refused.
	if err := e.client.AbortManifest(ctx, e.addr, "", "k", v1.Version); !errors.Is(err, shardrpc.ErrBadRequest) {
		t.Fatalf("abort without bucket: %v", err)
	}
}
