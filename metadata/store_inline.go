package metadata

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Inline data by version.
//
// A small object's data is stored apart from its manifest record, under a
// key named by its key and its version, whether that version is current
// or previous:
//
//	'w' esc(bucket) esc(key) ts(8, BE) writer    inline data of that version
//
// and the record (current or previous) says so with flagInlineV. A write
// that turns the current version into a previous one (an overwrite, a
// delete's tombstone, a repair switch) or back (a rollback, the delete of
// a current version) then moves only the small manifest records; the data
// stays where it was written until its version is dropped, and no write
// has to read it first.
//
// The first layout kept the current version's data under 'i' esc(bucket)
// key and a previous version's inside its record's JSON: a tombstone read
// the object's data and wrote it again into the previous record, which
// the confirm job deleted a minute later, and that was a third of what a
// DeleteObjects of small objects cost each server (35% more keys a second
// without it; BENCHMARKS.md). Records of that layout are still read
// (homeKey, homeRecord) and moved to this one by the first write that
// moves their version: there is no migration pass. A binary that predates
// this layout finds no data for the records this one writes, so a server
// cannot go back to one once it has run this one.
//
// A newer manifest of the same data (a repair switch: a new version and
// placement, the bytes unchanged) names the version that wrote them
// (Manifest.DataOf), and its record points at that version's key: a
// server that holds the data writes none of it again, and a server that
// does not stores it under that same key. The data goes once no record
// of the key names it. In a repair of a million small objects the switch
// wrote each object's data again on every server of its placement, about
// a third of what each switch put into the LSM, and compaction paces the
// repair (BENCHMARKS.md). A binary without DataOf looks for a switched
// version's data under the switch's own version and does not find it:
// like the layout change above, a server cannot go back once it has
// stored a record with DataOf. A rolling upgrade is safe: an older
// server ignores the field and stores the bytes it is sent under the
// switch's own version, and every server loads the data it returns.
const nsInlineVersion byte = 'w'

// flagInlineV marks a record, current or previous, whose version's inline
// data is under its 'w' key (see store.go for the other flags).
const flagInlineV byte = 1 << 4

// flagsInline are the record flags that say a manifest has inline data,
// in either layout.
const flagsInline = flagInline | flagInlineV

func inlineVersionKey(bucket, key string, v Version) []byte {
	k := binary.BigEndian.AppendUint64(appendEscaped(bucketPrefix(nsInlineVersion, bucket), key), uint64(v.TS))
	return append(k, v.Writer...)
}

// inlineRead says which inline data a read of a key's versions loads.
type inlineRead uint8

const (
	// readNoInline loads none: the manifests carry where their data is
	// (Manifest.home), for a caller that writes them back or decides on
	// versions alone.
	readNoInline inlineRead = iota
	// readToMove loads only the data a write must move: a current
	// record's of the first layout (homeKey). A previous record's of that
	// layout comes with the record.
	readToMove
	// readInline loads all of it, for a reader that passes the manifests
	// on.
	readInline
)

// readFor is the inline read of a reader that asks for the data (inline)
// or not.
func readFor(inline bool) inlineRead {
	if inline {
		return readInline
	}
	return readNoInline
}

// homeOfCurrent is where a current record with flags keeps its data.
func homeOfCurrent(flags byte) inlineHome {
	switch {
	case flags&flagInlineV != 0:
		return homeVersion
	case flags&flagInline != 0:
		return homeKey
	}
	return homeNone
}

// homeOfPrevious is where a decoded previous record with flags keeps its
// data.
func homeOfPrevious(flags byte, m *Manifest) inlineHome {
	switch {
	case flags&flagInlineV != 0:
		return homeVersion
	case len(m.Inline) > 0:
		return homeRecord
	}
	return homeNone
}

// loadInline reads m's inline data from its home, if it is not read yet.
func (s *Store) loadInline(bucket, key string, m *Manifest) error {
	if !m.unread() {
		return nil
	}
	var k []byte
	switch m.home {
	case homeKey:
		k = inlineKey(bucket, key)
	case homeVersion:
		k = inlineVersionKey(bucket, key, m.DataVersion())
	default:
		return nil // NB: homeRecord data is read with its record
	}
	inl, err := s.get(k)
	if err != nil {
		// NB: the record says it has inline data and it is gone; that is
		// corruption, not absence.
		return fmt.Errorf("%w: inline data of %s/%s version %s: %w", ErrCorruptRecord, bucket, key, m.Version, err)
	}
	m.Inline = inl
	return nil
}

// placeInline puts the inline data of m, which is current (current) or
// previous after a write, where the write leaves it, and returns the flag
// its record gets (0: no inline data) and the version under whose key the
// data is (the record's DataOf, when not m's own). was is the manifest of
// m's version the store held before the write (nil: none); held the
// versions whose data keys hold data, before the write and placed by it
// so far (placeInline adds the one it writes).
//
// Data already under its key stays: m's version's own (was), or, for a
// manifest whose data is an older version's (DataOf: a repair switch),
// that version's if the store holds it. A current version of the first
// layout that stays current keeps its 'i' key (flagInline), which spares
// a confirmation's drop of previous versions the move. Anything else with
// data is written under m's data version's key: new data, and data of the
// first layout whose version moves (writeVersionsWith deletes the 'i' key
// then). A manifest whose data was not read cannot be moved.
func (s *Store) placeInline(b *pebble.Batch, bucket, key string, m, was *Manifest, current bool, held map[Version]bool) (byte, Version, error) {
	switch {
	case was != nil && was.home == homeVersion:
		// NB: the stored record's data key, which names where the data
		// is even if m names another (a record stored before its
		// writer's DataOf, or by a binary without it).
		return flagInlineV, was.DataVersion(), nil
	case was != nil && was.home == homeKey && current:
		return flagInline, Version{}, nil
	}
	data := m.Inline
	if len(data) == 0 && was != nil {
		data = was.Inline
	}
	dv := m.DataVersion()
	switch {
	case (len(data) > 0 || m.unread()) && held[dv]:
		// NB: a version's data never changes, so the bytes under its
		// key are m's.
		return flagInlineV, dv, nil
	case len(data) > 0:
		if err := b.Set(inlineVersionKey(bucket, key, dv), data, nil); err != nil {
			return 0, Version{}, err
		}
		held[dv] = true
		return flagInlineV, dv, nil
	case m.unread() || (was != nil && was.unread()):
		return 0, Version{}, errors.New("a manifest read without its inline data written where its data must move")
	}
	return 0, Version{}, nil
}
