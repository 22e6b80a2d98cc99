package codec

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/kat.json from the current encoder")

// katCodes covers every family, shortening (clay-10-4, clay-5-3: nu > 0;
// pm-4-4, pm-8-8: shortened base codes) and Clay's digit order.
var katCodes = []string{"rs-6-3", "clay-2-2", "clay-4-2", "clay-5-3", "clay-6-3", "clay-10-4", "clay-10-10", "pm-3-3", "pm-4-4", "pm-8-8", "pm-10-10"}

// katStripe encodes data byte j of shard i = (i*131 + j*7 + j/251) mod 256 with two
// bytes per sub-chunk.
func katStripe(t *testing.T, c Code) [][]byte {
	chunk := 2 * c.SubChunks()
	sh := make([][]byte, c.TotalShards())
	for i := range sh {
		sh[i] = make([]byte, chunk)
		if i < c.DataShards() {
			for j := range sh[i] {
				sh[i][j] = byte(i*131 + j*7 + j/251)
			}
		}
	}
	if err := c.Encode(sh); err != nil {
		t.Fatal(err)
	}
	return sh
}

// TestKnownAnswers pins the on-disk format: parity of fixed data must never
// change without a FormatVersion bump.
func TestKnownAnswers(t *testing.T) {
	path := filepath.Join("testdata", "kat.json")
	got := map[string][]string{}
	for _, name := range katCodes {
		c := mustParse(t, name)
		sh := katStripe(t, c)
		for _, p := range sh[c.DataShards():] {
			got[name] = append(got[name], hex.EncodeToString(p))
		}
	}
	if *update {
		b, _ := json.MarshalIndent(map[string]any{"format_version": FormatVersion, "parity": got}, "", " ")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run KnownAnswers -update once)", err)
	}
	var want struct {
		Version int                 `json:"format_version"`
		Parity  map[string][]string `json:"parity"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if want.Version != FormatVersion {
		t.Fatalf("testdata is for format %d, code is %d", want.Version, FormatVersion)
	}
	for _, name := range katCodes {
		w := want.Parity[name]
		if len(w) != len(got[name]) {
			t.Errorf("%s: %d parity shards in testdata, want %d", name, len(w), len(got[name]))
			continue
		}
		for i := range w {
			if w[i] != got[name][i] {
				t.Errorf("%s: parity %d changed:\n got %s\nwant %s", name, i, got[name][i], w[i])
			}
		}
	}
}

// TestClayPaperVectors checks the independent vectors of msr-codes.md §2.4.
func TestClayPaperVectors(t *testing.T) {
	c := mustParse(t, "clay-2-2")
	sh := [][]byte{{1, 2, 3, 4}, {5, 6, 7, 8}, make([]byte, 4), make([]byte, 4)}
	if err := c.Encode(sh); err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(sh[2]) != "07088e16" || hex.EncodeToString(sh[3]) != "0c01150c" {
		t.Errorf("(4,2): parity %x %x", sh[2], sh[3])
	}
	c = mustParse(t, "clay-4-2")
	sh = make([][]byte, 6)
	for i := range sh {
		sh[i] = make([]byte, 8)
		for z := 0; i < 4 && z < 8; z++ {
			sh[i][z] = byte(i*8 + z + 1)
		}
	}
	if err := c.Encode(sh); err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(sh[4]) != "1610990c92891ed0" || hex.EncodeToString(sh[5]) != "0a921212521b8223" {
		t.Errorf("(6,4): parity %x %x", sh[4], sh[5])
	}
}
