package shardserver

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	shardReads       prometheus.Counter
	shardReadBytes   prometheus.Counter
	shardWrites      prometheus.Counter
	shardWriteBytes  prometheus.Counter
	checksumFailures prometheus.Counter
	gcDeleted        *prometheus.CounterVec // by reason: replaced, orphan, temp
	confirms         *prometheus.CounterVec // confirm job outcomes: confirmed, confirmed_early, rolled_back, retried
	earlyNotices     *prometheus.CounterVec // repair switch notices for an early confirm: queued, waited (for room), dropped
	tombstones       *prometheus.CounterVec // tombstone checks by outcome (tombVerdict, kept)
	requestSeconds   *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		shardReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regen_shard_reads_total", Help: "Shard GET requests that started streaming.",
		}),
		shardReadBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regen_shard_read_bytes_total", Help: "Verified shard data bytes sent.",
		}),
		shardWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regen_shard_writes_total", Help: "Shard files written durably.",
		}),
		shardWriteBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regen_shard_write_bytes_total", Help: "Shard data bytes written durably.",
		}),
		checksumFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regen_shard_checksum_failures_total", Help: "Shard blocks or headers that failed verification.",
		}),
		gcDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regen_shard_gc_deleted_total", Help: "Shard files deleted by garbage collection, by reason.",
		}, []string{"reason"}),
		confirms: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regen_shard_confirm_jobs_total", Help: "Confirm jobs of replaced manifest versions, by outcome (confirmed; confirmed_early: on a quorum notice, before the job was due; rolled_back, retried).",
		}, []string{"outcome"}),
		earlyNotices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regen_shard_early_confirm_notices_total", Help: "Repair switch notices taken for an early confirm run, by result (queued; waited: queued once the full queue had room; dropped: the notice's request ended first, the job runs when due).",
		}, []string{"result"}),
		tombstones: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regen_shard_tombstone_checks_total", Help: "Tombstone collection checks, by outcome (collected, waiting: a server holds an older version, blocked: a server did not answer, superseded, kept: versions under it).",
		}, []string{"outcome"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "regen_shardserver_request_duration_seconds",
			Help:    "Shard server request latency by route and status (shard GETs: until the stream ends).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5ms .. ~2min
		}, []string{"route", "status"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.shardReads, m.shardReadBytes, m.shardWrites, m.shardWriteBytes,
		m.checksumFailures, m.gcDeleted, m.confirms, m.earlyNotices, m.tombstones, m.requestSeconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// instrument records the latency and status of every request to h.
func (m *metrics) instrument(route string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		m.requestSeconds.WithLabelValues(route, strconv.Itoa(sw.status)).Observe(time.Since(start).Seconds())
	}
}

// statusWriter remembers the status a handler sent.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
