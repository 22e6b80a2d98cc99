package gateway

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regen-s3/regen/internal/connguard"
)

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	bytesIn  prometheus.Counter
	bytesOut prometheus.Counter
	degraded prometheus.Counter
	// degradedBytes are the shard bytes degraded stripe reads fetched, by
	// method (stripe.MethodDecode, stripe.MethodMSR).
	degradedBytes *prometheus.CounterVec
	// corruptShards counts shard reads of GETs that met a block failing
	// its checksum: framed shard reads are checked here, not on the
	// shard server, whose regen_shard_checksum_failures_total counts
	// only what it checks itself.
	corruptShards prometheus.Counter
	// panics counts requests whose handler panicked (answered 500).
	panics prometheus.Counter
	// listener is the guarded S3 listener once Serve runs (its counts
	// are exported as they are read).
	listener atomic.Pointer[connguard.Listener]
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regen_s3_requests_total", Help: "S3 requests by operation and HTTP status.",
		}, []string{"op", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "regen_s3_request_seconds", Help: "S3 request latency by operation (to the end of the handler; streamed bodies may continue).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}, []string{"op"}),
		bytesIn:       prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_s3_bytes_in_total", Help: "Object bytes received."}),
		bytesOut:      prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_s3_bytes_out_total", Help: "Object bytes sent."}),
		degraded:      prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_degraded_stripe_reads_total", Help: "Stripes read without a shard their range needed (decoded, or rebuilt like a repair) because it was missing, slow or corrupt."}),
		corruptShards: prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_corrupt_shard_reads_total", Help: "Shard reads of GETs that met a block failing its checksum; the GET was answered from other shards."}),
		degradedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regen_degraded_read_bytes_total",
			Help: "Shard bytes fetched to read stripes whose needed shards were missing, slow or corrupt, by method: decode (k chunks) or msr (repair sub-chunks of the other shards).",
		}, []string{"method"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_s3_handler_panics_total", Help: "S3 requests whose handler panicked; each was answered 500 InternalError and its stack logged."}),
	}
	stat := func(f func(connguard.Stats) float64) func() float64 {
		return func() float64 {
			if l := m.listener.Load(); l != nil {
				return f(l.Stats())
			}
			return 0
		}
	}
	conns := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "regen_s3_connections_open", Help: "Connections open on the S3 listener."},
			stat(func(s connguard.Stats) float64 { return float64(s.Open) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "regen_s3_connections_refused_total", Help: "Connections answered 503 SlowDown and closed: over a connection cap, or while out of file descriptors."},
			stat(func(s connguard.Stats) float64 { return float64(s.Refused) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "regen_s3_accept_fd_exhausted_total", Help: "Accepts that failed for want of file descriptors (the listener backs off and keeps serving)."},
			stat(func(s connguard.Stats) float64 { return float64(s.FDShort) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "regen_s3_connections_reclaimed_total", Help: "Silent connections closed to get file descriptors back."},
			stat(func(s connguard.Stats) float64 { return float64(s.Reclaimed) })),
	}
	if reg != nil {
		reg.MustRegister(conns...)
		reg.MustRegister(m.requests, m.latency, m.bytesIn, m.bytesOut, m.degraded, m.degradedBytes, m.corruptShards, m.panics)
	}
	return m
}

func (m *metrics) observe(op string, status int, d time.Duration) {
	m.requests.WithLabelValues(op, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}
