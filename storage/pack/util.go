package pack

import (
	"compress/flate"
	"crypto/sha1"
	"errors"
	"hash"
	"hash/crc32"
)

func newSHA1() hash.Hash { return sha1.New() }

func crc32Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, crc32.IEEETable, b) }

// isFlateErr reports whether err is a deflate data error (as opposed to an
// error of the underlying reader).
func isFlateErr(err error) bool {
	var ce flate.CorruptInputError
	var ie flate.InternalError
	return errors.As(err, &ce) || errors.As(err, &ie)
}
