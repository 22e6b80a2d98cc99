package shardserver

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The metadata engine's figures are exported with the server's metrics,
// read at the scrape: after manifest writes and reads the store has
// bytes on disk and block cache lookups to show.
func TestEngineMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	env := newEnv(t, func(c *Config) { c.Registerer = reg })
	ctx := context.Background()
	// NB: more than a memtable (4 MiB), so that tables are flushed and
	// reads go through the block cache.
	const n = 60
	for i := range n {
		m := inlineManifest(fmt.Sprintf("k%02d", i), int64(i+1), randBytes(uint64(i), 100<<10))
		if _, _, err := env.client.PutManifest(ctx, env.addr, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if _, err := env.client.GetManifest(ctx, env.addr, "b", fmt.Sprintf("k%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				got[mf.GetName()] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				got[mf.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	for _, name := range []string{"regen_meta_disk_bytes", "regen_meta_read_amplification"} {
		if got[name] <= 0 {
			t.Errorf("%s = %v, want > 0", name, got[name])
		}
	}
	if got["regen_meta_block_cache_hits_total"]+got["regen_meta_block_cache_misses_total"] <= 0 {
		t.Errorf("no block cache lookups counted after reads of flushed manifests: %v", got)
	}
	for _, name := range []string{"regen_meta_l0_tables", "regen_meta_compaction_debt_bytes", "regen_meta_compactions_total", "regen_meta_block_cache_bytes", "regen_meta_l0_sublevels"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s not exported", name)
		}
	}
}
