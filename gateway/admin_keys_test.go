package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// keyGateways returns n gateways (writers gw0, gw1, ...) over the same
// three fake shard servers, enough for the key admin's calls.
func keyGateways(t *testing.T, n int) ([]*Gateway, *fakeKeyStore) {
	t.Helper()
	f := newFakeKeyStore()
	members := liveShards(3, "s%d")
	var gs []*Gateway
	for i := range n {
		cfg := DefaultConfig()
		cfg.ClusterSecret, cfg.Logger = "a cluster secret of the test", slog.New(slog.DiscardHandler)
		l := &layer{shards: f, nodes: members, log: cfg.Logger, clock: clock{writer: fmt.Sprintf("gw%d", i)}}
		kr, err := newKeyring(cfg, l, f)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, &Gateway{cfg: cfg, log: cfg.Logger, layer: l, keys: kr, buckets: &bucketCache{ttl: cfg.BucketCacheTTL}})
	}
	return gs, f
}

// storedKeys returns the newest record of every key over the fake
// servers, as a majority read of all three sees it.
func storedKeys(t *testing.T, g *Gateway) map[string]metadata.AccessKey {
	t.Helper()
	all, err := g.layer.allAccessKeys(context.Background(), g.keys.store)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// TestKeyFlagChangeDoesNotBringBackDeletedKey: a flag change through one
// gateway that found the key before its deletion through another never
// writes the key back.
//
//   - "read before": gateway 0 resolved the key (the cache holds it live);
//     the deletion through gateway 1 lands while gateway 0 waits for the
//     key's lease. Under the lease gateway 0 reads the record afresh, finds
//     the tombstone and fails with "no access key". (Before: it wrote the
//     record it had resolved, with a version newer than the tombstone.)
//   - "lease ran out": gateway 0, its clock an hour ahead, read the record
//     under the lease and stalled past the lease's end before writing; the
//     deletion through gateway 1 takes the lease and lands (with a version
//     older than gateway 0's). Gateway 0's write is refused by the servers
//     (fenced by the lease it no longer holds). (Unfenced, it landed and
//     its newer version brought the key back.)
func TestKeyFlagChangeDoesNotBringBackDeletedKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		// race wires fn (the deletion through gateway 1) to run once at the
		// right moment of gateway 0's flag change.
		race func(f *fakeKeyStore, id string, fn func())
		// want checks the flag change's error.
		want func(error) bool
	}{
		{"read before", func(f *fakeKeyStore, id string, fn func()) {
			var once sync.Once
			f.beforeAcquire = func(_, name, holder string) {
				if name == shardrpc.AccessKeyLeaseName(id) && strings.HasPrefix(holder, "gw0/") {
					once.Do(fn)
				}
			}
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), `no access key "carol"`) }},
		{"lease ran out", func(f *fakeKeyStore, id string, fn func()) {
			var once sync.Once
			f.beforePut = func(_ string, k *metadata.AccessKey, lease string) {
				if k.ID == id && k.Admin && strings.HasPrefix(lease, "gw0/") {
					once.Do(func() {
						f.expire(shardrpc.AccessKeyLeaseName(id))
						fn()
					})
				}
			}
		}, func(err error) bool { return errors.Is(err, errUnavailable) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			gs, f := keyGateways(t, 2)
			gs[0].layer.clock.offset = time.Hour
			carol, err := gs[1].createKey(ctx, "carol", false, false)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := gs[0].resolveKey(ctx, "carol"); err != nil {
				t.Fatal(err)
			}
			var delErr error
			tc.race(f, carol.AccessKey, func() { _, delErr = gs[1].deleteAccessKey(ctx, carol.AccessKey) })
			_, err = gs[0].grantKey(ctx, "carol", "", "", "admin", true)
			if delErr != nil {
				t.Fatalf("the deletion through gateway 1: %v", delErr)
			}
			if !tc.want(err) {
				t.Errorf("the flag change of a key deleted meanwhile: %v", err)
			}
			if k := storedKeys(t, gs[0])[carol.AccessKey]; !k.Deleted || k.Admin {
				t.Fatalf("after the deletion and the flag change the servers hold %+v: the deleted key is back", k)
			}
			// Both gateways refuse the key from now on.
			for i, g := range gs {
				g.keys.invalidate()
				if k, err := g.keys.lookup(ctx, carol.AccessKey); k != nil || err != nil {
					t.Errorf("gateway %d, the deleted key: %+v %v", i, k, err)
				}
			}
		})
	}
}

// TestKeyFlagChangeAfterDeletion: a flag change or a second deletion of
// a deleted key answers as resolveKey does for it.
func TestKeyFlagChangeAfterDeletion(t *testing.T) {
	ctx := context.Background()
	gs, _ := keyGateways(t, 1)
	g := gs[0]
	dave, err := g.createKey(ctx, "dave", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := g.grantKey(ctx, "dave", "", "", "create-buckets", true); err != nil || !info.CreateBuckets || info.Admin {
		t.Fatalf("grant create-buckets: %+v %v", info, err)
	}
	k := storedKeys(t, g)[dave.AccessKey]
	if !k.CreateBuckets || k.Name != "dave" || k.SealedSecret == nil {
		t.Fatalf("stored after the flag change: %+v", k)
	}
	rec, err := g.resolveKey(ctx, dave.AccessKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.deleteAccessKey(ctx, "dave"); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("no access key %q", dave.AccessKey)
	if err := g.setKeyFlags(ctx, rec, "admin", true); !errors.Is(err, errNotFound) {
		t.Errorf("flag change of a deleted key: %v, want errNotFound", err)
	}
	if _, err := g.deleteAccessKey(ctx, dave.AccessKey); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("second deletion: %v, want %s", err, want)
	}
	if k := storedKeys(t, g)[dave.AccessKey]; !k.Deleted || k.Admin || k.SealedSecret != nil {
		t.Errorf("stored: %+v, want a tombstone", k)
	}
}

// TestConcurrentKeyCreatesOneName: two creations of one name through two
// gateways at once: exactly one succeeds, and one key has the name.
// Gateway 1's creation starts once gateway 0's has checked the name and
// before its write lands. Under the name's lease, gateway 1 waits for
// gateway 0's write, then finds the name taken. (Before: gateway 1 read
// the keys without the name, and both keys were stored.)
func TestConcurrentKeyCreatesOneName(t *testing.T) {
	ctx := context.Background()
	gs, f := keyGateways(t, 2)
	var once sync.Once
	var second error
	done := make(chan struct{})
	f.beforePut = func(_ string, k *metadata.AccessKey, _ string) {
		if k.Name != "erin" || k.Version.Writer != "gw0" {
			return
		}
		once.Do(func() {
			go func() {
				defer close(done)
				_, second = gs[1].createKey(ctx, "erin", false, false)
			}()
			// Until gateway 1's creation is over or waits for the lease.
			for {
				select {
				case <-done:
					return
				case <-time.After(time.Millisecond):
				}
				f.mu.Lock()
				waiting := f.refused > 0
				f.mu.Unlock()
				if waiting {
					return
				}
			}
		})
	}
	_, first := gs[0].createKey(ctx, "erin", false, false)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("gateway 1's creation never started or never ended")
	}
	if first != nil {
		t.Errorf("gateway 0's creation (first to check): %v", first)
	}
	if second == nil || !strings.Contains(second.Error(), "a key named erin exists already") {
		t.Errorf("gateway 1's creation: %v, want the name taken", second)
	}
	n := 0
	for _, k := range storedKeys(t, gs[0]) {
		if !k.Deleted && k.Name == "erin" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d live keys named erin, want 1", n)
	}
}
