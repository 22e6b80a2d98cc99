package shardserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

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

// writeShard streams r into f (positioned at 0) in the block format and
// returns the data's size and CRC. Memory is one block. The header, which
// holds the data CRC, is written last. Read failures of r wrap errBody.
func writeShard(f File, r io.Reader, blockSize int) (shardrpc.ShardInfo, error) {
	if _, err := f.Write(make([]byte, headerSize)); err != nil {
		return shardrpc.ShardInfo{}, err
	}
	buf := make([]byte, blockSize+blockCRCSize)
	var (
		size        int64
		crc         uint32
		written     int64 = headerSize // file bytes written
		writtenBack int64 = headerSize // file bytes handed to writeback
	)
	for {
		n, rerr := fill(r, buf[:blockSize])
		if n > 0 {
			binary.BigEndian.PutUint32(buf[n:], crc32.Checksum(buf[:n], castagnoli))
			if _, err := f.Write(buf[:n+blockCRCSize]); err != nil {
				return shardrpc.ShardInfo{}, err
			}
			crc = crc32.Update(crc, castagnoli, buf[:n])
			size += int64(n)
			written += int64(n + blockCRCSize)
			// Start writeback every few MiB, so the final fsync does not
			// flush the whole file at once (it dominated the tail of
			// every rebuilt shard's store).
			if written-writtenBack >= writebackEvery {
				startWriteback(f, writtenBack, written-writtenBack)
				writtenBack = written
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return shardrpc.ShardInfo{}, fmt.Errorf("%w: %w", errBody, rerr)
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

// rangeReader yields the verified data of [off, off+length) block by block.
type rangeReader struct {
	s          *shardFile
	next, last int64 // blocks still to read
	off, end   int64 // data range
	buf        []byte
}

func (s *shardFile) rangeReader(off, length int64) *rangeReader {
	bs := int64(s.hdr.blockSize)
	r := &rangeReader{s: s, off: off, end: off + length, next: off / bs, last: -1}
	if length > 0 {
		r.last = (off + length - 1) / bs
		r.buf = make([]byte, bs+blockCRCSize)
	}
	return r
}

// Next returns the next verified piece of the range, or io.EOF.
func (r *rangeReader) Next() ([]byte, error) {
	if r.next > r.last {
		return nil, io.EOF
	}
	i := r.next
	data, err := r.s.block(i, r.buf)
	if err != nil {
		return nil, err
	}
	r.next++
	start := i * int64(r.s.hdr.blockSize)
	lo := max(r.off-start, 0)
	hi := min(r.end-start, int64(len(data)))
	return data[lo:hi], nil
}
