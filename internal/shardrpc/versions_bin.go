package shardrpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/regen-s3/regen/metadata"
)

// A lookup reply (GET PathManifestVersions, POST PathManifestVersionsBatch)
// comes in one of two encodings, as a listing page does: a client that
// sends ParamFormat=FormatBinary gets the binary form below from a server
// that knows it, marked by ContentTypeVersions, and JSON from one that
// does not, so gateways and shard servers of different versions still
// read.
//
// Every GET and HEAD asks several servers for a key's versions, so the
// reply's encoding is much of what a small read costs: with JSON the
// server decoded the stored manifest and encoded it again, and the
// gateway decoded it, the inline data of a small object as base64 inside
// a JSON string.
//
// In the binary form each manifest travels as the JSON its server stores
// (metadata.RawManifest): the server neither decodes nor encodes it, and
// every field of a manifest, present or added later, crosses unchanged.
// Its inline data travels as raw bytes beside it.
//
//	"RV" 0x01, the key count (uvarint), then each key:
//	flags byte    versionsFound, versionsCommitted, versionsErr
//	found:        the manifest count (uvarint), current first, then each
//	              manifest: its JSON and its inline data (each a uvarint
//	              length, then the bytes; no inline data is length 0)
//	versionsErr:  the message (uvarint length, bytes)
//
// A key with neither versionsFound nor versionsErr is one the server
// holds no version of (a batch's empty answer; a single lookup's is a
// NotFound error reply instead).
const ContentTypeVersions = "application/x-regen-versions"

const versionsMagic = "RV\x01"

// Flags of a key's answer in a binary lookup reply.
const (
	versionsFound     byte = 1 << 0
	versionsCommitted byte = 1 << 1
	versionsErr       byte = 1 << 2
)

// maxVersionsReply bounds the buffer a client allocates up front from a
// lookup reply's Content-Length; a longer reply still reads whole.
const maxVersionsReply = 4 << 20

// errBadVersions reports a binary lookup reply that does not parse.
var errBadVersions = errors.New("shardrpc: malformed binary lookup reply")

// RawKeyVersions is one key's answer as a server sends it in the binary
// form: KeyVersions with its manifests undecoded.
type RawKeyVersions struct {
	Found     bool
	Committed bool
	Err       string
	// Manifests are the versions the server holds, current first.
	Manifests []metadata.RawManifest
}

// RawAnswer is the answer of a lookup: found, with the versions of l; not
// found (l zero); or failed with err.
func RawAnswer(l metadata.RawLookup, err error) RawKeyVersions {
	switch {
	case errors.Is(err, metadata.ErrNotFound):
		return RawKeyVersions{}
	case err != nil:
		return RawKeyVersions{Err: err.Error()}
	}
	ms := make([]metadata.RawManifest, 0, 1+len(l.Previous))
	ms = append(append(ms, l.Current), l.Previous...)
	return RawKeyVersions{Found: true, Manifests: ms}
}

