package codec

import (
	"bytes"
	"encoding/hex"
	"math/rand"
	"testing"
)

func TestQuickKAT(t *testing.T) {
	c, err := NewClay(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	sh := [][]byte{{1, 2, 3, 4}, {5, 6, 7, 8}, make([]byte, 4), make([]byte, 4)}
	if err := c.Encode(sh); err != nil {
		t.Fatal(err)
	}
	t.Log(hex.EncodeToString(sh[2]), hex.EncodeToString(sh[3]))
	c2, _ := NewClay(4, 2)
	sh = make([][]byte, 6)
	for i := range sh {
		sh[i] = make([]byte, 8)
		if i < 4 {
			for z := range 8 {
				sh[i][z] = byte(i*8 + z + 1)
			}
		}
	}
	c2.Encode(sh)
	t.Log(hex.EncodeToString(sh[4]), hex.EncodeToString(sh[5]))
}

func TestQuickRoundtrip(t *testing.T) {
	for _, name := range []string{"clay-2-2", "clay-4-2", "clay-6-3", "clay-8-4", "clay-10-4", "pm-3-3", "pm-4-4", "pm-10-10", "rs-4-2"} {
		c, err := Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		n, k := c.TotalShards(), c.DataShards()
		L := c.ShardMultiple() * 3
		sh := make([][]byte, n)
		for i := range sh {
			sh[i] = make([]byte, L)
			if i < k {
				rand.Read(sh[i])
			}
		}
		if err := c.Encode(sh); err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 20; trial++ {
			cp := make([][]byte, n)
			copy(cp, sh)
			perm := rand.Perm(n)
			for _, e := range perm[:1+rand.Intn(n-k)] {
				cp[e] = nil
			}
			if err := c.Reconstruct(cp); err != nil {
				t.Fatal(err)
			}
			for i := range sh {
				if !bytes.Equal(cp[i], sh[i]) {
					t.Fatalf("%s: shard %d differs (erased %v)", name, i, perm)
				}
			}
		}
		r := c.(Regenerating)
		for f := 0; f < n; f++ {
			p, err := r.RepairPlan([]int{f})
			if err != nil {
				t.Fatal(err)
			}
			sent := make([][]byte, len(p.Helpers))
			for i := range p.Helpers {
				sent[i], err = p.Helpers[i].Produce(p.SubChunks, sh[p.Helpers[i].Shard], nil)
				if err != nil {
					t.Fatal(err)
				}
			}
			out := make([][]byte, 1)
			if err := p.Rebuild(L, sent, out); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out[0], sh[f]) {
				t.Fatalf("%s repair %d wrong", name, f)
			}
			if f == 0 {
				t.Logf("%s: single repair %s ratio %.3f", name, p.Method, p.Ratio())
			}
		}
	}
}
