package shardserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regen-s3/regen/metadata"
)

// Config configures a shard server. Start from DefaultConfig.
type Config struct {
	// DataDir holds everything the server owns: node-id, meta/ (pebble)
	// and shards/. Required.
	DataDir string
	// Secret is the cluster secret: requests must be signed with the key
	// derived from it, and this server signs its own with it. Required.
	Secret string
	// NodeID is this server's stable ID; get it from LoadOrCreateNodeID.
	// Required.
	NodeID string

	// BlockSize is the checksum block of new shard files, in bytes.
	// Default 64 KiB: small enough that a ranged read verifies little
	// beyond what it returns, large enough that the 4-byte CRC per block
	// costs 0.006% of space. Existing files keep the size in their header.
	BlockSize int
	// GCDelay is how long after a replacement (or deletion) its confirm
	// job runs: only once the replacing version is confirmed are the
	// replaced version's shard files collected, so GETs of the old version
	// that are in flight can finish. Default 1m.
	GCDelay time.Duration
	// GCInterval is how often the GC and confirm queues are polled.
	// Default 5s.
	GCInterval time.Duration
	// RollbackAfter is how long a manifest that replaced another may stay
	// unconfirmed (held by fewer than a write quorum of its placement)
	// before it is rolled back, if the servers that answered prove it
	// cannot have been acknowledged. It must outlast the slowest PUT from
	// its first manifest write to its last, or a write still in flight is
	// undone here. Default 10m.
	RollbackAfter time.Duration
	// ConfirmRetry is how long a confirm job that could not decide waits
	// before it asks the peers again (at most a quarter of RollbackAfter,
	// at least 1s). Default 30s.
	ConfirmRetry time.Duration
	// TombstoneGrace is how long after a tombstone (a null delete) is
	// stored here before it may be collected (tombstones.go). It must
	// outlast every attempt to write an older version of its key that
	// may still be under way: a client's manifest write (the gateway's
	// shard client waits up to a minute for an answer, and a fenced write
	// is tried again for up to 10 s), a repair switch and a manifest sync
	// hand-over (30 s each), and the slowest PUT that RollbackAfter
	// assumes. Default 1h: six times RollbackAfter's default, sixty times
	// a manifest write's timeout. Tests and chaos runs set it to seconds.
	TombstoneGrace time.Duration
	// TombstoneSettle is how long after Run starts this server waits
	// before it checks tombstones with its peers (it still ends the jobs
	// it can decide alone): a process that just started knows only the
	// servers gossip has shown it so far, and one it has not heard of
	// would not be asked. Default 1m, room for a slow first gossip
	// exchange on a large or busy cluster. Tests whose cluster is whole
	// before the first DELETE set it to seconds.
	TombstoneSettle time.Duration
	// Members returns the node IDs of every shard server this one knows,
	// live or dead (cmd: the gossip view, which remembers dead servers
	// for the life of the process). A tombstone is collected only once
	// all of them answered. Nil: no tombstone is ever collected.
	Members func() []string
	// Peers returns the shard API address of a live peer by node ID, for
	// confirm jobs. Nil, or ok=false: the peer counts as unreachable, so
	// replaced versions are kept (never rolled back, never collected).
	Peers func(nodeID string) (addr string, ok bool)
	// OnStored, if set, is told of every manifest that became current
	// here (cmd wires it to the repair worker's queue of writes that
	// missed a down server, repair.Worker.NoteWrite). It must not block.
	OnStored func(m *metadata.Manifest)
	// OnInStep, if set, is told of every peer that compared its range
	// digest with this server's and found them equal (cmd wires it to
	// repair.Worker.NotePeerInStep, which then leaves that peer out of
	// its next periodic comparison). It must not block.
	OnInStep func(peer string)
	// OnDrain advertises a changed drain flag (cmd wires it to the gossip
	// meta); it runs after the flag is persisted, one call at a time.
	// Nil: nothing to tell.
	OnDrain func(draining bool) error
	// OrphanAge is the age after which a shard file no manifest references
	// is deleted (leftovers of failed PUTs, and temp files of crashed
	// ones). It must outlast the slowest PUT between its first shard and
	// its manifest. Default 24h.
	OrphanAge time.Duration
	// OrphanSweepInterval is how often shard files are swept for orphans.
	// Default 1h.
	OrphanSweepInterval time.Duration
	// UploadMaxAge is the age after which an incomplete multipart upload
	// counts as abandoned and is aborted (its parts deleted). Default 7
	// days, as long as clients reasonably take to finish one.
	UploadMaxAge time.Duration
	// UploadSweepInterval is how often abandoned uploads are looked for.
	// Default 1h.
	UploadSweepInterval time.Duration
	// MaxJSONBody caps manifest and bucket request bodies. Default 64 MiB:
	// a 10,000-part manifest with inline checksums is a few MiB.
	MaxJSONBody int64
	// MetaCache is the metadata store's block cache in bytes (pebble's).
	// Default metadata.DefaultCacheSize.
	MetaCache int64

	// Logger receives structured logs. Nil discards them.
	Logger *slog.Logger
	// Registerer receives the server's metrics. Nil: metrics are kept but
	// not exported. Never the global default registry implicitly.
	Registerer prometheus.Registerer
	// RepairHTTP carries this server's repair calls to peers (PUSH hops,
	// helper streams, rebuilt-shard stores). Nil: a plain
	// shardrpc.NewRepairHTTPClient; cmd passes one whose dialer is
	// rate-limited (--net-limit).
	RepairHTTP *http.Client
	// PeerHTTP carries this server's other calls to peers (confirm jobs).
	// Nil: shardrpc.NewHTTPClient(); cmd passes one with TLS when shard
	// traffic is encrypted (shardrpc.WithTLS), as it does RepairHTTP.
	PeerHTTP *http.Client
	// FS is the file system shard files live on. Nil means the OS's; tests
	// inject faults here. (The pebble DB always uses the OS's.)
	FS FS
}

