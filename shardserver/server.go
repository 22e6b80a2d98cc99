package shardserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// Server is one shard server: its shard files, its metadata store, the
// HTTP handler that serves them and the background GC loops.
type Server struct {
	cfg    Config
	log    *slog.Logger
	meta   *metadata.Store
	shards *shardStore
	m      *metrics
	now    func() time.Time // NB: a seam so GC tests need not sleep
	leases leaseTable
	rep    *repairState
	peers  versionAsker // confirm jobs ask peers through it
	tpeers tombstoneAPI // tombstone collection asks peers through it
	notes  committedSet // versions gateways reported on a write quorum
	codes  codec.Cache  // for write quorums
	// confirmNow wakes Run for a confirm job due at once (a key that
	// reached metadata.MaxPrevious), rather than at the next GC tick.
	confirmNow chan struct{}
	// early takes noted versions to runEarlyConfirms (confirm_early.go).
	early chan shardrpc.VersionRef
	// drainMu serializes drain flag changes (file and gossip together).
	drainMu sync.Mutex
	// dataPath counts the data-path steps bytes took here (see
	// DataPathBytes).
	dataPath atomic.Int64
	written  atomic.Int64 // shard bytes written durably
	// tombBlocked counts tombstone checks a silent server blocked (for
	// the stats: an operator sees why tombstones stay).
	tombBlocked atomic.Int64
	// runStart is when Run started (zero until then); tombstone checks
	// wait for the gossip view to settle after it. Only Run's goroutine
	// touches it.
	runStart time.Time

	handler   http.Handler
	closeOnce sync.Once
	closeErr  error
}

// New opens the metadata store under DataDir/meta and the shard store under
// DataDir/shards.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fsys := cfg.FS
	if fsys == nil {
		fsys = OSFS{}
	}
	root := filepath.Join(cfg.DataDir, "shards")
	if err := fsys.MkdirAll(root); err != nil {
		return nil, fmt.Errorf("shardserver: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("shardserver: %w", err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("shardserver: register metrics: %w", err)
	}
	meta, err := metadata.Open(filepath.Join(cfg.DataDir, "meta"), metadata.Options{NodeID: cfg.NodeID, Logger: log, CacheSize: cfg.MetaCache})
	if err != nil {
		return nil, fmt.Errorf("shardserver: %w", err)
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(newEngineCollector(meta.EngineStats)); err != nil {
			meta.Close()
			return nil, fmt.Errorf("shardserver: register metrics: %w", err)
		}
	}
	peers := shardrpc.New(cfg.Secret, cfg.PeerHTTP)
	s := &Server{
		cfg:    cfg,
		log:    log,
		meta:   meta,
		shards: &shardStore{fs: fsys, root: root, blockSize: cfg.BlockSize},
		m:      m,
		now:    time.Now,
		peers:  peers,
		tpeers: peers,

		confirmNow: make(chan struct{}, 1),
		early:      make(chan shardrpc.VersionRef, earlyQueue),
	}
	if s.rep, err = newRepairState(cfg); err != nil {
		meta.Close()
		return nil, fmt.Errorf("shardserver: register metrics: %w", err)
	}
	s.handler = s.routes()
	return s, nil
}

// Close closes the metadata store. Stop serving and Run first. Closing
// twice is harmless.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.meta.Close() })
	return s.closeErr
}

// Store returns the server's metadata store, for wiring that runs in the
// same process (the repair worker).
func (s *Server) Store() *metadata.Store { return s.meta }

