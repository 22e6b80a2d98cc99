package shardrpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/regen-s3/regen/metadata"
)

// A listing page (GET PathList) comes in one of two encodings. JSON
// (ListResponse) is what every server speaks. A client that sends
// ParamFormat=FormatBinary gets the binary form below from a server that
// knows it, marked by ContentTypeList, and JSON from one that does not,
// so gateways and shard servers of different versions still list.
//
// Every key of a listing crosses the wire once from each of its n
// servers, so the page's encoding is a listing's main cost on both ends:
// with JSON, field names, quoted times and reflection took most of it.
//
// The binary form: "RL" 0x01, a flags byte (listTruncated), the entry
// count (uvarint), then each entry:
//
//	flags byte    entryPrefix, entryDeleted, entryPrevious, entryNoTime
//	              (a common prefix has entryPrefix, and entryDeleted when
//	              it is unsure: metadata.ListQuery.Unsure)
//	name          the key or common prefix, a string (uvarint length, bytes)
//	key entries only:
//	  version     TS (varint), Writer (string)
//	  size        varint
//	  etag, storage class (strings)
//	  modified    Unix nanoseconds (varint), absent with entryNoTime
//	  code, version ID (strings)
//	  previous    with entryPrevious: a count (uvarint), then each previous
//	              version as a key entry without its name (it is the key's)
const (
	// ParamFormat asks for a reply encoding; GET PathList and the lookups
	// (versions_bin.go) know it.
	ParamFormat = "format"
	// FormatBinary asks for the binary listing page or lookup reply.
	FormatBinary = "bin"
	// ContentTypeList marks a binary listing page.
	ContentTypeList = "application/x-regen-list"
)

const listMagic = "RL\x01"

// maxListReply bounds the buffer a client allocates up front from a
// listing reply's Content-Length (a page of 1,000 rows is about 100 KB);
// a longer reply still reads whole, growing the buffer.
const maxListReply = 4 << 20

// Flags of a listing page and of its entries.
const (
	listTruncated byte = 1 << 0

	entryPrefix   byte = 1 << 0
	entryDeleted  byte = 1 << 1
	entryPrevious byte = 1 << 2
	entryNoTime   byte = 1 << 3
)

// errBadList reports a binary listing page that does not parse.
var errBadList = errors.New("shardrpc: malformed binary listing")

// AppendList appends the binary encoding of a listing page to dst.
func AppendList(dst []byte, es []metadata.ListEntry, truncated bool) []byte {
	dst = append(dst, listMagic...)
	var flags byte
	if truncated {
		flags |= listTruncated
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(len(es)))
	for _, e := range es {
		name, f := e.Key, entryFlags(e)
		if e.Prefix != "" {
			name, f = e.Prefix, entryPrefix
			if e.Deleted {
				f |= entryDeleted
			}
		}
		dst = append(dst, f)
		dst = appendString(dst, name)
		if f&entryPrefix == 0 {
			dst = appendRow(dst, e, f)
		}
	}
	return dst
}

func entryFlags(e metadata.ListEntry) byte {
	var f byte
	if e.Deleted {
		f |= entryDeleted
	}
	if len(e.Previous) > 0 {
		f |= entryPrevious
	}
	if e.Modified.IsZero() {
		f |= entryNoTime
	}
	return f
}

// appendRow appends the fields of key entry e after its name.
func appendRow(dst []byte, e metadata.ListEntry, f byte) []byte {
	dst = binary.AppendVarint(dst, e.Version.TS)
	dst = appendString(dst, e.Version.Writer)
	dst = binary.AppendVarint(dst, e.Size)
	dst = appendString(dst, e.ETag)
	dst = appendString(dst, e.StorageClass)
	if f&entryNoTime == 0 {
		dst = binary.AppendVarint(dst, e.Modified.UnixNano())
	}
	dst = appendString(dst, e.Code)
	dst = appendString(dst, e.VersionID)
	if f&entryPrevious != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(e.Previous)))
		for _, p := range e.Previous {
			pf := entryFlags(p) &^ entryPrevious // previous versions have none
			dst = append(dst, pf)
			dst = appendRow(dst, p, pf)
		}
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// listReader decodes a binary listing page. The page is turned into one
// string, and every string of every row is a piece of it: decoding a page
// makes two allocations (that string and the rows) however many rows it
// has, plus one per key with previous versions.
type listReader struct {
	b   []byte
	s   string // b, as a string
	off int
	err error
}

