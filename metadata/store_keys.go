package metadata

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
)

// Pebble key layout. Every key starts with a one-byte namespace:
//
//	'm' esc(bucket) key            manifest of (bucket, key), without inline data
//	'i' esc(bucket) key            inline data of that manifest, when it has any
//	'p' esc(partID) esc(bucket) key  part index: a manifest references partID (empty value)
//	'b' name                       bucket record
//	'k' access key ID              access key record (store_accesskey.go)
//	'g' due(8, BE ns) esc(fileID) idx(4, BE)  GC queue entry (empty value)
//	'v', 'c'                       previous versions and confirm jobs (store_versions.go)
//	'u', 'r'                       multipart uploads and parts (store_multipart.go)
//	'l' name                       walk cursors, this server's own (store_cursor.go)
//	't' due esc(bucket) esc(key) version  tombstone jobs (store_tombstones.go)
//	'h'                            range index of the anti-entropy digests (store_digest.go)
//
// esc escapes 0x00 as 0x00 0xFF and terminates the string with 0x00 0x01.
// That keeps byte order (a string sorts before any longer string it is a
// prefix of, because the terminator's 0x01 is smaller than anything an
// escaped continuation can start with) and makes the encoding unambiguous
// for arbitrary bytes. The object key is always the last component, so it
// needs no escaping: raw bytes already sort correctly and the key ends where
// the pebble key ends. That is also what makes prefix listing a plain range
// scan: all keys with prefix P of bucket B live under 'm' esc(B) P.
const (
	nsManifest byte = 'm'
	nsInline   byte = 'i'
	nsPart     byte = 'p'
	nsBucket   byte = 'b'
	nsGC       byte = 'g'
	nsKey      byte = 'k'
)

// appendEscaped appends the order-preserving, self-terminating encoding of s.
func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			dst = append(dst, 0, 0xFF)
			continue
		}
		dst = append(dst, s[i])
	}
	return append(dst, 0, 1)
}

// readEscaped decodes one string written by appendEscaped from the front of
// b and returns it with the rest of b.
func readEscaped(b []byte) (s string, rest []byte, err error) {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			break
		}
		switch b[i+1] {
		case 0xFF:
			out = append(out, 0)
			i++
		case 1:
			return string(out), b[i+2:], nil
		default:
			return "", nil, fmt.Errorf("metadata: bad escape 0x00 0x%02x in key %q", b[i+1], b)
		}
	}
	return "", nil, fmt.Errorf("metadata: unterminated string in key %q", b)
}

// bucketPrefix is the prefix of every key of bucket in namespace ns.
func bucketPrefix(ns byte, bucket string) []byte {
	return appendEscaped([]byte{ns}, bucket)
}

func manifestKey(bucket, key string) []byte {
	return append(bucketPrefix(nsManifest, bucket), key...)
}

func inlineKey(bucket, key string) []byte {
	return append(bucketPrefix(nsInline, bucket), key...)
}

func partPrefix(partID string) []byte {
	return appendEscaped([]byte{nsPart}, partID)
}

func partKey(partID, bucket, key string) []byte {
	return append(appendEscaped(partPrefix(partID), bucket), key...)
}

func bucketKey(name string) []byte {
	return append([]byte{nsBucket}, name...)
}

func gcKey(it GCItem) []byte {
	k := make([]byte, 0, 1+8+len(it.FileID)+2+4)
	k = append(k, nsGC)
	k = binary.BigEndian.AppendUint64(k, uint64(it.Due.UnixNano()))
	k = appendEscaped(k, it.FileID)
	return binary.BigEndian.AppendUint32(k, uint32(it.Idx))
}

func parseGCKey(k []byte) (GCItem, error) {
	if len(k) < 1+8+2+4 || k[0] != nsGC {
		return GCItem{}, fmt.Errorf("metadata: bad GC key %q", k)
	}
	due := int64(binary.BigEndian.Uint64(k[1:9]))
	id, rest, err := readEscaped(k[9:])
	if err != nil {
		return GCItem{}, err
	}
	if len(rest) != 4 {
		return GCItem{}, fmt.Errorf("metadata: bad GC key %q", k)
	}
	return GCItem{FileID: id, Idx: int(binary.BigEndian.Uint32(rest)), Due: time.Unix(0, due)}, nil
}

// prefixSuccessor returns the smallest byte string greater than every
// string with prefix p, or nil when there is none (p is empty or all 0xFF).
func prefixSuccessor(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
