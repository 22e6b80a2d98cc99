package metadata

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Committed marks.
//
// A gateway that saw a manifest stored by a write quorum tells the servers
// that stored it (the shard API's committed notice), and each marks its
// current record: flagCommitted in the value header. A reader that meets
// the mark knows the version is visible. Gateways no longer let it stand
// in for k votes (docs/CONSISTENCY.md, rule 1: chaos seed 8383).
//
// The mark is a hint that can only be missing, never wrong: it is set
// only on the exact version named (the current record's), it goes
// whenever the record gets another current version, and it is written
// without a sync (a crash that loses it costs a reader a few more calls).
// It is never read from a client's manifest: Manifest has no field for
// it, so no write can carry one in.

// flagCommitted marks a current manifest value whose version a gateway
// reported as stored on a write quorum.
const flagCommitted byte = 1 << 3

// Lookup is what a server answers a reader about one key: its current
// manifest, the previous versions it keeps (newest first) and whether the
// current one is marked committed.
type Lookup struct {
	Current   *Manifest
	Previous  []*Manifest
	Committed bool
}

// Lookup returns the versions of (bucket, key), as Versions does, and the
// committed mark of the current one; ErrNotFound when the store holds no
// version of the key. With inline false, the inline data of a small
// object is left out (not read), for readers that need the version and
// its attributes only. Previous versions are read only when the current
// record says the key has some (flagPrevious), so the common key costs
// one read.
func (s *Store) Lookup(ctx context.Context, bucket, key string, inline bool) (Lookup, error) {
	if err := ctx.Err(); err != nil {
		return Lookup{}, err
	}
	m, flags, err := s.getCurrent(bucket, key, inline)
	if err != nil {
		return Lookup{}, err
	}
	out := Lookup{Current: m, Committed: flags&flagCommitted != 0}
	if flags&flagPrevious != 0 {
		if out.Previous, err = s.previous(bucket, key); err != nil {
			return Lookup{}, err
		}
	}
	return out, nil
}

// RawManifest is a manifest as the store keeps it: JSON holds every
// field but the inline data, which is apart in Inline (nil when the
// object has none or it was not asked for). Decoding JSON and setting
// Inline gives the manifest back.
type RawManifest struct {
	JSON   []byte
	Inline []byte
}

// Decode returns the manifest r holds. It decodes as the store does
// (decodeJSON: goccy/go-json, which reads what encoding/json wrote into
// the same values at a third of the CPU), so a gateway reading a lookup
// reply pays what a server's decode used to cost, not more. Inline is
// r.Inline, not a copy.
func (r RawManifest) Decode() (*Manifest, error) {
	m := new(Manifest)
	if err := decodeJSON(r.JSON, m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %w", ErrCorruptRecord, err)
	}
	if len(r.Inline) > 0 {
		m.Inline = r.Inline
	}
	return m, nil
}

// RawLookup is a Lookup whose manifests are not decoded.
type RawLookup struct {
	Current   RawManifest
	Previous  []RawManifest
	Committed bool
}

