package shardserver

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/regen-s3/regen/metadata"
)

// engineCollector exports the metadata store's engine figures
// (metadata.EngineStats), read once per scrape: pebble gathers them over
// every level and cache shard, too much to keep current on each write.
type engineCollector struct {
	stats func() metadata.EngineStats

	cacheHits, cacheMisses, cacheBytes     *prometheus.Desc
	readAmp, l0Tables, l0Sublevels         *prometheus.Desc
	compactionDebt, compactions, diskBytes *prometheus.Desc
	singleDeleteMisuse                     *prometheus.Desc
}

func newEngineCollector(stats func() metadata.EngineStats) *engineCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("regen_meta_"+name, help, nil, nil)
	}
	return &engineCollector{
		stats:              stats,
		cacheHits:          d("block_cache_hits_total", "Metadata store block cache lookups that hit."),
		cacheMisses:        d("block_cache_misses_total", "Metadata store block cache lookups that missed (a read of the table file)."),
		cacheBytes:         d("block_cache_bytes", "Bytes held by the metadata store's block cache."),
		readAmp:            d("read_amplification", "Tables or sublevels a metadata point read may visit."),
		l0Tables:           d("l0_tables", "Tables in level 0 of the metadata store."),
		l0Sublevels:        d("l0_sublevels", "Sublevels of level 0 of the metadata store."),
		compactionDebt:     d("compaction_debt_bytes", "Bytes the metadata store must compact to be stable again (estimate)."),
		compactions:        d("compactions_total", "Compactions the metadata store ran since it opened."),
		diskBytes:          d("disk_bytes", "Bytes the metadata store takes on disk."),
		singleDeleteMisuse: d("single_delete_misuse_total", "Single deletes of the metadata store that a compaction found deleting nothing or over a second write of their key (0 unless a store invariant broke; the log names the key)."),
	}
}

// Describe implements prometheus.Collector.
func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cacheHits, c.cacheMisses, c.cacheBytes, c.readAmp, c.l0Tables,
		c.l0Sublevels, c.compactionDebt, c.compactions, c.diskBytes, c.singleDeleteMisuse} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter(c.cacheHits, float64(st.CacheHits))
	counter(c.cacheMisses, float64(st.CacheMisses))
	gauge(c.cacheBytes, float64(st.CacheBytes))
	gauge(c.readAmp, float64(st.ReadAmp))
	gauge(c.l0Tables, float64(st.L0Tables))
	gauge(c.l0Sublevels, float64(st.L0Sublevels))
	gauge(c.compactionDebt, float64(st.CompactionDebt))
	counter(c.compactions, float64(st.Compactions))
	gauge(c.diskBytes, float64(st.DiskBytes))
	counter(c.singleDeleteMisuse, float64(st.SingleDeleteMisuse))
}
