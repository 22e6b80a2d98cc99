package shardserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// Shard file format, version 1 (see doc.go):
//
//	0  4  magic "RGSH"
//	4  2  format version, big-endian (1)
//	6  2  flags (0)
//	8  4  block size B, big-endian
//	12 4  CRC-32C of the whole data, big-endian
//	16    data in blocks of B bytes, each followed by the CRC-32C of its
//	      bytes (4, big-endian); the last block may be short, never empty.
const (
	shardMagic    = "RGSH"
	formatV1      = 1
	headerSize    = 16
	blockCRCSize  = 4
	maxFileFormat = formatV1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	// errCorrupt is returned when a shard file fails a check: a block's
	// CRC, the header, or a length no valid file can have.
	errCorrupt = errors.New("shardserver: shard file corrupt")
	// errBody marks a failure to read the request body (client went away).
	errBody = errors.New("shardserver: reading shard body")
)

type header struct {
	version   uint16
	blockSize uint32
	dataCRC   uint32
}

func (h header) encode() []byte {
	b := make([]byte, headerSize)
	copy(b, shardMagic)
	binary.BigEndian.PutUint16(b[4:], h.version)
	binary.BigEndian.PutUint32(b[8:], h.blockSize)
	binary.BigEndian.PutUint32(b[12:], h.dataCRC)
	return b
}

func parseHeader(b []byte) (header, error) {
	if len(b) < headerSize || string(b[:4]) != shardMagic {
		return header{}, fmt.Errorf("%w: bad magic", errCorrupt)
	}
	h := header{
		version:   binary.BigEndian.Uint16(b[4:]),
		blockSize: binary.BigEndian.Uint32(b[8:]),
		dataCRC:   binary.BigEndian.Uint32(b[12:]),
	}
	if h.version == 0 || h.version > maxFileFormat {
		return header{}, fmt.Errorf("%w: unknown format version %d", errCorrupt, h.version)
	}
	if h.blockSize == 0 || h.blockSize > MaxBlockSize {
		return header{}, fmt.Errorf("%w: block size %d", errCorrupt, h.blockSize)
	}
	return h, nil
}

// dataLength derives the data length from the file size.
func dataLength(fileSize int64, blockSize int64) (int64, error) {
	body := fileSize - headerSize
	if body < 0 {
		return 0, fmt.Errorf("%w: %d bytes is shorter than the header", errCorrupt, fileSize)
	}
	per := blockSize + blockCRCSize
	full, rem := body/per, body%per
	switch {
	case rem == 0:
		return full * blockSize, nil
	case rem > blockCRCSize:
		return full*blockSize + rem - blockCRCSize, nil
	}
	return 0, fmt.Errorf("%w: file size %d is not a whole number of blocks", errCorrupt, fileSize)
}

// writebackEvery is how many written bytes writeShard lets pile up before
// it starts their writeback.
const writebackEvery = 4 << 20

// spanBytes is how many data bytes a shard write or read moves per system
// call: whole blocks, at least one. A 64 KiB block per call made a 1 MiB
// object's 171 KiB shard three writes on its way in, and every block of a
// shard GET two socket writes (net/http flushes its 4 KiB buffer, then
// writes the rest) on its way out.
const spanBytes = 256 << 10

// spanBlocks is how many blocks of size bs a span holds.
func spanBlocks(bs int64) int64 { return max(1, spanBytes/bs) }

// spanPool keeps span buffers of the default block size (spanBytes of
// data, each block's CRC behind it) between requests: every shard PUT and
// GET took one, and on a busy server they were most of what it allocated.
var spanPool = sync.Pool{New: func() any { b := make([]byte, spanBufLen(64<<10)); return &b }}

// spanBufLen is the buffer a span of blocks of size bs takes: their data
// and CRCs.
func spanBufLen(bs int64) int64 { return spanBlocks(bs) * (bs + blockCRCSize) }

// getSpanBuf returns a buffer of at least n bytes; putSpanBuf gives it back.
func getSpanBuf(n int64) *[]byte {
	b := spanPool.Get().(*[]byte)
	if int64(cap(*b)) >= n {
		*b = (*b)[:n]
		return b
	}
	spanPool.Put(b)
	nb := make([]byte, n)
	return &nb
}

func putSpanBuf(b *[]byte) {
	if int64(cap(*b)) == spanBufLen(64<<10) {
		spanPool.Put(b)
	}
}

