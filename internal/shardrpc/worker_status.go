package shardrpc

import (
	"context"
	"net/http"
)

// PathRepairStatus answers GET with the RepairStatus of a shard server's
// repair worker.
const PathRepairStatus = "/v1/repair/status"

// PathRepairSync answers POST by starting the server's manifest sync: a
// peer saw it come back, so it may have missed manifest switches.
const PathRepairSync = "/v1/repair/sync"

// RepairStatus is one shard server's view of redundancy and repair. Each
// stripe group is counted by exactly one server, its coordinator (the
// first live server of its placement), so a cluster total is the sum over
// servers.
type RepairStatus struct {
	NodeID  string        `json:"node_id"`
	Stripes StripeCounts  `json:"stripes"`
	Repair  RepairCounts  `json:"repair"`
	Scrub   ScrubCounts   `json:"scrub"`
	Sync    SyncCounts    `json:"sync"`
	Batch   *RepairBatch  `json:"batch,omitempty"`
	Last    *RepairBatch  `json:"last,omitempty"`
	Recent  []RepairEvent `json:"recent,omitempty"`
}

// StripeCounts count the stripe groups a server coordinates.
type StripeCounts struct {
	Total int64 `json:"total"`
	// Noncurrent counts, of Total, the groups of noncurrent versions
	// (a versioned bucket's older versions, which keep their stripes and
	// are repaired and drained alike); the other counts include them.
	Noncurrent int64 `json:"noncurrent,omitempty"`
	// Degraded groups miss at least one shard (down or lost server).
	Degraded int64 `json:"degraded"`
	// LostShards counts missing shards over the degraded groups.
	LostShards int64 `json:"lost_shards"`
	// Waiting groups have lost shards but no server that may take them.
	Waiting int64 `json:"waiting"`
	// Pending groups are degraded only by servers still within the repair
	// grace; GraceLeft is the shortest time, in seconds, until a down
	// server's shards count as lost (0: none pending).
	Pending   int64   `json:"pending"`
	GraceLeft float64 `json:"grace_left_seconds"`
	// Draining groups are fully redundant but have shards on draining
	// servers, still to be moved; DrainWaiting of them have no server
	// that may take those shards (every other live server already holds
	// a shard of the group): they wait for capacity.
	Draining     int64 `json:"draining"`
	DrainWaiting int64 `json:"drain_waiting"`
	// DownSeen are the shard servers (node IDs) down or suspect at the
	// last scan: a watcher knows their shards have been counted.
	DownSeen []string `json:"down_seen,omitempty"`
	// UpSeen are the shard servers the worker took for live at the last
	// scan. A server in neither list is one the worker never heard of (it
	// joined after that server died) and holds no manifest naming it.
	UpSeen []string `json:"up_seen,omitempty"`
	// Scanned is when the last scan ended (RFC 3339), ScanError why the
	// last one failed, if it did: counts older than a few scan intervals
	// mean the worker is stuck, not that nothing is degraded.
	Scanned   string `json:"scanned,omitempty"`
	ScanError string `json:"scan_error,omitempty"`
	// Walked is when the last scan that walked the manifests began: the
	// counts above are of that walk. A scan on a cluster where nothing
	// changed since a walk that found nothing degraded skips the walk
	// (Skipped counts those scans), so Total may miss objects written
	// since Walked.
	Walked  string `json:"walked,omitempty"`
	Skipped int64  `json:"skipped,omitempty"`
}