// AppendVersions appends the binary encoding of the answers of a lookup
// reply to dst.
func AppendVersions(dst []byte, keys []RawKeyVersions) []byte {
	dst = append(dst, versionsMagic...)
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for _, k := range keys {
		var f byte
		switch {
		case k.Err != "":
			f = versionsErr
		case k.Found:
			f = versionsFound
			if k.Committed {
				f |= versionsCommitted
			}
		}
		dst = append(dst, f)
		switch {
		case f&versionsErr != 0:
			dst = appendString(dst, k.Err)
		case f&versionsFound != 0:
			dst = binary.AppendUvarint(dst, uint64(len(k.Manifests)))
			for _, m := range k.Manifests {
				dst = appendBytes(dst, m.JSON)
				dst = appendBytes(dst, m.Inline)
			}
		}
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// DecodeVersions decodes a binary lookup reply made by AppendVersions into
// the answers of its keys. Inline data is a slice of b, which the caller
// must not reuse.
func DecodeVersions(b []byte) ([]KeyVersions, error) {
	if len(b) < len(versionsMagic) || string(b[:len(versionsMagic)]) != versionsMagic {
		return nil, fmt.Errorf("%w: bad header", errBadVersions)
	}
	r := &listReader{b: b, off: len(versionsMagic)}
	n := r.uvarint()
	// NB: every key takes at least a byte, so a count beyond that is a
	// lie that must not size an allocation.
	if r.err != nil || n > uint64(r.left()) {
		return nil, fmt.Errorf("%w: bad count", errBadVersions)
	}
	out := make([]KeyVersions, n)
	for i := range out {
		f := r.byte()
		switch {
		case f&versionsErr != 0:
			out[i].Err = string(r.bytes())
		case f&versionsFound != 0:
			ms, err := decodeManifests(r)
			switch {
			case errors.Is(err, errBadVersions):
				return nil, err
			case err != nil:
				// NB: a record this server stored corrupt fails its own
				// key, as the JSON reply's server-side decode did, not
				// the other keys of a batch.
				out[i].Err = err.Error()
			default:
				out[i] = KeyVersions{Current: ms[0], Previous: ms[1:], Committed: f&versionsCommitted != 0}
			}
		}
		if r.err != nil {
			return nil, fmt.Errorf("%w: %w", errBadVersions, r.err)
		}
	}
	if r.left() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last key", errBadVersions, r.left())
	}
	return out, nil
}

// decodeManifests decodes the manifests of a found key: at least one. A
// reply that does not parse is errBadVersions; a manifest whose JSON does
// not decode (a corrupt record) is another error, after the key's bytes
// are read.
func decodeManifests(r *listReader) ([]*metadata.Manifest, error) {
	n := r.uvarint()
	// NB: every manifest takes at least two bytes.
	if r.err != nil || n == 0 || n > uint64(r.left()/2) {
		return nil, fmt.Errorf("%w: bad manifest count", errBadVersions)
	}
	ms := make([]*metadata.Manifest, n)
	var bad error
	for j := range ms {
		js, inline := r.bytes(), r.bytes()
		if r.err != nil {
			return nil, fmt.Errorf("%w: %w", errBadVersions, r.err)
		}
		m, err := metadata.RawManifest{JSON: js, Inline: inline}.Decode()
		if err != nil && bad == nil {
			bad = fmt.Errorf("version %d of the key: %w", j, err)
		}
		ms[j] = m
	}
	if bad != nil {
		return nil, bad
	}
	return ms, nil
}

// bytes returns the next length-prefixed bytes, a slice of the reply.
func (r *listReader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(r.left()) {
		r.fail("short bytes")
		return nil
	}
	b := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return b
}

// WriteVersions answers a lookup in the binary form.
func WriteVersions(w http.ResponseWriter, keys []RawKeyVersions) {
	size := 16
	for _, k := range keys {
		size += 8 + len(k.Err)
		for _, m := range k.Manifests {
			size += 2*binary.MaxVarintLen32 + len(m.JSON) + len(m.Inline)
		}
	}
	b := AppendVersions(make([]byte, 0, size), keys)
	w.Header().Set("Content-Type", ContentTypeVersions)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b) // NB: a failed write is a broken connection, which the client sees
}

// versionsCall does a lookup request that asked for the binary reply
// (ParamFormat) and returns its keys' answers. A server that predates the
// binary form answers JSON: that is decoded into old, and keys is nil.
func (c *Client) versionsCall(ctx context.Context, addr, op, method, path string, q url.Values, body io.Reader, old any) (keys []KeyVersions, err error) {
	resp, err := c.do(ctx, addr, op, method, path, q, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != ContentTypeVersions {
		if err := json.NewDecoder(resp.Body).Decode(old); err != nil {
			return nil, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("decode reply: %w", err)}
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // see call
		return nil, nil
	}
	// NB: the announced length only sizes the buffer, within reason.
	buf := bytes.NewBuffer(make([]byte, 0, int(min(max(resp.ContentLength, 0), maxVersionsReply))+bytes.MinRead))
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("read reply: %w", err)}
	}
	if keys, err = DecodeVersions(buf.Bytes()); err != nil {
		return nil, &NodeError{Addr: addr, Op: op, Err: err}
	}
	return keys, nil
}