// Handler returns the HTTP API. Everything but the health probes must be
// signed with the key of the cluster secret (shardrpc.Verifier), and a
// panic in a handler fails only its request. Serve it with an http.Server
// that has a ReadHeaderTimeout but no Read/WriteTimeout (shard streams are
// long): bound body reads and writes per call instead (connguard).
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	api := http.NewServeMux()
	shard := shardrpc.PathShards + "{file}/{idx}"
	for _, r := range []struct {
		pattern, route string
		h              http.HandlerFunc
	}{
		{"PUT " + shard, "put_shard", s.putShard},
		{"GET " + shard, "get_shard", s.getShard},
		{"HEAD " + shard, "stat_shard", s.statShard},
		{"DELETE " + shard, "delete_shard", s.deleteShard},
		{"POST " + shardrpc.PathManifests, "put_manifest", s.putManifest},
		{"GET " + shardrpc.PathManifests, "get_manifest", s.getManifest},
		{"GET " + shardrpc.PathManifestVersions, "get_manifest_versions", s.getManifestVersions},
		{"POST " + shardrpc.PathManifestVersionsBatch, "get_manifest_versions_batch", s.getManifestVersionsBatch},
		{"POST " + shardrpc.PathManifestsBatch, "put_manifests_batch", s.putManifestsBatch},
		{"POST " + shardrpc.PathCommitted, "committed", s.confirmed}, // older gateways: noted, not marked
		{"POST " + shardrpc.PathConfirmed, "confirmed", s.confirmed},
		{"POST " + shardrpc.PathManifestAbort, "abort_manifest", s.abortManifest},
		{"POST " + shardrpc.PathManifestDeleteVersion, "delete_version", s.deleteVersion},
		{"POST " + shardrpc.PathTombstonesRemove, "remove_tombstones", s.removeTombstones},
		{"GET " + shardrpc.PathList, "list", s.list},
		{"POST " + shardrpc.PathBuckets, "put_bucket", s.putBucket},
		{"GET " + shardrpc.PathBuckets, "list_buckets", s.listBuckets},
		{"POST " + shardrpc.PathAccessKeys, "put_access_key", s.putAccessKey},
		{"GET " + shardrpc.PathAccessKeys, "list_access_keys", s.listAccessKeys},
		{"GET " + shardrpc.PathStats, "stats", s.stats},
		{"POST " + shardrpc.PathUploads, "put_upload", s.putUpload},
		{"GET " + shardrpc.PathUploads, "get_upload", s.getUpload},
		{"GET " + shardrpc.PathUploadList, "list_uploads", s.listUploads},
		{"POST " + shardrpc.PathUploadParts, "put_upload_part", s.putUploadPart},
		{"GET " + shardrpc.PathUploadParts, "list_upload_parts", s.listUploadParts},
		{"POST " + shardrpc.PathUploadFinish, "finish_upload", s.finishUpload},
		{"POST " + shardrpc.PathLeases, "acquire_lease", s.acquireLease},
		{"DELETE " + shardrpc.PathLeases, "release_lease", s.releaseLease},
		{"POST " + shardrpc.PathDrain, "drain", s.drain},
		{"GET " + shardrpc.PathSyncDigest, "sync_digest", s.syncDigest},
		{"POST " + shardrpc.PathSyncEntries, "sync_entries", s.syncEntries},
	} {
		api.HandleFunc(r.pattern, s.m.instrument(r.route, r.h))
	}
	for _, r := range s.repairRoutes() {
		api.HandleFunc(r.pattern, s.m.instrument(r.name, r.h))
	}
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// NB: a JSON code, so a client never mistakes a wrong path for a
		// missing shard.
		shardrpc.WriteError(w, http.StatusNotFound, shardrpc.CodeNoRoute, r.Method+" "+r.URL.Path)
	})

	root := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	root.HandleFunc("GET "+shardrpc.PathHealth, ok)
	root.HandleFunc("GET "+shardrpc.PathReady, ok)
	root.Handle("/", api)
	// NB: the whole mux is behind the signature check (the health probes
	// are its public paths), so a route added above is covered without a
	// word. cmd wraps its outer mux the same way; a request verified there
	// is not verified (nor its nonce spent) twice.
	return shardrpc.Recover(s.log, shardrpc.NewVerifier(s.cfg.Secret, shardrpc.VerifierOptions{Logger: s.log}).Middleware(root))
}

// earlyConfirmGap is the least time between two runs of the confirm queue
// woken by keys that reached metadata.MaxPrevious.
const earlyConfirmGap = time.Second

// Run runs the background loops (confirm, tombstone and GC queues, orphan
// sweep, abandoned multipart uploads) until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	gc := time.NewTicker(s.cfg.GCInterval)
	defer gc.Stop()
	sweep := time.NewTicker(s.cfg.OrphanSweepInterval)
	defer sweep.Stop()
	uploads := time.NewTicker(s.cfg.UploadSweepInterval)
	defer uploads.Stop()
	var lastConfirms time.Time
	s.runStart = s.now()
	early := make(chan struct{})
	go func() {
		defer close(early)
		s.runEarlyConfirms(ctx)
	}()
	defer func() { <-early }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.confirmNow:
			// NB: at most one such run per earlyConfirmGap: a hot key's
			// writes meanwhile are confirmed together, one round of
			// questions to its peers for many writes.
			if wait := earlyConfirmGap - time.Since(lastConfirms); wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
			lastConfirms = time.Now()
			if _, err := s.runConfirms(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("confirm queue", "err", err)
			}
		case <-gc.C:
			lastConfirms = time.Now()
			if _, err := s.runConfirms(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("confirm queue", "err", err)
			}
			if _, err := s.collectGarbage(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("gc queue", "err", err)
			}
			if n, err := s.runTombstones(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("tombstone queue", "err", err)
			} else if n > 0 {
				s.log.Info("collected tombstones", "tombstones", n)
			}
		case <-sweep.C:
			if _, err := s.sweepOrphans(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("orphan sweep", "err", err)
			}
		case <-uploads.C:
			if _, err := s.expireUploads(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("abandoned upload sweep", "err", err)
			}
		}
	}
}

// DataPathBytes is how many byte-steps of the shard data path this server
// has run: a shard byte read and sent counts twice, received and written
// twice, a repair byte sent or received once. The repair worker divides
// it by the process's CPU time to learn what moving a byte really costs
// here, under whatever else the server is doing.
func (s *Server) DataPathBytes() int64 { return s.dataPath.Load() }

// WrittenBytes is how many shard bytes this server has written durably
// (client writes and rebuilt shards): the repair worker measures the disk
// only while it stays still.
func (s *Server) WrittenBytes() int64 { return s.written.Load() }
