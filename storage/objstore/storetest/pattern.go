package storetest

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
)

// patternBlock is a fixed pseudo-random block (deterministic seed); pattern
// bytes repeat it with the block number stamped into the first 8 bytes of
// each repetition, so a misplaced or repeated chunk changes the hash.
var patternBlock = func() []byte {
	b := make([]byte, 1<<20)
	rng := rand.NewChaCha8([32]byte{'r', 'g', 'i', 't'})
	_, _ = rng.Read(b) // ChaCha8.Read never fails
	return b
}()

// fillPattern writes the pattern bytes [off, off+len(p)) into p.
func fillPattern(p []byte, off int64) {
	blk := int64(len(patternBlock))
	for len(p) > 0 {
		n, in := off/blk, off%blk
		var stamp [8]byte
		binary.BigEndian.PutUint64(stamp[:], uint64(n))
		c := copy(p, patternBlock[in:])
		for i := in; i < 8 && i < in+int64(c); i++ {
			p[i-in] = stamp[i]
		}
		p, off = p[c:], off+int64(c)
	}
}

// patternBytes returns pattern bytes [off, off+n).
func patternBytes(off, n int64) []byte {
	b := make([]byte, n)
	fillPattern(b, off)
	return b
}

// patternReader streams n pattern bytes. It is a bare io.Reader on purpose:
// it exposes no Len/Seek/WriterTo, so stores cannot learn the size.
type patternReader struct {
	off, n int64
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	if rem := r.n - r.off; int64(len(p)) > rem {
		p = p[:rem]
	}
	fillPattern(p, r.off)
	r.off += int64(len(p))
	return len(p), nil
}
