package gateway

import (
	"errors"
	"strings"
	"testing"

	"github.com/regen-s3/regen/internal/sse"
	"github.com/regen-s3/regen/metadata"
)

// A GET of an object sealed by a cluster key the gateway's key file lacks
// fails before its 200 with a 500 naming the key, and sizes of sealed
// parts read back as their plaintext's.
func TestCheckSealedKeys(t *testing.T) {
	line1, _ := sse.NewKeyLine("k1")
	line2, _ := sse.NewKeyLine("k2")
	old, _ := sse.ParseKeyring([]byte(line1))
	now, _ := sse.ParseKeyring([]byte(line2))
	dk, _ := sse.NewDataKey()
	sealed, _ := old.Seal(dk)
	m := &metadata.Manifest{Parts: []metadata.Part{{Number: 1, Size: sse.SealedSize(100 << 10), SealedKey: sealed}}}
	if err := checkSealedKeys(m, old); err != nil {
		t.Fatalf("the sealing key ring: %v", err)
	}
	err := checkSealedKeys(m, now)
	if !errors.Is(err, ErrInternalError) || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("a key ring without k1: %v, want InternalError naming k1", err)
	}
	if got := partPlainSize(m.Parts[0]); got != 100<<10 {
		t.Fatalf("partPlainSize %d, want %d", got, 100<<10)
	}
}
