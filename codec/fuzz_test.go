package codec

import (
	"bytes"
	"sync"
	"testing"
)

// fuzzCodes are small enough for many executions per second and cover
// every family, shortening and both PM regimes.
var fuzzCodes = []string{"rs-4-2", "clay-2-2", "clay-4-2", "clay-5-3", "clay-6-3", "pm-3-3", "pm-4-4", "pm-3-2"}

// fuzzCache keeps one value per code so plans and decoders are reused
// across fuzz executions (test-only state).
var fuzzCache sync.Map

func fuzzCode(t *testing.T, idx uint8) Regenerating {
	name := fuzzCodes[int(idx)%len(fuzzCodes)]
	if c, ok := fuzzCache.Load(name); ok {
		return c.(Regenerating)
	}
	c, _ := fuzzCache.LoadOrStore(name, mustParse(t, name))
	return c.(Regenerating)
}

// fuzzStripe builds a stripe whose data repeats the fuzzer's bytes.
func fuzzStripe(t *testing.T, c Code, data []byte, subLen uint8) [][]byte {
	chunk := c.ShardMultiple() * (1 + int(subLen)%5)
	sh := make([][]byte, c.TotalShards())
	for i := range sh {
		sh[i] = make([]byte, chunk)
		for j := 0; i < c.DataShards() && j < chunk && len(data) > 0; j++ {
			sh[i][j] = data[(i*chunk+j)%len(data)] ^ byte(i)
		}
	}
	if err := c.Encode(sh); err != nil {
		t.Fatal(err)
	}
	return sh
}

// FuzzDecode erases the shards selected by mask (at most m of them are
// taken) and checks the decode byte for byte.
func FuzzDecode(f *testing.F) {
	f.Add(uint8(0), uint32(0b11), uint8(1), []byte("hello"))
	f.Add(uint8(2), uint32(0b110000), uint8(0), []byte{0xff, 0})
	f.Add(uint8(4), uint32(0b1001001), uint8(3), []byte("clay"))
	f.Add(uint8(6), uint32(0b10000001), uint8(2), []byte("pm"))
	f.Fuzz(func(t *testing.T, code uint8, mask uint32, subLen uint8, data []byte) {
		c := fuzzCode(t, code)
		sh := fuzzStripe(t, c, data, subLen)
		work := append([][]byte(nil), sh...)
		erased := 0
		for i := range work {
			if mask&(1<<i) != 0 && erased < c.ParityShards() {
				work[i] = nil
				erased++
			}
		}
		if err := c.Reconstruct(work); err != nil {
			t.Fatal(err)
		}
		for i := range sh {
			if !bytes.Equal(work[i], sh[i]) {
				t.Fatalf("%s mask %b: shard %d differs", c.Name(), mask, i)
			}
		}
	})
}

// FuzzRepair plans and executes the repair of the failure set in mask
// (helper side and relayer side, through JSON-free plans) and checks bytes
// and the cut-set bound.
func FuzzRepair(f *testing.F) {
	f.Add(uint8(0), uint32(0b1), uint8(0), []byte("x"))
	f.Add(uint8(3), uint32(0b1001), uint8(1), []byte("cross-section"))
	f.Add(uint8(4), uint32(0b111), uint8(2), []byte("clay"))
	f.Add(uint8(7), uint32(0b11), uint8(4), []byte("pm"))
	f.Fuzz(func(t *testing.T, code uint8, mask uint32, subLen uint8, data []byte) {
		c := fuzzCode(t, code)
		var failed []int
		for i := 0; i < c.TotalShards(); i++ {
			if mask&(1<<i) != 0 && len(failed) < c.ParityShards() {
				failed = append(failed, i)
			}
		}
		if len(failed) == 0 {
			failed = []int{int(mask>>16) % c.TotalShards()}
		}
		sh := fuzzStripe(t, c, data, subLen)
		p, sent, err := executeRepair(c, sh, failed)
		if err != nil {
			t.Fatal(err)
		}
		bound := RepairBound(c.TotalShards(), c.DataShards(), len(failed))
		if r := float64(sent) / float64(c.DataShards()*len(sh[0])); r < bound-1e-9 || r > 1+1e-9 {
			t.Fatalf("%s %v (%s): ratio %.4f outside [%.4f, 1]", c.Name(), failed, p.Method, r, bound)
		}
	})
}
