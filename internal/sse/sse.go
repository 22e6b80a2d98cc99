package sse

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

const (
	// PackageSize is the plaintext length of every package but a part's
	// last.
	PackageSize = 64 << 10
	// TagSize is what sealing adds to each package.
	TagSize = 16
	// sealedPackage is the stored length of a full package.
	sealedPackage = PackageSize + TagSize
	// KeySize is the length of data keys, cluster keys and customer keys.
	KeySize = 32
)

// Errors the package returns.
var (
	// ErrAuth: a package or a sealed key failed authentication (tampered,
	// truncated, reordered, or opened with the wrong key).
	ErrAuth = errors.New("sse: message authentication failed")
	// ErrSize: a stored size that no plaintext size seals to, or a
	// sealed stream of the wrong length.
	ErrSize = errors.New("sse: sealed length does not match")
)

// DataKey is the random key one object part is encrypted with.
type DataKey [KeySize]byte

// NewDataKey returns a random data key.
func NewDataKey() (DataKey, error) {
	var k DataKey
	_, err := rand.Read(k[:])
	return k, err
}

// packages is the number of packages of n plaintext bytes.
func packages(n int64) int64 { return (n + PackageSize - 1) / PackageSize }

// SealedSize is the stored length of n plaintext bytes.
func SealedSize(n int64) int64 { return n + TagSize*packages(n) }

// PlainSize is the plaintext length of a part stored in n bytes; ErrSize
// if no plaintext seals to n bytes.
func PlainSize(n int64) (int64, error) {
	if n < 0 {
		return 0, ErrSize
	}
	full, rest := n/sealedPackage, n%sealedPackage
	if rest > 0 && rest <= TagSize {
		return 0, fmt.Errorf("%w: %d bytes", ErrSize, n)
	}
	plain := full * PackageSize
	if rest > 0 {
		plain += rest - TagSize
	}
	return plain, nil
}

// nonce is package i's nonce: its index, big-endian, then 1 if it is the
// last package of its part.
func nonce(i int64, last bool) []byte {
	var n [12]byte
	binary.BigEndian.PutUint64(n[:8], uint64(i))
	if last {
		n[8] = 1
	}
	return n[:]
}

func newGCM(key []byte) cipher.AEAD {
	b, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // NB: keys are always KeySize bytes here
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic(err)
	}
	return g
}

// Open authenticates and decrypts package i of a part (last tells whether
// it is the part's last), appending the plaintext to dst.
func Open(key DataKey, i int64, last bool, sealed, dst []byte) ([]byte, error) {
	if len(sealed) < TagSize || len(sealed) > sealedPackage || i < 0 {
		return nil, ErrAuth
	}
	out, err := newGCM(key[:]).Open(dst, nonce(i, last), sealed, nil)
	if err != nil {
		return nil, ErrAuth
	}
	return out, nil
}

// Encrypter reads the sealed form of a plaintext stream of known size.
// Once every package is out, its reads go to the plaintext reader itself,
// so that a caller checking that the body ends (and whatever is checked
// at its end) sees the real end.
type Encrypter struct {
	aead  cipher.AEAD
	src   io.Reader
	size  int64
	next  int64 // index of the next package to seal
	total int64
	plain []byte
	out   []byte // sealed bytes not yet read
}

// NewEncrypter seals size bytes read from src under key.
func NewEncrypter(key DataKey, src io.Reader, size int64) *Encrypter {
	return &Encrypter{aead: newGCM(key[:]), src: src, size: size, total: packages(size), plain: make([]byte, PackageSize)}
}

// Read implements io.Reader.
func (e *Encrypter) Read(p []byte) (int, error) {
	if len(e.out) == 0 {
		if e.next == e.total {
			return e.src.Read(p)
		}
		n := min(PackageSize, e.size-e.next*PackageSize)
		if _, err := io.ReadFull(e.src, e.plain[:n]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		e.out = e.aead.Seal(e.out[:0], nonce(e.next, e.next == e.total-1), e.plain[:n], nil)
		e.next++
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	return n, nil
}

// Span is the stored range that holds a plaintext range of a part: the
// packages it covers, whole.
type Span struct {
	Off, Len int64 // stored bytes to read
	first    int64 // index of the first package
	skip     int64 // plaintext bytes of the first package before the range
}

// SpanOf returns the stored bytes that hold plaintext [off, off+length)
// of a part of plainSize bytes.
func SpanOf(plainSize, off, length int64) Span {
	if length <= 0 {
		return Span{}
	}
	first, last := off/PackageSize, (off+length-1)/PackageSize
	end := min(SealedSize(plainSize), (last+1)*sealedPackage)
	return Span{Off: first * sealedPackage, Len: end - first*sealedPackage, first: first, skip: off - first*PackageSize}
}

// Writer takes the stored bytes of a Span, opens each package as it is
// complete and writes the plaintext range to w.
type Writer struct {
	aead      cipher.AEAD
	w         io.Writer
	plainSize int64
	i         int64 // index of the package being collected
	lastPkg   int64
	skip      int64 // plaintext bytes still to drop
	left      int64 // plaintext bytes still to write
	buf       []byte
	plain     []byte
}

// NewWriter returns a Writer of plaintext [off, off+length) of a part of
// plainSize bytes, sealed under key, and the stored range to feed it.
func NewWriter(key DataKey, plainSize, off, length int64, w io.Writer) (*Writer, Span) {
	s := SpanOf(plainSize, off, length)
	return &Writer{
		aead: newGCM(key[:]), w: w, plainSize: plainSize, i: s.first, lastPkg: packages(plainSize) - 1,
		skip: s.skip, left: max(length, 0), buf: make([]byte, 0, sealedPackage), plain: make([]byte, 0, PackageSize),
	}, s
}

// want is the stored length of the package being collected.
func (d *Writer) want() int {
	if d.i < d.lastPkg {
		return sealedPackage
	}
	return int(d.plainSize-d.i*PackageSize) + TagSize
}

// Write implements io.Writer.
func (d *Writer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if d.left == 0 {
			return 0, fmt.Errorf("%w: more stored bytes than the range needs", ErrSize)
		}
		take := min(len(p), d.want()-len(d.buf))
		d.buf = append(d.buf, p[:take]...)
		p = p[take:]
		if len(d.buf) < d.want() {
			break
		}
		if err := d.flush(); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// flush opens the collected package and writes its share of the range.
func (d *Writer) flush() error {
	plain, err := d.aead.Open(d.plain[:0], nonce(d.i, d.i == d.lastPkg), d.buf, nil)
	if err != nil {
		return fmt.Errorf("%w: package %d", ErrAuth, d.i)
	}
	plain = plain[d.skip:]
	d.skip = 0
	plain = plain[:min(int64(len(plain)), d.left)]
	d.left -= int64(len(plain))
	d.buf = d.buf[:0]
	d.i++
	_, err = d.w.Write(plain)
	return err
}

// Close reports whether the whole range was written.
func (d *Writer) Close() error {
	if d.left != 0 {
		return fmt.Errorf("%w: %d plaintext bytes of the range missing", ErrSize, d.left)
	}
	return nil
}
