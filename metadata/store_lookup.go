package metadata

import (
	"context"
	"encoding/json"
	"fmt"
)

// flagCommitted is a retired flag of the value header: servers set it
// when a gateway reported the current version stored on a write quorum
// (the committed notice, shardrpc.PathCommitted), as a hint for lookups.
// Lookups stopped trusting it (docs/CONSISTENCY.md, rule 1: chaos seed
// 8383) and nothing sets or reads it any more. Records written before
// may still carry it: readers ignore the bit, the next write of the
// record drops it, and the bit must never be given another meaning.
const flagCommitted byte = 1 << 3

// Lookup is what a server answers a reader about one key: its current
// manifest and the previous versions it keeps (newest first).
type Lookup struct {
	Current  *Manifest
	Previous []*Manifest
}

// Lookup returns the versions of (bucket, key), as Versions does;
// ErrNotFound when the store holds no
// version of the key. With inline false, the inline data of a small
// object is left out (not read), for readers that need the version and
// its attributes only. Previous versions are read only when the current
// record says the key has some (flagPrevious), so the common key costs
// one read.
func (s *Store) Lookup(ctx context.Context, bucket, key string, inline bool) (Lookup, error) {
	if err := ctx.Err(); err != nil {
		return Lookup{}, err
	}
	read := readFor(inline)
	m, flags, err := s.getCurrent(bucket, key, read)
	if err != nil {
		return Lookup{}, err
	}
	out := Lookup{Current: m}
	if flags&flagPrevious != 0 {
		if out.Previous, err = s.previous(bucket, key, read); err != nil {
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
	Current  RawManifest
	Previous []RawManifest
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
	out := RawLookup{Current: RawManifest{JSON: val[2:]}}
	if home := homeOfCurrent(val[1]); inline && home != homeNone {
		// NB: the version alone is decoded, to name the data's key.
		m := &Manifest{home: home}
		if home == homeVersion {
			var v struct {
				Version Version `json:"version"`
				DataOf  Version `json:"data_of"`
			}
			if err := decodeValue(val, &v); err != nil {
				return RawLookup{}, fmt.Errorf("%w: manifest %s/%s: %w", ErrCorruptRecord, bucket, key, err)
			}
			m.Version, m.DataOf = v.Version, v.DataOf
		}
		if err := s.loadInline(bucket, key, m); err != nil {
			return RawLookup{}, err
		}
		out.Current.Inline = m.Inline
	}
	if val[1]&flagPrevious == 0 {
		return out, nil
	}
	prev, err := s.previous(bucket, key, readFor(inline))
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

// CurrentIs reports whether v is the current version of (bucket, key)
// here and whether the key has previous versions, and writes nothing:
// for a notice that serves a confirm job (shard API PathConfirmed and
// PathCommitted, from gateways and repair switches). It takes no lock: the answer is a hint the confirm job
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
