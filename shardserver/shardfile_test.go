package shardserver

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// writeTestShard stores data in the block format in a new file and opens it.
func writeTestShard(t *testing.T, data []byte, bs int) *shardFile {
	t.Helper()
	f, err := OSFS{}.Create(filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	// NB: a reader that hands out odd-sized pieces, as a socket does.
	info, err := writeShard(f, &trickle{data: data}, bs)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(data)) || info.CRC != crc(data) {
		t.Fatalf("writeShard: %+v, want %d bytes, CRC %08x", info, len(data), crc(data))
	}
	sf, err := openShardFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return sf
}

type trickle struct {
	data []byte
	n    int
}

func (r *trickle) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	r.n++
	m := copy(p[:min(len(p), 1+r.n*7919%20000)], r.data)
	r.data = r.data[m:]
	return m, nil
}

// readRange reads [off, off+length) with a rangeReader, checking that no
// piece is longer than a span.
func readRange(t *testing.T, sf *shardFile, off, length int64) ([]byte, error) {
	t.Helper()
	rr := sf.rangeReader(off, length)
	defer rr.Close()
	span := spanBlocks(int64(sf.hdr.blockSize)) * int64(sf.hdr.blockSize)
	var out []byte
	for {
		p, err := rr.Next()
		if int64(len(p)) > span {
			t.Fatalf("piece of %d bytes, more than a span (%d)", len(p), span)
		}
		out = append(out, p...)
		if err != nil {
			return out, err
		}
	}
}

// TestShardSpans writes and reads shards of several blocks per span, with
// ranges that start and end on and off block and span boundaries.
func TestShardSpans(t *testing.T) {
	const bs = 4 << 10 // 64 blocks a span
	span := int(spanBlocks(bs)) * bs
	for _, size := range []int{0, 1, bs, span - 1, span, span + 1, 2*span + 3*bs + 17} {
		data := randBytes(uint64(size)+7, size)
		sf := writeTestShard(t, data, bs)
		if sf.size != int64(size) {
			t.Fatalf("size %d: file says %d", size, sf.size)
		}
		points := []int{0, 1, bs - 1, bs, bs + 1, span - 1, span, span + bs + 3, 2 * span, size - 1, size}
		for _, off := range points {
			for _, end := range points {
				if off < 0 || end < off || end > size {
					continue
				}
				got, err := readRange(t, sf, int64(off), int64(end-off))
				if err != io.EOF || !bytes.Equal(got, data[off:end]) {
					t.Fatalf("size %d range [%d,%d): %d bytes, %v", size, off, end, len(got), err)
				}
			}
		}
	}
}

// TestShardSpanCorruptMidSpan: the good blocks before a bad one in the same
// span are handed out first, the failure after them, as block by block.
func TestShardSpanCorruptMidSpan(t *testing.T) {
	const bs = 4 << 10
	span := int(spanBlocks(bs)) * bs
	data := randBytes(3, 2*span+100)
	sf := writeTestShard(t, data, bs)
	bad := span + 5*bs + 9 // in block 69, the second span's sixth
	f := sf.f.(*os.File)
	pos := int64(headerSize) + int64(bad/bs)*(bs+blockCRCSize) + int64(bad%bs)
	if _, err := f.WriteAt([]byte{data[bad] ^ 0xff}, pos); err != nil {
		t.Fatal(err)
	}
	got, err := readRange(t, sf, 0, int64(len(data)))
	if !errors.Is(err, errCorrupt) {
		t.Fatalf("got %d bytes and %v, want errCorrupt", len(got), err)
	}
	if want := bad / bs * bs; len(got) != want || !bytes.Equal(got, data[:want]) {
		t.Fatalf("got %d bytes before the failure, want the %d of the good blocks", len(got), want)
	}
	// A range starting at the bad block fails at once, with nothing.
	rr := sf.rangeReader(int64(bad), 10)
	defer rr.Close()
	if p, err := rr.Next(); len(p) != 0 || !errors.Is(err, errCorrupt) {
		t.Fatalf("range at the bad block: %d bytes, %v", len(p), err)
	}
}