// DefaultConfig returns a Config with every default filled in; DataDir,
// Secret and NodeID are left for the caller.
func DefaultConfig() Config {
	return Config{
		BlockSize:           64 << 10,
		GCDelay:             time.Minute,
		GCInterval:          5 * time.Second,
		RollbackAfter:       10 * time.Minute,
		ConfirmRetry:        30 * time.Second,
		TombstoneGrace:      time.Hour,
		TombstoneSettle:     time.Minute,
		OrphanAge:           24 * time.Hour,
		OrphanSweepInterval: time.Hour,
		UploadMaxAge:        7 * 24 * time.Hour,
		UploadSweepInterval: time.Hour,
		MaxJSONBody:         64 << 20,
		MetaCache:           metadata.DefaultCacheSize,
	}
}

// ErrInvalidConfig is returned by Validate.
var ErrInvalidConfig = errors.New("shardserver: invalid config")

// MinTombstoneGrace bounds Config.TombstoneGrace from below. It is far
// below a safe production value (see TombstoneGrace), which depends on
// the gateways' timeouts; it exists for tests, which run writes that
// finish in milliseconds.
const MinTombstoneGrace = time.Second

// MaxBlockSize bounds Config.BlockSize (and what a shard header may claim),
// which bounds per-request memory.
const MaxBlockSize = 16 << 20

// Validate checks c.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case c.DataDir == "":
		return bad("DataDir is required")
	case c.MetaCache < 0:
		return bad("negative MetaCache")
	case c.Secret == "":
		return bad("Secret is required")
	case !validNodeID(c.NodeID):
		return bad("NodeID %q is not 16 hex digits", c.NodeID)
	case c.BlockSize < 512 || c.BlockSize > MaxBlockSize:
		return bad("BlockSize %d outside 512..%d", c.BlockSize, MaxBlockSize)
	case c.GCDelay < 0:
		return bad("negative GCDelay")
	case c.RollbackAfter <= 0 || c.ConfirmRetry <= 0:
		return bad("RollbackAfter and ConfirmRetry must be positive")
	case c.TombstoneGrace < MinTombstoneGrace:
		return bad("TombstoneGrace %v is below %v; a write in flight could bring a deleted object back", c.TombstoneGrace, MinTombstoneGrace)
	case c.TombstoneSettle < 0:
		return bad("negative TombstoneSettle")
	case c.GCInterval <= 0 || c.OrphanSweepInterval <= 0:
		return bad("GCInterval and OrphanSweepInterval must be positive")
	case c.OrphanAge < time.Minute:
		return bad("OrphanAge %v is below 1m; it would delete shards of PUTs in flight", c.OrphanAge)
	case c.UploadMaxAge < time.Second || c.UploadSweepInterval <= 0:
		return bad("UploadMaxAge must be at least 1s and UploadSweepInterval positive")
	case c.MaxJSONBody <= 0:
		return bad("MaxJSONBody must be positive")
	}
	return nil
}

const nodeIDFile = "node-id"

// LoadOrCreateNodeID returns the node ID stored in dataDir, creating it
// (16 random hex digits, written durably) on first use. Addresses change,
// node IDs do not: manifests name servers by node ID.
func LoadOrCreateNodeID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, nodeIDFile)
	raw, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(raw))
		if !validNodeID(id) {
			return "", fmt.Errorf("shardserver: %s holds %q, not a node ID", path, id)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("shardserver: read node ID: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("shardserver: create data dir: %w", err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("shardserver: node ID: %w", err)
	}
	id := hex.EncodeToString(b[:])
	osfs := OSFS{}
	tmp := path + ".tmp"
	if err := writeFileSync(osfs, tmp, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("shardserver: write node ID: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("shardserver: write node ID: %w", err)
	}
	if err := osfs.SyncDir(dataDir); err != nil {
		return "", fmt.Errorf("shardserver: write node ID: %w", err)
	}
	return id, nil
}

func validNodeID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

func writeFileSync(fsys FS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
