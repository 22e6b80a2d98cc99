package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// fakeKeyStore keeps access key records per server, newest version wins,
// like metadata.Store; servers in down fail every call. It keeps leases
// per server as shardserver's table does (without writes in flight) and
// checks fenced writes against them. The hooks, when set, run at the
// start of a lease acquisition and of a write, without f.mu held.
type fakeKeyStore struct {
	ShardAPI // the calls these tests do not make panic

	mu     sync.Mutex
	held   map[string]map[string]metadata.AccessKey // addr -> ID -> record
	leases map[string]map[string]fakeLease          // addr -> name -> lease
	down   map[string]bool
	lists  int
	// refused counts the acquisitions refused because another holder had
	// the lease.
	refused int

	beforeAcquire func(addr, name, holder string)
	beforePut     func(addr string, k *metadata.AccessKey, lease string)
}

type fakeLease struct {
	holder  string
	expires time.Time
}

func newFakeKeyStore() *fakeKeyStore {
	return &fakeKeyStore{held: map[string]map[string]metadata.AccessKey{}, leases: map[string]map[string]fakeLease{}, down: map[string]bool{}}
}

// PutAccessKey is an unfenced write, as older gateways make; the tests
// store records with it.
func (f *fakeKeyStore) PutAccessKey(_ context.Context, addr string, k *metadata.AccessKey) error {
	return f.put(addr, k, "", "")
}

func (f *fakeKeyStore) PutAccessKeyFenced(_ context.Context, addr string, k *metadata.AccessKey, lease string) error {
	return f.put(addr, k, shardrpc.AccessKeyLeaseName(k.ID), lease)
}

func (f *fakeKeyStore) CreateAccessKeyFenced(_ context.Context, addr string, k *metadata.AccessKey, lease string) error {
	return f.put(addr, k, shardrpc.AccessKeyNameLeaseName(k.Name), lease)
}

