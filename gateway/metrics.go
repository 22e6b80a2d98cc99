package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	bytesIn  prometheus.Counter
	bytesOut prometheus.Counter
	degraded prometheus.Counter
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
		bytesIn:  prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_s3_bytes_in_total", Help: "Object bytes received."}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_s3_bytes_out_total", Help: "Object bytes sent."}),
		degraded: prometheus.NewCounter(prometheus.CounterOpts{Name: "regen_degraded_stripe_reads_total", Help: "Stripes read by decoding because shards were missing, slow or corrupt."}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, m.bytesIn, m.bytesOut, m.degraded)
	}
	return m
}

func (m *metrics) observe(op string, status int, d time.Duration) {
	m.requests.WithLabelValues(op, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}
