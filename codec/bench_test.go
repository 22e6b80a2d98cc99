package codec

import (
	"fmt"
	"runtime"
	"testing"
)

// cpuMeter reports MB per CPU-second of the benchmark's thread.
type cpuMeter struct {
	bytes int64
	t0    float64
}

func startCPU(b *testing.B, bytes int64) *cpuMeter {
	runtime.LockOSThread()
	b.SetBytes(bytes)
	b.ResetTimer()
	return &cpuMeter{bytes: bytes, t0: threadCPU()}
}

func (m *cpuMeter) stop(b *testing.B) {
	b.StopTimer()
	if d := threadCPU() - m.t0; d > 0 {
		b.ReportMetric(float64(m.bytes)*float64(b.N)/d/1e6, "cpuMB/s")
	}
	runtime.UnlockOSThread()
}

// Benchmarks: go test -run ^$ -bench . -benchtime 200ms ./codec/
//
// Every code at one (n,k) gets the same shard chunk, alpha_clay * sc bytes,
// so throughputs compare the same stripe. Encode and decode count data bytes
// (k chunks); repairs count rebuilt bytes (t chunks).

var benchShapes = [][2]int{{6, 3}, {8, 4}, {10, 4}, {10, 10}}

var benchSubChunks = []int{1 << 10, 4 << 10, 16 << 10, 64 << 10}

// maxBenchChunk keeps (14,10) with alpha = 256 within memory.
const maxBenchChunk = 4 << 20

type benchCase struct {
	name  string
	c     Regenerating
	chunk int
	sc    int
}

func benchCases(b *testing.B) []benchCase {
	var out []benchCase
	for _, s := range benchShapes {
		k, m := s[0], s[1]
		clay, err := NewClay(k, m)
		if err != nil {
			b.Fatal(err)
		}
		for _, sc := range benchSubChunks {
			chunk := clay.SubChunks() * sc
			if chunk > maxBenchChunk {
				continue
			}
			for _, fam := range []string{"rs", "clay", "pm"} {
				c, err := Parse(fmt.Sprintf("%s-%d-%d", fam, k, m))
				if err != nil {
					continue // pm needs m >= k-1
				}
				out = append(out, benchCase{c.Name(), c.(Regenerating), chunk - chunk%c.ShardMultiple(), sc})
			}
		}
	}
	return out
}

func (bc benchCase) label() string {
	return fmt.Sprintf("%s/sc=%dK", bc.name, bc.sc>>10)
}

func BenchmarkEncode(b *testing.B) {
	for _, bc := range benchCases(b) {
		b.Run(bc.label(), func(b *testing.B) {
			sh := stripe(b, bc.c, bc.chunk, 1)
			cm := startCPU(b, int64(bc.c.DataShards()*bc.chunk))
			for range b.N {
				if err := bc.c.Encode(sh); err != nil {
					b.Fatal(err)
				}
			}
			cm.stop(b)
		})
	}
}

// BenchmarkEncodeChunk1M encodes stripes of the gateway's default 1 MiB
// shard chunk (as ChunkSize rounds it), so each Clay shape
// runs at the sub-chunk size it gets in production: clay-6-3 ~38 KiB,
// clay-8-4 16 KiB, clay-10-4 4 KiB, clay-10-10 ~10 KiB.
func BenchmarkEncodeChunk1M(b *testing.B) {
	for _, s := range benchShapes {
		for _, fam := range []string{"rs", "clay"} {
			c, err := Parse(fmt.Sprintf("%s-%d-%d", fam, s[0], s[1]))
			if err != nil {
				b.Fatal(err)
			}
			chunk := int(ChunkSize(c, 1<<20))
			b.Run(c.Name(), func(b *testing.B) {
				sh := stripe(b, c, chunk, 1)
				cm := startCPU(b, int64(c.DataShards()*chunk))
				for range b.N {
					if err := c.Encode(sh); err != nil {
						b.Fatal(err)
					}
				}
				cm.stop(b)
			})
		}
	}
}

// BenchmarkClayEncodeLibrary is Clay encode on the library's fused
// encoders, the path of CPUs without AVX-512 GFNI, at the same stripes as
// BenchmarkEncodeChunk1M: the baseline the batched kernels replace.
func BenchmarkClayEncodeLibrary(b *testing.B) {
	for _, s := range benchShapes {
		c, err := NewClay(s[0], s[1])
		if err != nil {
			b.Fatal(err)
		}
		chunk := int(ChunkSize(c, 1<<20))
		b.Run(c.Name(), func(b *testing.B) {
			sh := stripe(b, c, chunk, 1)
			cb, _ := c.layout(sh, chunk, nil)
			cm := startCPU(b, int64(c.DataShards()*chunk))
			for range b.N {
				if err := c.encodeFused(cb, chunk/c.alpha); err != nil {
					b.Fatal(err)
				}
			}
			cm.stop(b)
		})
	}
}