// writeShard streams r into f (positioned at 0) in the block format and
// returns the data's size and CRC. Memory is one span of blocks. The
// header, which holds the data CRC, is written last. Read failures of r
// wrap errBody.
func writeShard(f File, r io.Reader, blockSize int) (shardrpc.ShardInfo, error) {
	if _, err := f.Write(make([]byte, headerSize)); err != nil {
		return shardrpc.ShardInfo{}, err
	}
	bs := int64(blockSize)
	bp := getSpanBuf(spanBufLen(bs))
	defer putSpanBuf(bp)
	buf := *bp
	var (
		size        int64
		crc         uint32
		written     int64 = headerSize // file bytes written
		writtenBack int64 = headerSize // file bytes handed to writeback
	)
	for done := false; !done; {
		// Fill the span block by block, each followed by its CRC, and
		// write it at once.
		pos := 0
		for range spanBlocks(bs) {
			n, rerr := fill(r, buf[pos:pos+blockSize])
			if n > 0 {
				data := buf[pos : pos+n]
				binary.BigEndian.PutUint32(buf[pos+n:], crc32.Checksum(data, castagnoli))
				crc = crc32.Update(crc, castagnoli, data)
				size += int64(n)
				pos += n + blockCRCSize
			}
			if rerr == io.EOF {
				done = true
				break
			}
			if rerr != nil {
				return shardrpc.ShardInfo{}, fmt.Errorf("%w: %w", errBody, rerr)
			}
		}
		if pos == 0 {
			continue
		}
		if _, err := f.Write(buf[:pos]); err != nil {
			return shardrpc.ShardInfo{}, err
		}
		written += int64(pos)
		// Start writeback every few MiB, so the final fsync does not
		// flush the whole file at once (it dominated the tail of every
		// rebuilt shard's store).
		if written-writtenBack >= writebackEvery {
			startWriteback(f, writtenBack, written-writtenBack)
			writtenBack = written
		}
	}
	h := header{version: formatV1, blockSize: uint32(blockSize), dataCRC: crc}
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return shardrpc.ShardInfo{}, err
	}
	return shardrpc.ShardInfo{Size: size, CRC: crc}, nil
}

// fill reads into b until it is full or r fails; io.EOF means r ended
// (possibly after some bytes). Unlike io.ReadFull it passes r's own errors
// through unchanged, so a body cut short (io.ErrUnexpectedEOF from
// net/http) is never mistaken for a clean end.
func fill(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// shardFile is an open shard file whose header has been checked.
type shardFile struct {
	f    File
	hdr  header
	size int64 // data bytes
}

func openShardFile(f File) (*shardFile, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	hb := make([]byte, headerSize)
	if _, err := f.ReadAt(hb, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: truncated header", errCorrupt)
		}
		return nil, err
	}
	h, err := parseHeader(hb)
	if err != nil {
		return nil, err
	}
	size, err := dataLength(st.Size(), int64(h.blockSize))
	if err != nil {
		return nil, err
	}
	return &shardFile{f: f, hdr: h, size: size}, nil
}

func (s *shardFile) info() shardrpc.ShardInfo {
	return shardrpc.ShardInfo{Size: s.size, CRC: s.hdr.dataCRC}
}

// block reads block i into buf (at least blockSize+4 bytes), verifies it
// and returns its data.
func (s *shardFile) block(i int64, buf []byte) ([]byte, error) {
	bs := int64(s.hdr.blockSize)
	n := min(bs, s.size-i*bs)
	if n <= 0 {
		return nil, fmt.Errorf("shardserver: block %d beyond data", i)
	}
	b := buf[:n+blockCRCSize]
	if m, err := s.f.ReadAt(b, headerSize+i*(bs+blockCRCSize)); m < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: block %d truncated", errCorrupt, i)
		}
		return nil, err
	}
	if crc32.Checksum(b[:n], castagnoli) != binary.BigEndian.Uint32(b[n:]) {
		return nil, fmt.Errorf("%w: block %d", errCorrupt, i)
	}
	return b[:n], nil
}

// rangeReader yields the verified data of [off, off+length), up to a span
// of blocks at a time.
type rangeReader struct {
	s          *shardFile
	next, last int64 // blocks still to read
	off, end   int64 // data range
	bp         *[]byte
	// err is a failure met after good blocks of the same span: those go
	// out first, the failure with the next call.
	err error
}

func (s *shardFile) rangeReader(off, length int64) *rangeReader {
	bs := int64(s.hdr.blockSize)
	r := &rangeReader{s: s, off: off, end: off + length, next: off / bs, last: -1}
	if length > 0 {
		r.last = (off + length - 1) / bs
		blocks := min(spanBlocks(bs), r.last-r.next+1)
		r.bp = getSpanBuf(blocks*bs + blockCRCSize)
	}
	return r
}

// Next returns the next verified piece of the range, or io.EOF. The piece
// is valid until the next call.
func (r *rangeReader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.next > r.last {
		return nil, io.EOF
	}
	bs := int64(r.s.hdr.blockSize)
	buf := *r.bp
	first := r.next
	var got int64 // data bytes verified into buf
	for r.next <= r.last && got+bs+blockCRCSize <= int64(len(buf)) {
		// NB: each block's CRC lands where the next block's data goes;
		// it is checked before that block is read over it.
		data, err := r.s.block(r.next, buf[got:])
		if err != nil {
			if got == 0 {
				return nil, err
			}
			r.err = err
			break
		}
		got += int64(len(data))
		r.next++
	}
	start := first * bs
	lo := max(r.off-start, 0)
	hi := min(r.end-start, got)
	return buf[lo:hi], nil
}

// Close gives the reader's buffer back; its pieces are invalid after.
func (r *rangeReader) Close() {
	if r.bp != nil {
		putSpanBuf(r.bp)
		r.bp = nil
	}
}
