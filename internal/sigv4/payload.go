package sigv4

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"strings"
)

// sha256Reader hashes what passes through it and compares at EOF.
type sha256Reader struct {
	r    io.Reader
	h    hash.Hash
	want string
	err  error // sticky once EOF has been judged
}

// NewSHA256Reader returns a reader of r that, when r reaches EOF, checks the
// SHA-256 of everything read against wantHex (the x-amz-content-sha256
// value). On mismatch the final Read returns an *Error with code
// XAmzContentSHA256Mismatch instead of io.EOF, so a caller that stores the
// body must treat anything before a clean EOF as provisional.
func NewSHA256Reader(r io.Reader, wantHex string) io.Reader {
	return &sha256Reader{r: r, h: sha256.New(), want: strings.ToLower(wantHex)}
}

func (s *sha256Reader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.r.Read(p)
	s.h.Write(p[:n])
	if err == io.EOF {
		if got := hex.EncodeToString(s.h.Sum(nil)); got != s.want {
			s.err = newError(CodeXAmzContentSHA256Mismatch, msgSHA256Mismatch)
			return n, s.err
		}
		s.err = io.EOF
	}
	return n, err
}
