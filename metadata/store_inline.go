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
		k = inlineVersionKey(bucket, key, m.Version)
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
// its record gets (0: no inline data). was is the manifest of m's version
// the store held before the write (nil: none).
//
// Data already under its version's key stays. A current version of the
// first layout that stays current keeps its 'i' key (flagInline), which
// spares a confirmation's drop of previous versions the move. Anything
// else with data is written under its version's key: new data, and data
// of the first layout whose version moves (writeVersionsWith deletes the
// 'i' key then). A manifest whose data was not read cannot be moved.
func (s *Store) placeInline(b *pebble.Batch, bucket, key string, m, was *Manifest, current bool) (byte, error) {
	switch {
	case was != nil && was.home == homeVersion:
		return flagInlineV, nil
	case was != nil && was.home == homeKey && current:
		return flagInline, nil
	}
	data := m.Inline
	if len(data) == 0 && was != nil {
		data = was.Inline
	}
	switch {
	case len(data) > 0:
		if err := b.Set(inlineVersionKey(bucket, key, m.Version), data, nil); err != nil {
			return 0, err
		}
		return flagInlineV, nil
	case m.unread() || (was != nil && was.unread()):
		return 0, errors.New("a manifest read without its inline data written where its data must move")
	}
	return 0, nil
}