// LookupRaw is Lookup for a server that passes the manifests on (the
// shard API's binary lookup reply): the current manifest's JSON is the
// stored record's, so the common lookup decodes and encodes nothing, and
// every field of a manifest, present or added later, crosses unchanged.
// The record's JSON is not parsed here; a reader that cannot decode it
// has met a corrupt record. Previous versions, which keep their inline
// data in their JSON, are decoded and encoded without it.
func (s *Store) LookupRaw(ctx context.Context, bucket, key string, inline bool) (RawLookup, error) {
	if err := ctx.Err(); err != nil {
		return RawLookup{}, err
	}
	val, err := s.get(manifestKey(bucket, key))
	if err != nil {
		return RawLookup{}, err
	}
	if len(val) < 2 || val[0] != valueFormat {
		return RawLookup{}, fmt.Errorf("%w: manifest %s/%s: unknown value format", ErrCorruptRecord, bucket, key)
	}
	out := RawLookup{Current: RawManifest{JSON: val[2:]}, Committed: val[1]&flagCommitted != 0}
	if inline && val[1]&flagInline != 0 {
		if out.Current.Inline, err = s.get(inlineKey(bucket, key)); err != nil {
			// NB: as in getCurrent, missing inline data is corruption.
			return RawLookup{}, fmt.Errorf("%w: inline data of %s/%s: %w", ErrCorruptRecord, bucket, key, err)
		}
	}
	if val[1]&flagPrevious == 0 {
		return out, nil
	}
	prev, err := s.previous(bucket, key)
	if err != nil {
		return RawLookup{}, err
	}
	for _, p := range prev {
		rm := RawManifest{}
		if inline {
			rm.Inline = p.Inline
		}
		p.Inline = nil
		if rm.JSON, err = json.Marshal(p); err != nil {
			return RawLookup{}, fmt.Errorf("metadata: encode previous version of %s/%s: %w", bucket, key, err)
		}
		out.Previous = append(out.Previous, rm)
	}
	return out, nil
}

// MarkCommitted marks version v of (bucket, key) committed: a gateway saw
// it stored on a write quorum. Only the current record is marked, and only
// when its version is v; current reports whether it is (marked now or
// before), previous whether the key has previous versions (its confirm
// job may then use the notice). The mark is written without a sync.
func (s *Store) MarkCommitted(ctx context.Context, bucket, key string, v Version) (current, previous bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, false, err
	}
	mk := manifestKey(bucket, key)
	unlock := s.lockKey(mk)
	defer unlock()
	val, err := s.get(mk)
	if err != nil {
		return false, false, ignoreNotFound(err)
	}
	m, err := decodeManifest(val)
	if err != nil {
		return false, false, fmt.Errorf("%w: manifest %s/%s: %w", ErrCorruptRecord, bucket, key, err)
	}
	if m.Version != v {
		return false, false, nil
	}
	previous = val[1]&flagPrevious != 0
	if val[1]&flagCommitted != 0 {
		return true, previous, nil
	}
	val[1] |= flagCommitted
	if err := s.db.Set(mk, val, pebble.NoSync); err != nil {
		return false, false, fmt.Errorf("metadata: mark %s/%s committed: %w", bucket, key, err)
	}
	return true, previous, nil
}

// CurrentIs reports whether v is the current version of (bucket, key)
// here and whether the key has previous versions, as MarkCommitted does,
// but writes nothing: for a notice that may serve a confirm job but must
// not vouch for the version to readers (a repair switch's, shard API
// PathConfirmed). It takes no lock: the answer is a hint the confirm job
// checks against its own version, so a write racing it costs at most an
// unused note.
func (s *Store) CurrentIs(ctx context.Context, bucket, key string, v Version) (current, previous bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, false, err
	}
	val, err := s.get(manifestKey(bucket, key))
	if err != nil {
		return false, false, ignoreNotFound(err)
	}
	// NB: the version alone is decoded: a notice names thousands of keys
	// a second while a repair switches a dead server's objects.
	var m struct {
		Version Version `json:"version"`
	}
	if err := decodeValue(val, &m); err != nil {
		return false, false, fmt.Errorf("%w: manifest %s/%s: %w", ErrCorruptRecord, bucket, key, err)
	}
	if m.Version != v {
		return false, false, nil
	}
	return true, val[1]&flagPrevious != 0, nil
}

// committedFlag returns flagCommitted when the record at mk is marked.
// writeVersions asks only when the record's version stays current (an
// older write kept as a previous version, DropPrevious), so the mark
// stays with its version. The caller holds the key's lock.
func (s *Store) committedFlag(mk []byte) byte {
	val, err := s.get(mk)
	if err != nil || len(val) < 2 {
		return 0
	}
	return val[1] & flagCommitted
}
