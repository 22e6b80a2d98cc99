package cluster

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"testing"
)

// The gossip key is its own: not the secret (padded or cut, as the key
// used to be), not the shard RPC signing key, and different for another
// secret. A gossip key learned from one node's memory or a memberlist
// bug then signs no shard request.
func TestGossipKeyDerivedSeparately(t *testing.T) {
	secret := "0123456789abcdef0123456789abcdef"
	k := gossipKey(secret)
	if len(k) != 32 {
		t.Fatalf("gossip key of %d bytes, want 32 (AES-256)", len(k))
	}
	if !bytes.Equal(k, gossipKey(secret)) {
		t.Fatal("gossip key differs between calls: nodes would not agree")
	}
	if bytes.Contains([]byte(secret), k[:16]) || bytes.Equal(k, []byte(secret)) {
		t.Fatal("gossip key is (part of) the secret")
	}
	rpc, err := hkdf.Key(sha256.New, []byte(secret), nil, "regen shard rpc v1", 32) // shardrpc's label
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(k, rpc) {
		t.Fatal("gossip key equals the shard RPC key")
	}
	if bytes.Equal(k, gossipKey(secret+"x")) {
		t.Fatal("two secrets give one gossip key")
	}
}
