package chaos

import "github.com/regen-s3/regen/internal/cluster"

// Status is the part of the gateway's admin status (GET /_regen/status)
// a chaos run reads. It is declared here rather than imported: the tool
// talks to the gateway over its API, as an operator's would, and nothing
// but cmd and tests imports the gateway package (tests/deps_test.go).
type Status struct {
	Nodes   []NodeStatus  `json:"nodes"`
	Stripes *StripeStatus `json:"stripes,omitempty"`
	Repair  *RepairStatus `json:"repair,omitempty"`
	// TombstonesCollected sums the tombstones the live shard servers
	// collected since they (last) started.
	TombstonesCollected int64 `json:"tombstones_collected"`
}

// NodeStatus is one member in a Status, with the error of its stats call.
type NodeStatus struct {
	cluster.Member
	Error string `json:"error,omitempty"`
}

// StripeStatus counts degraded stripes over the cluster.
type StripeStatus struct {
	Degraded int64 `json:"degraded"`
}

// RepairStatus counts repairs waiting and running.
type RepairStatus struct {
	Queued  int64 `json:"queued"`
	Running int64 `json:"running"`
}

// adminPrefix is where the gateway serves its admin API.
const adminPrefix = "/_regen/"