// SyncCounts count a server's full manifest syncs with its placement
// peers (at start, and whenever a peer comes back), so a watcher can tell
// when the syncs a cluster's start or a return set off are over.
type SyncCounts struct {
	// Full counts the full syncs done since start.
	Full int64 `json:"full"`
	// Pending is true from the moment a full sync is asked for until one
	// that began after the asking has ended.
	Pending bool `json:"pending,omitempty"`

	// Range anti-entropy since start (syncs at start, on returns and
	// periodic): digest ranges compared with peers and those that
	// differed, keys checked with their peers because they differed,
	// and the manifest and shard calls the sync made to peers for them
	// (not the MRF queue's). LastSeconds is the last sync's duration.
	RangesCompared  int64   `json:"ranges_compared,omitempty"`
	RangesDiffering int64   `json:"ranges_differing,omitempty"`
	KeysSynced      int64   `json:"keys_synced,omitempty"`
	ManifestCalls   int64   `json:"manifest_calls,omitempty"`
	LastSeconds     float64 `json:"last_seconds,omitempty"`
	// Peers is the last comparison with each peer, by node ID.
	Peers map[string]PeerSync `json:"peers,omitempty"`
}

// PeerSync is a server's last range comparison with one peer.
type PeerSync struct {
	Compared  int64   `json:"ranges_compared"`
	Differing int64   `json:"ranges_differing"`
	Keys      int64   `json:"keys"` // local keys the peer lacked at their version
	Seconds   float64 `json:"seconds"`
	At        string  `json:"at"` // RFC 3339
	Err       string  `json:"error,omitempty"`
}

// RepairCounts count repair jobs (one per object version) since start.
type RepairCounts struct {
	Queued  int64 `json:"queued"`
	Running int64 `json:"running"`
	Done    int64 `json:"done"`
	// InPlace of the done jobs rebuilt shards onto the very servers that
	// should hold them (a scrub finding, a write a server missed): they
	// healed a placement rather than moved shards off a lost server.
	InPlace    int64            `json:"in_place"`
	Failed     int64            `json:"failed"`
	BytesMoved int64            `json:"bytes_moved"`
	ByMethod   map[string]int64 `json:"by_method"`
	// Remaining is the predicted time, in seconds, to finish what is
	// queued and running with this server's worker pool.
	Remaining float64 `json:"remaining_seconds"`
}

// ScrubCounts count the scrubber's work since start.
type ScrubCounts struct {
	// Passes counts the passes over every shard that ended since start;
	// a pass resumed after a restart counts once, when it ends.
	Passes  int64 `json:"passes"`
	Shards  int64 `json:"shards"`
	Bytes   int64 `json:"bytes"`
	Corrupt int64 `json:"corrupt"`
	Missing int64 `json:"missing"`
}

// RepairBatch is one period of continuous repair work on a server: from
// the first job queued while idle to the moment nothing is left.
type RepairBatch struct {
	Start     string  `json:"start"` // RFC 3339
	Jobs      int64   `json:"jobs"`
	Elapsed   float64 `json:"elapsed_seconds"`
	Predicted float64 `json:"predicted_seconds"`
	Bytes     int64   `json:"bytes"`
	// CPU is the core-seconds the model gives the batch's jobs: servers
	// sharing a host divide its cores by it (processor sharing).
	CPU float64 `json:"cpu_seconds,omitempty"`
}

// RepairEvent is one finished repair, for operators watching.
type RepairEvent struct {
	Object    string  `json:"object"`
	Method    string  `json:"method"`
	Lost      []int   `json:"lost"`
	Predicted float64 `json:"predicted_seconds"`
	Seconds   float64 `json:"seconds"`
	Bytes     int64   `json:"bytes"`
	Err       string  `json:"error,omitempty"`
}

// RepairStatus returns the repair worker status of the server at addr.
func (c *Client) RepairStatus(ctx context.Context, addr string) (RepairStatus, error) {
	var st RepairStatus
	err := c.call(ctx, addr, "repair status", http.MethodGet, PathRepairStatus, nil, nil, &st)
	return st, err
}

// RequestSync asks the server at addr to sync its manifests with its
// placement peers.
func (c *Client) RequestSync(ctx context.Context, addr string) error {
	return c.call(ctx, addr, "request manifest sync", http.MethodPost, PathRepairSync, nil, nil, nil)
}
