package codec

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"
	"unsafe"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		alpha int
	}{
		{"rs-6-3", nil, 1},
		{"clay-4-2", nil, 8},
		{"clay-6-3", nil, 27},
		{"clay-8-4", nil, 64},
		{"clay-10-4", nil, 256},
		{"clay-8-8", nil, 64},
		{"Clay-10-10", nil, 100},
		{"pm-8-8", nil, 8},
		{"pm-10-9", nil, 9},
		{"pm-10-8", ErrBadParams, 0},  // m < k-1
		{"pm-1-3", ErrBadParams, 0},   // k < 2
		{"clay-4-1", ErrBadParams, 0}, // no repair planes
		{"clay-250-7", ErrBadParams, 0},
		{"clay-20-4", ErrBadParams, 0}, // alpha = 4^6
		{"rs-200-100", ErrBadParams, 0},
		{"lrc-6-3", ErrBadName, 0},
		{"clay-6", ErrBadName, 0},
		{"clay-x-2", ErrBadName, 0},
	} {
		c, err := Parse(tc.name)
		if !errors.Is(err, tc.err) {
			t.Errorf("Parse(%q) error %v, want %v", tc.name, err, tc.err)
			continue
		}
		if err == nil && c.SubChunks() != tc.alpha {
			t.Errorf("%s: alpha %d, want %d", tc.name, c.SubChunks(), tc.alpha)
		}
	}
}

func TestClayParams(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		q, nu, tt, beta      int
		repairRatioTimes1000 int
	}{
		{"clay-4-2", 2, 0, 3, 4, 625},
		{"clay-6-3", 3, 0, 3, 9, 444},
		{"clay-8-4", 4, 0, 3, 16, 343},
		{"clay-10-4", 4, 2, 4, 64, 325},
		{"clay-8-8", 8, 0, 2, 8, 234},
		{"clay-10-10", 10, 0, 2, 10, 190},
	} {
		c := mustParse(t, tc.name).(*Clay)
		q, nu, tt, beta := c.Params()
		if q != tc.q || nu != tc.nu || tt != tc.tt || beta != tc.beta {
			t.Errorf("%s: (q,nu,t,beta) = (%d,%d,%d,%d), want (%d,%d,%d,%d)", tc.name, q, nu, tt, beta, tc.q, tc.nu, tc.tt, tc.beta)
		}
		got := (c.TotalShards() - 1) * beta * 1000 / (c.DataShards() * c.SubChunks())
		if got != tc.repairRatioTimes1000 {
			t.Errorf("%s: repair ratio %d/1000, want %d", tc.name, got, tc.repairRatioTimes1000)
		}
	}
}

func TestPFTConstants(t *testing.T) {
	if gfMul(pftC, pftInv) != 1 || gfMul(1^pftC, pftD) != 1 {
		t.Fatal("pairwise-transform inverses are wrong")
	}
}

// TestDecodeRoundTrip erases patterns of up to m shards (all of them for
// small codes, a sample for large ones) and checks the decode byte for byte.
func TestDecodeRoundTrip(t *testing.T) {
	skipUnderRace(t)
	for _, tc := range []struct {
		name  string
		limit int
	}{
		{"rs-4-2", 0}, {"clay-2-2", 0}, {"clay-4-2", 0}, {"clay-6-3", 0}, {"clay-5-3", 0},
		{"pm-3-3", 0}, {"pm-4-4", 0}, {"pm-3-2", 0},
		{"clay-8-4", 120}, {"clay-10-4", 40}, {"clay-8-8", 60}, {"clay-10-10", 40}, {"pm-8-8", 80}, {"pm-10-10", 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.name)
			sh := stripe(t, c, 3*c.ShardMultiple(), 1)
			rng := rand.New(rand.NewSource(2))
			if testing.Short() && c.TotalShards() >= 14 {
				t.Skip("-short: the 14- and 20-shard codes take seconds; clay-8-4, clay-8-8 and pm-8-8 run the same paths")
			}
			for _, er := range erasurePatterns(c.TotalShards(), c.ParityShards(), tc.limit, rng) {
				cp := append([][]byte(nil), sh...)
				for _, e := range er {
					cp[e] = nil
				}
				if err := c.Reconstruct(cp); err != nil {
					t.Fatalf("erasures %v: %v", er, err)
				}
				for i := range sh {
					if !bytes.Equal(cp[i], sh[i]) {
						t.Fatalf("erasures %v: shard %d differs", er, i)
					}
				}
			}
		})
	}
}

func TestReconstructSome(t *testing.T) {
	for _, name := range []string{"clay-6-3", "pm-4-4", "rs-6-3"} {
		c := mustParse(t, name)
		sh := stripe(t, c, 2*c.ShardMultiple(), 3)
		cp := append([][]byte(nil), sh...)
		cp[0], cp[1], cp[c.TotalShards()-1] = nil, nil, nil
		req := make([]bool, c.TotalShards())
		req[1] = true
		if err := c.ReconstructSome(cp, req); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(cp[1], sh[1]) {
			t.Errorf("%s: required shard not rebuilt", name)
		}
		if name != "rs-6-3" && (cp[0] != nil || cp[c.TotalShards()-1] != nil) {
			t.Errorf("%s: shards that were not required were filled", name)
		}
	}
}

