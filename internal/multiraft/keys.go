package multiraft

import "encoding/binary"

// Key layout in the shared pebble DB. Every key of group g starts with
// 'G' BE32(g); what follows says what it is:
//
//	'G' g 0x01              HardState (term, vote, commit); never excised,
//	                        so a replica re-created after removal keeps its
//	                        vote and cannot vote twice in one term
//	'G' g 0x02 BE64(i)      log entry i
//	'G' g 0x03 0x00 'a'     applied index and term
//	'G' g 0x03 0x00 'c'     ConfState as of the applied index
//	'G' g 0x03 0x00 't'     truncated index and term: the log starts after it
//	'G' g 0x03 0x01 ...     the state machine's keys (StatePrefix)
//
// The log and the state (0x02 and 0x03) are contiguous, so installing a
// snapshot replaces both with one atomic IngestAndExcise of that span.
// Host-wide keys start with 'H': 'H' 'r' BE32(g) says group g has a
// replica here.
const (
	nsGroup byte = 'G'
	nsHost  byte = 'H'

	subHardState byte = 0x01
	subLog       byte = 0x02
	subState     byte = 0x03
	subEnd       byte = 0x04
)

func groupKey(g uint32, sub byte) []byte {
	k := make([]byte, 0, 16)
	k = append(k, nsGroup)
	k = binary.BigEndian.AppendUint32(k, g)
	return append(k, sub)
}

func hardStateKey(g uint32) []byte { return groupKey(g, subHardState) }

func logKey(g uint32, i uint64) []byte {
	return binary.BigEndian.AppendUint64(groupKey(g, subLog), i)
}

func appliedKey(g uint32) []byte   { return append(groupKey(g, subState), 0x00, 'a') }
func confKey(g uint32) []byte      { return append(groupKey(g, subState), 0x00, 'c') }
func truncatedKey(g uint32) []byte { return append(groupKey(g, subState), 0x00, 't') }

// StatePrefix is the prefix under which group g's state machine keeps its
// keys. Everything under it travels with the group's snapshots.
func StatePrefix(g uint32) []byte { return append(groupKey(g, subState), 0x01) }

// replicaSpan is everything a snapshot replaces: the log and the state.
func replicaSpan(g uint32) (start, end []byte) {
	return groupKey(g, subLog), groupKey(g, subEnd)
}

//lint:ignore U1000 the host's cluster-wide key, kept with the key layout it belongs to
func clusterKey() []byte { return []byte{nsHost, 'c'} }

func u64pair(a, b uint64) []byte {
	out := binary.BigEndian.AppendUint64(nil, a)
	return binary.BigEndian.AppendUint64(out, b)
}

func parseU64pair(v []byte) (a, b uint64, ok bool) {
	if len(v) != 16 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint64(v[8:]), true
}
