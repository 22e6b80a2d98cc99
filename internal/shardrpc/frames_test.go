package shardrpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand"
	"testing"
)

// framed returns the framed body of [off, off+length) of data in blocks of
// bs, as a shard server stores and sends it.
func framed(data []byte, bs, off, length int64) []byte {
	var out []byte
	if length <= 0 {
		return out
	}
	for b := off / bs; b <= (off+length-1)/bs; b++ {
		blk := data[b*bs : min(int64(len(data)), (b+1)*bs)]
		out = append(out, blk...)
		out = binary.BigEndian.AppendUint32(out, crc32.Checksum(blk, castagnoli))
	}
	return out
}

// readIn reads r to its end in reads of at most step bytes.
func readIn(r io.Reader, step int) ([]byte, error) {
	var out []byte
	p := make([]byte, step)
	for {
		n, err := r.Read(p)
		out = append(out, p[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func TestFrameReaderRanges(t *testing.T) {
	const bs = 64
	data := make([]byte, 5*bs+10) // the last block short
	rand.New(rand.NewSource(1)).Read(data)
	size := int64(len(data))
	for _, c := range []struct{ off, length int64 }{
		{0, size}, {0, 0}, {0, 1}, {0, bs}, {bs, bs}, {3, bs}, {bs - 1, 2},
		{2 * bs, 3*bs + 10}, {5 * bs, 10}, {5*bs + 9, 1}, {7, size - 7}, {bs + 5, 2*bs - 10},
	} {
		body := framed(data, bs, c.off, c.length)
		if n := FramedLength(bs, size, c.off, c.length); n != int64(len(body)) {
			t.Fatalf("%+v: FramedLength %d, body %d", c, n, len(body))
		}
		for _, step := range []int{1, 7, bs, bs + 1, 2*bs + 7, 2*bs + 8, 3 * bs, 1 << 12} {
			f := &frameReader{body: bytes.NewReader(body), bs: bs, size: size, pos: c.off, end: c.off + c.length}
			got, err := readIn(f, step)
			if err != nil || !bytes.Equal(got, data[c.off:c.off+c.length]) {
				t.Fatalf("%+v in reads of %d: %d bytes, %v; want the range's %d", c, step, len(got), err, c.length)
			}
		}
	}
}

// A block whose CRC does not match is ErrCorrupt, and none of its bytes go
// out; a body cut short is io.ErrUnexpectedEOF; bytes past the last block
// are an error.
func TestFrameReaderFailures(t *testing.T) {
	const bs = 64
	data := make([]byte, 4*bs)
	rand.New(rand.NewSource(3)).Read(data)
	size := int64(len(data))
	body := framed(data, bs, 0, size)
	open := func(b []byte) *frameReader {
		return &frameReader{body: bytes.NewReader(b), bs: bs, size: size, pos: 0, end: size}
	}
	for _, step := range []int{5, bs, 1 << 12} {
		bad := bytes.Clone(body)
		bad[2*(bs+crcSize)+9] ^= 1 // in block 2's data
		got, err := readIn(open(bad), step)
		if !errors.Is(err, ErrCorrupt) || len(got) > 2*bs || !bytes.Equal(got, data[:len(got)]) {
			t.Fatalf("reads of %d, block 2 bad: %d bytes, %v; want ErrCorrupt after at most blocks 0-1", step, len(got), err)
		}
		bad = bytes.Clone(body)
		bad[bs] ^= 1 // block 0's CRC
		if got, err := readIn(open(bad), step); !errors.Is(err, ErrCorrupt) || len(got) != 0 {
			t.Fatalf("reads of %d, block 0's CRC bad: %d bytes, %v; want ErrCorrupt and nothing", step, len(got), err)
		}
		if _, err := readIn(open(body[:len(body)-2]), step); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("reads of %d, body cut short: %v, want io.ErrUnexpectedEOF", step, err)
		}
		if _, err := readIn(open(append(bytes.Clone(body), 0)), step); err == nil {
			t.Fatalf("reads of %d, a byte past the last block: no error", step)
		}
	}
}