// BenchmarkDecode erases the first m data shards.
func BenchmarkDecode(b *testing.B) {
	for _, bc := range benchCases(b) {
		b.Run(bc.label(), func(b *testing.B) {
			sh := stripe(b, bc.c, bc.chunk, 1)
			m := min(bc.c.ParityShards(), bc.c.DataShards())
			work := make([][]byte, len(sh))
			cm := startCPU(b, int64(bc.c.DataShards()*bc.chunk))
			for range b.N {
				copy(work, sh)
				for i := 0; i < m; i++ {
					work[i] = nil
				}
				if err := bc.c.Reconstruct(work); err != nil {
					b.Fatal(err)
				}
			}
			cm.stop(b)
		})
	}
}

// benchRepair runs helper side and relayer side of the plan for failed.
// cpuMB/s counts both (all helpers on this one core); relayMB/s counts the
// relayer alone, the compute of a repair worker whose helpers are remote.
func benchRepair(b *testing.B, bc benchCase, failed []int) {
	p, err := bc.c.RepairPlan(failed)
	if err != nil {
		b.Fatal(err)
	}
	sh := stripe(b, bc.c, bc.chunk, 1)
	sent := make([][]byte, len(p.Helpers))
	out := make([][]byte, len(p.Failed))
	relay := 0.0
	cm := startCPU(b, int64(len(failed)*bc.chunk))
	for range b.N {
		for i := range p.Helpers {
			if sent[i], err = p.Helpers[i].Produce(p.SubChunks, sh[p.Helpers[i].Shard], sent[i][:0]); err != nil {
				b.Fatal(err)
			}
		}
		t0 := threadCPU()
		if err := p.Rebuild(bc.chunk, sent, out); err != nil {
			b.Fatal(err)
		}
		relay += threadCPU() - t0
	}
	cm.stop(b)
	b.ReportMetric(p.Ratio(), "M")
	if relay > 0 {
		b.ReportMetric(float64(len(failed)*bc.chunk)*float64(b.N)/relay/1e6, "relayMB/s")
	}
}

func BenchmarkRepair1(b *testing.B) {
	for _, bc := range benchCases(b) {
		b.Run(bc.label(), func(b *testing.B) { benchRepair(b, bc, []int{0}) })
	}
}

// BenchmarkRepair2 uses shards 0 and m: different Clay y-sections, the
// hard (augmented) case.
func BenchmarkRepair2(b *testing.B) {
	for _, bc := range benchCases(b) {
		b.Run(bc.label(), func(b *testing.B) { benchRepair(b, bc, []int{0, bc.c.ParityShards()}) })
	}
}

// BenchmarkRepair2Same uses shards 0 and 1: one Clay y-section, repaired at
// the cut-set bound.
func BenchmarkRepair2Same(b *testing.B) {
	for _, bc := range benchCases(b) {
		b.Run(bc.label(), func(b *testing.B) { benchRepair(b, bc, []int{0, 1}) })
	}
}

func BenchmarkRepair3(b *testing.B) {
	for _, bc := range benchCases(b) {
		b.Run(bc.label(), func(b *testing.B) { benchRepair(b, bc, []int{0, 1, bc.c.ParityShards()}) })
	}
}

// BenchmarkRelay1 is the relayer side of a single repair alone (helpers
// run on other machines): the compute a repair worker spends per rebuilt
// byte.
func BenchmarkRelay1(b *testing.B) {
	for _, bc := range benchCases(b) {
		b.Run(bc.label(), func(b *testing.B) {
			p, err := bc.c.RepairPlan([]int{0})
			if err != nil {
				b.Fatal(err)
			}
			sh := stripe(b, bc.c, bc.chunk, 1)
			sent := make([][]byte, len(p.Helpers))
			for i := range p.Helpers {
				if sent[i], err = p.Helpers[i].Produce(p.SubChunks, sh[p.Helpers[i].Shard], nil); err != nil {
					b.Fatal(err)
				}
			}
			out := make([][]byte, 1)
			cm := startCPU(b, int64(bc.chunk))
			for range b.N {
				if err := p.Rebuild(bc.chunk, sent, out); err != nil {
					b.Fatal(err)
				}
			}
			cm.stop(b)
		})
	}
}
