package s3bench

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"fmt"
	"io"
)

// suffixLen is the part of every object that differs between objects.
const suffixLen = 16

// content makes the bodies of the objects of one size. Every body is the
// same random prefix followed by a suffix unique to the object, so that
// no two objects are equal, while making a body and its SHA-256 costs the
// client next to nothing: the digest state after the prefix is computed
// once. The client shares the machine with the server under test, and
// what it spends is taken from the server.
type content struct {
	size   int64
	prefix []byte // size - suffixLen random bytes (the whole body when smaller)
	nonce  uint64 // distinguishes runs
	state  []byte // marshalled SHA-256 state after prefix
}

func newContent(size int64) (*content, error) {
	if size < 0 {
		return nil, fmt.Errorf("s3bench: negative object size %d", size)
	}
	c := &content{size: size, prefix: make([]byte, max(size-suffixLen, 0))}
	var nb [8]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return nil, err
	}
	c.nonce = binary.LittleEndian.Uint64(nb[:])
	if _, err := rand.Read(c.prefix); err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write(c.prefix)
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil, err
	}
	c.state = st
	return c, nil
}

// suffix is object i's unique tail (only its first size-len(prefix) bytes
// are used).
func (c *content) suffix(i int) [suffixLen]byte {
	var s [suffixLen]byte
	// NB: the index first: a body shorter than the suffix keeps the
	// index's low bytes, so small bodies still differ.
	binary.LittleEndian.PutUint64(s[:8], uint64(i))
	binary.LittleEndian.PutUint64(s[8:], c.nonce)
	return s
}

// sum is the SHA-256 of object i's body.
func (c *content) sum(i int) [sha256.Size]byte {
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(c.state); err != nil {
		panic(err) // NB: the state came from MarshalBinary of the same type
	}
	s := c.suffix(i)
	h.Write(s[:c.size-int64(len(c.prefix))])
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// body returns object i's body: a reader with Read, ReadAt and Seek (so
// the client can upload parts in parallel) that never copies the prefix
// but into the client's own buffers.
func (c *content) body(i int) *io.SectionReader {
	return io.NewSectionReader(&objectData{c: c, suffix: c.suffix(i)}, 0, c.size)
}

type objectData struct {
	c      *content
	suffix [suffixLen]byte
}

func (o *objectData) ReadAt(p []byte, off int64) (int, error) {
	size, plen := o.c.size, int64(len(o.c.prefix))
	if off >= size {
		return 0, io.EOF
	}
	n := 0
	if off < plen {
		n = copy(p, o.c.prefix[off:])
	}
	if n < len(p) && off+int64(n) < size {
		n += copy(p[n:], o.suffix[off+int64(n)-plen:size-plen])
	}
	if off+int64(n) >= size {
		return n, io.EOF
	}
	return n, nil
}
