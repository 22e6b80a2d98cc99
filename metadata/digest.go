package metadata

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
)

// Range digests, for anti-entropy between two shard servers.
//
// Two servers compare what they hold in common without walking it: each
// keeps, per peer, DigestRanges sums, the XOR of a 128-bit hash of every
// (bucket, key, version) both should hold, in the range of its key's hash.
// Equal sums mean equal sets (up to a 2^-128 accident); a differing range
// is the only place to look. The sums are updated with every change of a
// key's current manifest (XOR takes an entry out as it put it in), so they
// cost O(peers) per write and O(ranges) per comparison, never O(objects).
//
// The set a server keeps for peer p (Shared) is its current manifests that
// are live (not tombstones) and whose placement names both itself and p:
// the manifests the sync's per-key rules (repair/worker_sync.go) act on.
// A key's manifests on both sides then meet in the same range of both
// digests, whichever versions they hold:
//   - the same version on both: equal, nothing to do;
//   - different versions, or one side without the key (it missed the
//     write, or holds a tombstone, or a version placed elsewhere): the
//     range differs, and the side holding a live version it shares runs
//     the per-key rules for it.
//
// Tombstones are left out as the full walk left them out: a server holding
// one where a peer holds the older live version is found from the peer's
// side, which pulls the tombstone; a key deleted on every side needs no
// comparison (and tombstones may be collected on one side before another).
// Previous versions are left out too: the per-key rules compare current
// versions only, and noncurrent versions have their own repair.

// DigestRanges is how many hash ranges a digest has.
const DigestRanges = 4096

// Sum is a 128-bit digest.
type Sum [2]uint64

// RangeSums are the digests of one peer's shared set, by range.
type RangeSums [DigestRanges]Sum

// KeyRange is the range of (bucket, key): the top bits of a hash of both,
// so a key stays in one range whatever its version.
func KeyRange(bucket, key string) int {
	h := fnv.New64a()
	writeField(h, bucket)
	writeField(h, key)
	// NB: FNV's top bits hardly change with a key's last bytes (k001,
	// k002, ... would share a few ranges); a finalizer mixes them in.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return int(x >> (64 - 12)) // 2^12 = DigestRanges
}

// EntrySum is the digest of one (bucket, key, version).
func EntrySum(bucket, key string, v Version) Sum {
	h := fnv.New128a()
	writeField(h, bucket)
	writeField(h, key)
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(v.TS))
	h.Write(ts[:])
	writeField(h, v.Writer)
	var out [16]byte
	h.Sum(out[:0])
	return Sum{binary.BigEndian.Uint64(out[:8]), binary.BigEndian.Uint64(out[8:])}
}

// writeField writes s length-first, so that no two (bucket, key) pairs
// hash the same bytes.
func writeField(h interface{ Write([]byte) (int, error) }, s string) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

// Shared reports whether m is in the set that self keeps for peer: a live
// current manifest whose placement names both.
func Shared(m *Manifest, self, peer string) bool {
	return m != nil && !m.Deleted && self != peer && slices.Contains(m.Placement, self) && slices.Contains(m.Placement, peer)
}

// Digests are one server's range sums, per peer. Not safe for concurrent
// use (the Store guards its own).
type Digests struct {
	self  string
	peers map[string]*RangeSums
	roots map[string]Sum // Root of peers' sums, until they change
}

// NewDigests returns empty digests of the server self.
func NewDigests(self string) *Digests {
	return &Digests{self: self, peers: map[string]*RangeSums{}, roots: map[string]Sum{}}
}

// Root returns Peer(peer).Root(), computed once per change of the sums.
func (d *Digests) Root(peer string) Sum {
	if r, ok := d.roots[peer]; ok {
		return r
	}
	r := d.Peer(peer).Root()
	d.roots[peer] = r
	return r
}

// Toggle adds m (a current manifest) to the sums of every peer it is
// shared with, or takes it out if it is in: call it for the manifest a
// change replaced and for the one it made current.
func (d *Digests) Toggle(m *Manifest) {
	if m == nil || m.Deleted || !slices.Contains(m.Placement, d.self) {
		return
	}
	r, sum := KeyRange(m.Bucket, m.Key), EntrySum(m.Bucket, m.Key, m.Version)
	for i, id := range m.Placement {
		if id == d.self || slices.Contains(m.Placement[:i], id) {
			continue
		}
		s := d.peers[id]
		if s == nil {
			s = new(RangeSums)
			d.peers[id] = s
		}
		delete(d.roots, id)
		s[r][0] ^= sum[0]
		s[r][1] ^= sum[1]
	}
}

// Peer returns a copy of the sums kept for peer (all zero: nothing
// shared).
func (d *Digests) Peer(peer string) *RangeSums {
	out := new(RangeSums)
	if s := d.peers[peer]; s != nil {
		*out = *s
	}
	return out
}

// DiffRanges returns the ranges where a and b differ, in order.
func DiffRanges(a, b *RangeSums) []int {
	var out []int
	for r := range a {
		if a[r] != b[r] {
			out = append(out, r)
		}
	}
	return out
}

// Root is a digest of all the sums: two servers whose roots for each
// other are equal hold the same shared set, so a periodic comparison of
// a settled pair sends 16 bytes instead of every range's sum. (A hash of
// the sums, not their XOR: differences in two ranges must never cancel.)
func (s *RangeSums) Root() Sum {
	b, _ := s.MarshalBinary()
	h := sha256.Sum256(b)
	return Sum{binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:16])}
}

// String is the sum in hex, as a URL parameter carries it.
func (s Sum) String() string { return fmt.Sprintf("%016x%016x", s[0], s[1]) }

// ParseSum parses what Sum.String printed.
func ParseSum(x string) (Sum, error) {
	var s Sum
	if len(x) != 32 {
		return s, fmt.Errorf("metadata: sum %q: want 32 hex digits", x)
	}
	if _, err := fmt.Sscanf(x, "%016x%016x", &s[0], &s[1]); err != nil {
		return s, fmt.Errorf("metadata: sum %q: %w", x, err)
	}
	return s, nil
}

// RangeEntry is one manifest of a shared set: what a peer compares, key
// by key, in a range whose sums differ.
type RangeEntry struct {
	Bucket  string  `json:"bucket"`
	Key     string  `json:"key"`
	Version Version `json:"version"`
}

// MarshalBinary encodes the sums, 16 bytes a range, big-endian.
func (s *RangeSums) MarshalBinary() ([]byte, error) {
	out := make([]byte, 0, DigestRanges*16)
	for _, v := range s {
		out = binary.BigEndian.AppendUint64(out, v[0])
		out = binary.BigEndian.AppendUint64(out, v[1])
	}
	return out, nil
}

// UnmarshalBinary decodes what MarshalBinary encoded.
func (s *RangeSums) UnmarshalBinary(b []byte) error {
	if len(b) != DigestRanges*16 {
		return fmt.Errorf("metadata: range sums of %d bytes, want %d", len(b), DigestRanges*16)
	}
	for r := range s {
		s[r] = Sum{binary.BigEndian.Uint64(b[r*16:]), binary.BigEndian.Uint64(b[r*16+8:])}
	}
	return nil
}