// put stores k on addr if newer; fenced by lease name when name is set.
func (f *fakeKeyStore) put(addr string, k *metadata.AccessKey, name, holder string) error {
	if f.beforePut != nil {
		f.beforePut(addr, k, holder)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[addr] {
		return fmt.Errorf("%s: down", addr)
	}
	if name != "" {
		if l, ok := f.leases[addr][name]; !ok || l.holder != holder || !time.Now().Before(l.expires) {
			return fmt.Errorf("%s: %w: %s is not held by %s", addr, shardrpc.ErrLeaseHeld, name, holder)
		}
	}
	if f.held[addr] == nil {
		f.held[addr] = map[string]metadata.AccessKey{}
	}
	if cur, ok := f.held[addr][k.ID]; !ok || cur.Version.Less(k.Version) {
		f.held[addr][k.ID] = *k
	}
	return nil
}

func (f *fakeKeyStore) ListAccessKeys(_ context.Context, addr string) ([]metadata.AccessKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.down[addr] {
		return nil, fmt.Errorf("%s: down", addr)
	}
	var out []metadata.AccessKey
	for _, k := range f.held[addr] {
		out = append(out, k)
	}
	return out, nil
}

func (f *fakeKeyStore) AcquireLease(_ context.Context, addr, name, holder string, ttl time.Duration) error {
	if f.beforeAcquire != nil {
		f.beforeAcquire(addr, name, holder)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[addr] {
		return fmt.Errorf("%s: down", addr)
	}
	now := time.Now()
	if l, ok := f.leases[addr][name]; ok && l.holder != holder && now.Before(l.expires) {
		f.refused++
		return fmt.Errorf("%s: %w: %s", addr, shardrpc.ErrLeaseHeld, name)
	}
	if f.leases[addr] == nil {
		f.leases[addr] = map[string]fakeLease{}
	}
	f.leases[addr][name] = fakeLease{holder: holder, expires: now.Add(ttl)}
	return nil
}

func (f *fakeKeyStore) ReleaseLease(_ context.Context, addr, name, holder string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.leases[addr][name]; ok && l.holder == holder {
		delete(f.leases[addr], name)
	}
	return nil
}

// expire ends lease name on every server, as if its holder had stalled
// past its TTL.
func (f *fakeKeyStore) expire(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ls := range f.leases {
		delete(ls, name)
	}
}

// ListBuckets: no buckets (the key admin lists them for its answers).
func (f *fakeKeyStore) ListBuckets(context.Context, string) ([]metadata.Bucket, error) {
	return nil, nil
}

// testKeyring is a keyring over three fake shard servers.
func testKeyring(t *testing.T, secret string) (*keyring, *fakeKeyStore) {
	t.Helper()
	f := newFakeKeyStore()
	members := liveShards(3, "s%d")
	cfg := DefaultConfig()
	cfg.ClusterSecret, cfg.Logger = secret, slog.New(slog.DiscardHandler)
	l := &layer{shards: f, nodes: members, clock: clock{writer: "gw"}}
	kr, err := newKeyring(cfg, l, f)
	if err != nil {
		t.Fatal(err)
	}
	return kr, f
}

func TestSealedSecrets(t *testing.T) {
	a, _ := newSealer("cluster secret one")
	b, _ := newSealer("cluster secret two")
	sealed := seal(a, "RKA", "the secret")
	if got, err := unseal(a, "RKA", sealed); err != nil || got != "the secret" {
		t.Fatalf("unseal: %q %v", got, err)
	}
	if _, err := unseal(b, "RKA", sealed); err == nil {
		t.Error("another cluster secret opened the sealed secret")
	}
	if _, err := unseal(a, "RKB", sealed); err == nil {
		t.Error("a sealed secret moved to another access key opened")
	}
	if _, err := unseal(a, "RKA", sealed[:10]); err == nil {
		t.Error("a truncated sealed secret opened")
	}
	if string(sealed) == "the secret" || len(sealed) < len("the secret")+16 {
		t.Error("the secret is not sealed")
	}
	id, secret := newKeyPair()
	id2, _ := newKeyPair()
	if len(id) != 20 || id[:2] != "RK" || len(secret) != 40 || id == id2 {
		t.Errorf("newKeyPair: %q %q (then %q)", id, secret, id2)
	}
}

func TestKeyringLookup(t *testing.T) {
	ctx := context.Background()
	kr, f := testKeyring(t, "a cluster secret of the test")
	put := func(k *metadata.AccessKey) {
		t.Helper()
		k.Version = kr.layer.clock.next()
		if err := kr.layer.putAccessKey(k, func(addr string) error { return f.PutAccessKey(ctx, addr, k) }); err != nil {
			t.Fatal(err)
		}
	}
	alice := &metadata.AccessKey{ID: "RKALICE", Name: "alice", SealedSecret: seal(kr.aead, "RKALICE", "alice's secret")}
	put(alice)
	k, err := kr.lookup(ctx, "RKALICE")
	if err != nil || k == nil || k.secret != "alice's secret" {
		t.Fatalf("lookup alice: %+v %v", k, err)
	}

	// Unknown keys: one read of the servers per keyRetry, however many
	// requests make them up at once (they wait for it).
	f.mu.Lock()
	lists := f.lists
	f.mu.Unlock()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if k, err := kr.lookup(ctx, fmt.Sprintf("RKNOBODY%d", i)); k != nil || err != nil {
				t.Errorf("made-up key: %+v %v", k, err)
			}
		})
	}
	wg.Wait()
	f.mu.Lock()
	if reads := (f.lists - lists) / 3; reads < 1 || reads > 2 {
		t.Errorf("20 made-up keys at once made %d reads of the servers, want 1 or 2", reads)
	}
	f.mu.Unlock()

	// A key created through another gateway is found at once, without
	// waiting for the TTL, even right after a read of the servers.
	put(&metadata.AccessKey{ID: "RKBOB", Name: "bob", SealedSecret: seal(kr.aead, "RKBOB", "bob's secret")})
	if k, err := kr.lookup(ctx, "RKBOB"); err != nil || k == nil {
		t.Errorf("a key created a moment ago: %+v %v", k, err)
	}

	// A deleted key works until the cache's TTL ends, then nowhere.
	put(&metadata.AccessKey{ID: "RKALICE", Name: "alice", Deleted: true})
	if k, _ := kr.lookup(ctx, "RKALICE"); k == nil {
		t.Error("the cache forgot alice before its TTL")
	}
	kr.cache.at = time.Now().Add(-kr.cache.ttl - time.Millisecond)
	if k, err := kr.lookup(ctx, "RKALICE"); k != nil || err != nil {
		t.Errorf("alice deleted, past the TTL: %+v %v", k, err)
	}

	// A record sealed under another cluster secret signs nothing.
	other, _ := newSealer("another cluster's secret")
	put(&metadata.AccessKey{ID: "RKOTHER", Name: "other", SealedSecret: seal(other, "RKOTHER", "x")})
	kr.invalidate()
	if k, err := kr.lookup(ctx, "RKOTHER"); k != nil || err != nil {
		t.Errorf("a key sealed under another secret: %+v %v", k, err)
	}

	// Two of three servers down: neither reads nor writes, and an
	// expired cache is not trusted.
	f.down["s0"], f.down["s1"] = true, true
	kr.invalidate()
	if _, err := kr.lookup(ctx, "RKBOB"); !errors.Is(err, errUnavailable) {
		t.Errorf("lookup with 1 of 3 servers: %v, want errUnavailable", err)
	}
	x := &metadata.AccessKey{ID: "RKX", Version: kr.layer.clock.next(), SealedSecret: []byte("x")}
	if err := kr.layer.putAccessKey(x, func(addr string) error { return f.PutAccessKey(ctx, addr, x) }); !errors.Is(err, errUnavailable) {
		t.Errorf("put with 1 of 3 servers: %v, want errUnavailable", err)
	}
	// One down: a majority still answers, and it holds the newest record.
	f.down["s1"] = false
	if k, err := kr.lookup(ctx, "RKBOB"); err != nil || k == nil {
		t.Errorf("lookup with 2 of 3 servers: %+v %v", k, err)
	}
}

// TestKeyringDisabled: without a cluster secret, only configured keys.
func TestKeyringDisabled(t *testing.T) {
	kr, _ := testKeyring(t, "")
	if kr.enabled() {
		t.Fatal("a keyring without a cluster secret is enabled")
	}
	if k, err := kr.lookup(context.Background(), "RKANY"); k != nil || err != nil {
		t.Errorf("lookup: %+v %v", k, err)
	}
	if _, err := kr.all(context.Background()); !errors.Is(err, errNoKeyStore) {
		t.Errorf("all: %v", err)
	}
}