func TestShardErrors(t *testing.T) {
	for _, name := range []string{"clay-4-2", "pm-3-3", "rs-4-2"} {
		c := mustParse(t, name)
		sh := stripe(t, c, 2*c.ShardMultiple(), 1)
		if err := c.Encode(sh[:len(sh)-1]); !errors.Is(err, ErrShardCount) {
			t.Errorf("%s: short shard list: %v", name, err)
		}
		bad := append([][]byte(nil), sh...)
		bad[1] = bad[1][:len(bad[1])-1]
		if err := c.Reconstruct(bad); !errors.Is(err, ErrShardSize) {
			t.Errorf("%s: unequal shards: %v", name, err)
		}
		few := make([][]byte, c.TotalShards())
		copy(few, sh[:c.DataShards()-1])
		if err := c.Reconstruct(few); !errors.Is(err, ErrTooFewShards) {
			t.Errorf("%s: too few shards: %v", name, err)
		}
		if c.SubChunks() > 1 {
			odd := make([][]byte, c.TotalShards())
			for i := range odd {
				odd[i] = make([]byte, c.ShardMultiple()+1)
			}
			if err := c.Encode(odd); !errors.Is(err, ErrShardSize) {
				t.Errorf("%s: length not a multiple of alpha: %v", name, err)
			}
		}
	}
}

// ChunkSize must give the smallest chunk of at least want bytes that is a
// valid shard length and cuts into 64-byte-aligned sub-chunks.
func TestChunkSize(t *testing.T) {
	for _, name := range []string{"rs-6-3", "clay-6-3", "clay-10-4", "clay-10-10", "pm-4-3", "pm-10-10"} {
		c := mustParse(t, name)
		unit := int64(c.SubChunks() * 64)
		for _, want := range []int64{1, 63, 64, 4 << 10, 1 << 20, 1<<20 + 1, 64 << 20} {
			got := ChunkSize(c, want)
			switch {
			case got < want:
				t.Errorf("%s: ChunkSize(%d) = %d, below the request", name, want, got)
			case got%int64(c.ShardMultiple()) != 0:
				t.Errorf("%s: ChunkSize(%d) = %d, not a multiple of %d", name, want, got, c.ShardMultiple())
			case got%unit != 0:
				t.Errorf("%s: ChunkSize(%d) = %d: sub-chunks of %d bytes are not 64-aligned", name, want, got, got/int64(c.SubChunks()))
			case got-unit >= want && got > unit:
				t.Errorf("%s: ChunkSize(%d) = %d, not the smallest (%d also fits)", name, want, got, got-unit)
			}
		}
	}
	if got := ChunkSize(mustParse(t, "clay-10-10"), 1<<20); got != 1049600 {
		t.Errorf("clay-10-10 at 1 MiB: %d, want 1049600 (sub-chunks of 10496 bytes)", got)
	}
}

// Shards of a stripe buffer must not overlap, must keep their chunk
// length and capacity, must be 448 bytes (so 64-byte aligned) past a
// multiple of 4 KiB from each other, and must start in different 64-byte
// lines mod 4 KiB (for up to 64).
func TestNewStripe(t *testing.T) {
	for _, chunk := range []int64{0, 1, 64, 448, 4096, 4096 + 64, 1 << 20, 1049600, 1048896} {
		stride := StripeStride(chunk)
		if stride < chunk || stride%4096 != 448 {
			t.Fatalf("StripeStride(%d) = %d: want >= chunk and 448 mod 4096", chunk, stride)
		}
		sh := NewStripe(20, chunk)
		lines := map[int64]bool{}
		for i, s := range sh {
			if int64(len(s)) != chunk || int64(cap(s)) != chunk {
				t.Fatalf("chunk %d: shard %d has len %d cap %d", chunk, i, len(s), cap(s))
			}
			for j := range s {
				s[j] = byte(i + 1)
			}
			if chunk > 0 {
				off := int64(uintptr(unsafe.Pointer(&s[0])) - uintptr(unsafe.Pointer(&sh[0][0])))
				if off != int64(i)*stride {
					t.Fatalf("chunk %d: shard %d at %d, want %d", chunk, i, off, int64(i)*stride)
				}
				lines[off%4096/64] = true
			}
		}
		for i, s := range sh {
			for j, b := range s {
				if b != byte(i+1) {
					t.Fatalf("chunk %d: shard %d byte %d overwritten by shard %d", chunk, i, j, b-1)
				}
			}
		}
		if chunk > 0 && len(lines) != len(sh) {
			t.Errorf("chunk %d: 20 shards start in only %d distinct lines mod 4 KiB", chunk, len(lines))
		}
	}
}
