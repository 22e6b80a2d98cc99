package tests

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// gatewayCounter reads one sample of the gateway's /metrics, e.g.
// `regen_degraded_read_bytes_total{method="msr"}`; 0 when absent.
func (d *devCluster) gatewayCounter(t *testing.T, sample string) float64 {
	t.Helper()
	resp, err := http.Get(d.info.Endpoint + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", sample, err)
			}
			return f
		}
	}
	return 0
}

// A ranged GET of 1 MiB inside the lost data shard of a clay-6-3 stripe
// (the dev STANDARD_IA class) rebuilds that shard's bytes from the repair
// sub-chunks of the 8 other shards, as a repair would, and moves at most
// half the bytes of the conventional decode from k = 6 whole chunks. Both
// figures come from the gateway's regen_degraded_read_bytes_total; the
// decode one is measured by reading the whole stripe, which needs every
// data shard and so decodes.
func TestDegradedRangedReadMSR(t *testing.T) {
	e2e(t)
	// A long grace: the shard stays lost, nothing repairs it meanwhile.
	d := startDev(t, "--repair-grace", "10m")
	c := d.client(t)
	mustMakeBucket(t, c, "msr-read")
	data := randomData(8<<20, 77) // one full stripe and a short one
	put(t, c, "msr-read", "obj", data, minio.PutObjectOptions{StorageClass: "STANDARD_IA", DisableMultipart: true})

	sc := shardrpc.New(d.info.Secret, nil)
	// NB: only the object's n placement servers hold its manifest, and
	// there are more shard servers than that: ask until one has it.
	var m *metadata.Manifest
	var err error
	for _, s := range d.info.Shards {
		if m, err = sc.GetManifest(context.Background(), s.Addr, "msr-read", "obj"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if m.Code != "clay-6-3" || len(m.Parts) != 1 {
		t.Fatalf("object coded %s in %d parts, want clay-6-3 in one", m.Code, len(m.Parts))
	}
	const lost, k = 2, 6
	chunk := m.ChunkSize
	if chunk < 1<<20 {
		t.Fatalf("chunk %d: a 1 MiB range does not fit in one shard's chunk", chunk)
	}
	victim := -1
	for i, s := range d.info.Shards {
		if s.ID == m.Placement[lost] {
			victim = i
		}
	}
	d.killShard(victim)
	waitFor(t, 20*time.Second, "the gateway to see the server dead", func() bool { return d.deadShards(t) == 1 })

	const msr, decode = `regen_degraded_read_bytes_total{method="msr"}`, `regen_degraded_read_bytes_total{method="decode"}`
	ranged := func(off, length int64) (msrBytes, decodeBytes float64) {
		t.Helper()
		m0, d0 := d.gatewayCounter(t, msr), d.gatewayCounter(t, decode)
		var opts minio.GetObjectOptions
		if err := opts.SetRange(off, off+length-1); err != nil {
			t.Fatal(err)
		}
		if got := get(t, c, "msr-read", "obj", opts); !bytes.Equal(got, data[off:off+length]) {
			t.Fatalf("GET bytes %d+%d: wrong bytes", off, length)
		}
		return d.gatewayCounter(t, msr) - m0, d.gatewayCounter(t, decode) - d0
	}
	// 1 MiB inside the lost shard's chunk of stripe 0.
	msrBytes, other := ranged(lost*chunk, 1<<20)
	if msrBytes == 0 || other != 0 {
		t.Fatalf("the 1 MiB GET moved %.0f bytes by msr and %.0f by decode; want msr only", msrBytes, other)
	}
	// The same stripe read whole: conventional decoding.
	other, decodeBytes := ranged(0, k*chunk)
	if decodeBytes < k*float64(chunk) || other != 0 {
		t.Fatalf("the whole-stripe GET moved %.0f bytes by decode and %.0f by msr; want decode of at least %d", decodeBytes, other, k*chunk)
	}
	ratio := msrBytes / decodeBytes
	t.Logf("1 MiB ranged GET in lost shard %d (chunk %d): msr moved %.0f bytes, conventional decode %.0f (%.1f%%)", lost, chunk, msrBytes, decodeBytes, 100*ratio)
	if ratio > 0.5 {
		t.Errorf("msr moved %.1f%% of the conventional decode's bytes, want at most 50%%", 100*ratio)
	}
}
