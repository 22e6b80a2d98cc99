// Package cluster is regen's membership: every gateway and shard server joins
// one memberlist (SWIM gossip) cluster and learns who else is there, what
// role they play and where their HTTP endpoints are.
//
// It is the only package that imports memberlist. Everything else sees
// Members with a State (alive, suspect, dead, left) and a compact Meta. Node
// names in memberlist are regen's stable node IDs, so a server that comes
// back on a new address is still the same node.
//
// memberlist forgets dead nodes after a while; this package remembers every
// node it has seen for the life of the process, so callers can still report
// them (and placement never depends on them: rendezvous order among live
// nodes does not change when others disappear).
package cluster
