package shardrpc

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// Framed shard GETs.
//
// A shard server used to read each 64 KiB block of a shard GET into its
// own memory, check the block's CRC and write the data to the socket: a
// pread, a CRC and a socket write per block, 65% of a shard server's CPU
// under 64 MiB GETs in system calls (BENCHMARKS.md, issue 21). Framed, it
// checks only the first block (so that a bad shard is still a clean 409
// before any body) and hands the rest of the file's bytes, blocks and CRCs
// as stored, to the kernel (sendfile); the client checks every block as
// it reads it. A block's bytes go to the caller only once its CRC has
// matched.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcSize is the bytes of CRC behind each block of a framed body.
const crcSize = 4

// frameReader reads the data of [pos, end) out of a framed body whose
// blocks are bs bytes (the shard's last shorter: size data bytes in all),
// starting at block pos/bs.
type frameReader struct {
	body     io.Reader
	bs, size int64
	pos, end int64  // the next data byte to hand out, and the range's end
	held     []byte // verified bytes of a block not yet handed out
	buf      []byte // one block and its CRC, for blocks read only in part
	crc      [crcSize]byte
}

// blockLen is the data length of block b.
func (f *frameReader) blockLen(b int64) int64 { return min(f.bs, f.size-b*f.bs) }

// Read hands out verified bytes. It reads whole blocks straight into p
// where the range takes them whole and p has room; a block the range
// takes in part, or one larger than what is left of p, goes through the
// reader's own buffer. A CRC that does not match is ErrCorrupt.
func (f *frameReader) Read(p []byte) (int, error) {
	if len(f.held) > 0 {
		n := copy(p, f.held)
		f.held = f.held[n:]
		return n, nil
	}
	n := 0
	for f.pos < f.end && n < len(p) {
		b := f.pos / f.bs
		start, blen := b*f.bs, f.blockLen(b)
		if f.pos == start && start+blen <= f.end {
			m, err := f.readBlocks(p[n:], b)
			n += m
			f.pos += int64(m)
			if err != nil {
				return n, err
			}
			if m > 0 {
				continue
			}
			if int64(len(p)-n) >= blen {
				// Room for the block but not its CRC: the data straight
				// into p, the CRC beside.
				if err := f.readBlock(p[n:int64(n)+blen], b); err != nil {
					return n, err
				}
				n += int(blen)
				f.pos += blen
				continue
			}
		}
		if n > 0 {
			break // NB: hand out what p holds before a partial block
		}
		if f.buf == nil {
			f.buf = make([]byte, f.bs)
		}
		data := f.buf[:blen]
		if err := f.readBlock(data, b); err != nil {
			return 0, err
		}
		lo, hi := f.pos-start, min(f.end-start, blen)
		f.held = data[lo:hi]
		f.pos = start + hi
		m := copy(p, f.held)
		f.held = f.held[m:]
		return m, nil
	}
	if n > 0 {
		return n, nil
	}
	// NB: read the body to its end, so that its connection is reused,
	// and make sure nothing follows the range's last block.
	if m, err := f.body.Read(f.crc[:1]); m > 0 {
		return 0, fmt.Errorf("framed body longer than its blocks")
	} else if err != nil && err != io.EOF {
		return 0, err
	}
	return 0, io.EOF
}

// readBlocks reads the whole blocks from b on that the range takes whole
// and whose data and CRCs fit in q, in one read, checks each and moves its
// data up over the CRCs before it; it returns the data bytes now at the
// start of q, 0 if not one block and its CRC fit. A socket read per
// 64 KiB block, and one per CRC, cost the gateway more in system calls
// than the server's sendfile saved.
func (f *frameReader) readBlocks(q []byte, b int64) (int, error) {
	var framed int64
	k := int64(0)
	for ; ; k++ {
		start, blen := (b+k)*f.bs, f.blockLen(b+k)
		if start >= f.end || start+blen > f.end || framed+blen+crcSize > int64(len(q)) {
			break
		}
		framed += blen + crcSize
	}
	if k == 0 {
		return 0, nil
	}
	if _, err := io.ReadFull(f.body, q[:framed]); err != nil {
		return 0, fmt.Errorf("blocks %d-%d: %w", b, b+k-1, unexpected(err))
	}
	var r, w int64
	for i := range k {
		blen := f.blockLen(b + i)
		data, sum := q[r:r+blen], q[r+blen:r+blen+crcSize]
		if crc32.Checksum(data, castagnoli) != binary.BigEndian.Uint32(sum) {
			return int(w), fmt.Errorf("%w: block %d", ErrCorrupt, b+i)
		}
		copy(q[w:], data)
		r += blen + crcSize
		w += blen
	}
	return int(w), nil
}

// readBlock reads block b's data into data and its CRC, and checks them.
func (f *frameReader) readBlock(data []byte, b int64) error {
	if _, err := io.ReadFull(f.body, data); err != nil {
		return fmt.Errorf("block %d: %w", b, unexpected(err))
	}
	if _, err := io.ReadFull(f.body, f.crc[:]); err != nil {
		return fmt.Errorf("block %d's checksum: %w", b, unexpected(err))
	}
	if crc32.Checksum(data, castagnoli) != binary.BigEndian.Uint32(f.crc[:]) {
		return fmt.Errorf("%w: block %d", ErrCorrupt, b)
	}
	return nil
}

// FramedLength is the bytes a framed body of [off, off+length) of a shard
// of size data bytes in blocks of bs holds: what a shard server sends and
// what its client expects.
func FramedLength(bs, size, off, length int64) int64 {
	if length <= 0 {
		return 0
	}
	first, last := off/bs, (off+length-1)/bs
	return (last-first)*(bs+crcSize) + min(bs, size-last*bs) + crcSize
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
