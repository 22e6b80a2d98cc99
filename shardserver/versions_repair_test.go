package shardserver

import (
	"context"
	"testing"

	"github.com/regen-s3/regen/metadata"
)

// TestPutVersionKeepsItNoncurrent: the repair switch of a noncurrent
// version (its version TS+1, same version ID, older than the current one)
// is kept beside the newer current version, never made current, and the
// answer says the server holds it (so the switch counts it); a retry too.
// Once the key is confirmed, the manifest the switch rewrote goes and the
// switch stays. A server holding nothing of the key stores it as current:
// it knows of nothing newer.
func TestPutVersionKeepsItNoncurrent(t *testing.T) {
	ctx := context.Background()
	ce := newConfirmEnv(t)
	v1, v3 := versioned(1, "p1"), versioned(3, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v3)
	sw := moved(v1, 2)
	for try := range 2 {
		held, err := ce.client.PutVersion(ctx, ce.addr, sw)
		if err != nil || !held {
			t.Fatalf("try %d: held %v, %v; want held", try, held, err)
		}
		if got := ce.state(t); got != "3 | 2 1" {
			t.Fatalf("try %d: versions %q, want the switch kept beside current 3", try, got)
		}
	}
	ce.setPeers(0, 9, peerState{cur: v3, prev: []*metadata.Manifest{sw, v1}})
	ce.tick(t, testGCDelay)
	ce.tick(t, testGCDelay)
	if got := ce.state(t); got != "3 | 2" {
		t.Fatalf("versions %q after confirmation, want the switch to replace what it repaired", got)
	}

	fresh := *sw
	fresh.Key = "other"
	if held, err := ce.client.PutVersion(ctx, ce.addr, &fresh); err != nil || !held {
		t.Fatalf("a server holding nothing of the key: held %v, %v", held, err)
	}
}