// DecodeList decodes a binary listing page made by AppendList.
func DecodeList(b []byte) ([]metadata.ListEntry, bool, error) {
	if len(b) < len(listMagic)+1 || string(b[:len(listMagic)]) != listMagic {
		return nil, false, fmt.Errorf("%w: bad header", errBadList)
	}
	truncated := b[len(listMagic)]&listTruncated != 0
	r := &listReader{b: b, s: string(b), off: len(listMagic) + 1}
	n := r.uvarint()
	// NB: every entry takes at least two bytes, so a count beyond that is
	// a lie that must not size an allocation.
	if r.err != nil || n > uint64(r.left()/2) {
		return nil, false, fmt.Errorf("%w: bad count", errBadList)
	}
	es := make([]metadata.ListEntry, 0, n)
	for range n {
		f := r.byte()
		name := r.string()
		var e metadata.ListEntry
		if f&entryPrefix != 0 {
			e.Prefix, e.Deleted = name, f&entryDeleted != 0
		} else {
			e = r.row(name, f, true)
		}
		if r.err != nil {
			return nil, false, r.err
		}
		es = append(es, e)
	}
	if r.left() != 0 {
		return nil, false, fmt.Errorf("%w: %d bytes after the last entry", errBadList, r.left())
	}
	return es, truncated, nil
}

// row decodes the fields of a key entry after its name.
func (r *listReader) row(key string, f byte, top bool) metadata.ListEntry {
	e := metadata.ListEntry{Key: key, Deleted: f&entryDeleted != 0}
	e.Version.TS = r.varint()
	e.Version.Writer = r.string()
	e.Size = r.varint()
	e.ETag = r.string()
	e.StorageClass = r.string()
	if f&entryNoTime == 0 {
		e.Modified = time.Unix(0, r.varint()).UTC()
	}
	e.Code = r.string()
	e.VersionID = r.string()
	if f&entryPrevious != 0 {
		n := r.uvarint()
		if !top || n > uint64(r.left()) {
			r.fail("bad previous versions")
			return e
		}
		e.Previous = make([]metadata.ListEntry, 0, n)
		for range n {
			e.Previous = append(e.Previous, r.row(key, r.byte(), false))
		}
	}
	return e
}

func (r *listReader) left() int { return len(r.b) - r.off }

func (r *listReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errBadList, what)
	}
	r.off = len(r.b)
}

func (r *listReader) byte() byte {
	if r.left() == 0 {
		r.fail("short")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *listReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }
func (r *listReader) varint() int64   { return readVarint(r, binary.Varint) }

func readVarint[T uint64 | int64](r *listReader, read func([]byte) (T, int)) T {
	v, n := read(r.b[r.off:])
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.off += n
	return v
}

// string returns the next string, a piece of the page's string.
func (r *listReader) string() string {
	n := r.uvarint()
	if n > uint64(r.left()) {
		r.fail("short string")
		return ""
	}
	s := r.s[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

// WriteList answers a listing: binary when the request asked for it
// (ParamFormat), JSON otherwise.
func WriteList(w http.ResponseWriter, r *http.Request, es []metadata.ListEntry, truncated bool) {
	if r.URL.Query().Get(ParamFormat) != FormatBinary {
		if es == nil {
			es = []metadata.ListEntry{}
		}
		WriteJSON(w, http.StatusOK, ListResponse{Entries: es, Truncated: truncated})
		return
	}
	b := AppendList(make([]byte, 0, 64+96*len(es)), es, truncated)
	w.Header().Set("Content-Type", ContentTypeList)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b) // NB: a failed write is a broken connection, which the client sees
}
