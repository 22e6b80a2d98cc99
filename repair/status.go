package repair

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// MetricsRegisterer is where the worker registers its collectors
// (a prometheus.Registerer).
type MetricsRegisterer = prometheus.Registerer

type metrics struct {
	stripesTotal, stripesDegraded, lostShards, waiting prometheus.Gauge
	queued, running                                    prometheus.Gauge
	doneC                                              *prometheus.CounterVec
	failed                                             prometheus.Counter
	bytes                                              prometheus.Counter
	decisions                                          *prometheus.CounterVec
	scrubBytes, scrubCorrupt                           prometheus.Counter
	syncRanges, syncDiffering, syncKeys, syncCalls     prometheus.Counter
	syncSeconds                                        prometheus.Gauge
	walks                                              *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "regen", Subsystem: "repair", Name: name, Help: help})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "regen", Subsystem: "repair", Name: name, Help: help})
	}
	m := &metrics{
		stripesTotal:    g("stripes", "Stripe groups this server coordinates."),
		stripesDegraded: g("stripes_degraded", "Coordinated stripe groups missing shards."),
		lostShards:      g("lost_shards", "Missing shards over the degraded stripe groups."),
		waiting:         g("stripes_waiting", "Degraded stripe groups waiting for a server to rebuild onto."),
		queued:          g("queued", "Repair jobs queued."),
		running:         g("running", "Repair jobs running."),
		doneC: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "regen", Subsystem: "repair", Name: "done_total",
			Help: "Repair jobs finished, by method."}, []string{"method"}),
		failed: c("failed_total", "Repair jobs that failed after all retries."),
		bytes:  c("bytes_moved_total", "Bytes moved between servers by repairs."),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "regen", Subsystem: "repair", Name: "decisions_total",
			Help: "Planner decisions, by method (or waiting)."}, []string{"method"}),
		scrubBytes:    c("scrub_bytes_total", "Shard bytes read and verified by the scrubber."),
		scrubCorrupt:  c("scrub_corrupt_total", "Corrupt or missing shards the scrubber found."),
		syncRanges:    c("sync_ranges_compared_total", "Digest ranges the manifest sync compared with peers."),
		syncDiffering: c("sync_ranges_differing_total", "Compared digest ranges that differed."),
		syncKeys:      c("sync_keys_total", "Keys the manifest sync checked with their peers (in differing ranges)."),
		syncCalls:     c("sync_manifest_calls_total", "Manifest and shard calls the manifest sync made to peers for the keys it checked."),
		syncSeconds:   g("sync_seconds", "Duration of the last range-comparison sync."),
		walks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "regen", Subsystem: "repair", Name: "scan_walks_total",
			Help: "Walks of every local manifest by the repair scan, by the reason it walked (first, membership, job, write, full, unsettled)."}, []string{"reason"}),
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{m.stripesTotal, m.stripesDegraded, m.lostShards, m.waiting, m.queued,
			m.running, m.doneC, m.failed, m.bytes, m.decisions, m.scrubBytes, m.scrubCorrupt,
			m.syncRanges, m.syncDiffering, m.syncKeys, m.syncCalls, m.syncSeconds, m.walks} {
			if err := reg.Register(col); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) stripes(c shardrpc.StripeCounts) {
	m.stripesTotal.Set(float64(c.Total))
	m.stripesDegraded.Set(float64(c.Degraded))
	m.lostShards.Set(float64(c.LostShards))
	m.waiting.Set(float64(c.Waiting))
}

func (m *metrics) done(r Result) {
	m.doneC.WithLabelValues(string(r.Method)).Inc()
	m.bytes.Add(float64(r.BytesMoved))
}

func (m *metrics) decision(method string) { m.decisions.WithLabelValues(method).Inc() }

func (m *metrics) walk(why string) { m.walks.WithLabelValues(why).Inc() }

// Status returns the worker's counts.
func (w *Worker) Status() shardrpc.RepairStatus {
	st := shardrpc.RepairStatus{NodeID: w.cfg.NodeID, Stripes: w.scanner.status(), Scrub: w.scrub.status(),
		Sync: w.syncer.status()}
	w.sched.status(&st, w.cal.model())
	return st
}

// Handler serves GET shardrpc.PathRepairStatus. The caller checks the
// cluster secret.
func (w *Worker) Handler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			shardrpc.WriteError(rw, http.StatusMethodNotAllowed, shardrpc.CodeBadRequest, "GET only")
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(w.Status())
	})
}

// SyncHandler serves POST shardrpc.PathRepairSync: a peer saw this server
// come back and asks it to sync its manifests. The caller checks the
// cluster secret.
func (w *Worker) SyncHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			shardrpc.WriteError(rw, http.StatusMethodNotAllowed, shardrpc.CodeBadRequest, "POST only")
			return
		}
		w.syncer.kick()
		rw.WriteHeader(http.StatusNoContent)
	})
}
