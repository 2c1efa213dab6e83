package pack

import (
	"crypto/sha1"
	"errors"
	"hash"
	"hash/crc32"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zlib"
)

func newSHA1() hash.Hash { return sha1.New() }

func crc32Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, crc32.IEEETable, b) }

// isInflateErr reports whether err is a zlib or deflate data error of
// getZlib's reader (as opposed to an error of the underlying reader).
func isInflateErr(err error) bool {
	var ce flate.CorruptInputError
	var ie flate.InternalError
	return errors.Is(err, zlib.ErrChecksum) || errors.Is(err, zlib.ErrHeader) ||
		errors.As(err, &ce) || errors.As(err, &ie)
}
