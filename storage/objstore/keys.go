package objstore

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key accepted, in bytes (S3's limit).
const MaxKeyLen = 1024

var (
	// ErrInvalidKey: the key breaks the key rules (see ValidateKey).
	ErrInvalidKey = errors.New("invalid object key")
	// ErrInvalidRange: GetRange was called with a negative offset.
	ErrInvalidRange = errors.New("invalid byte range")
)

// ValidateKey reports whether key is a legal object key: non-empty, at most
// MaxKeyLen bytes of valid UTF-8 without NUL, '/'-separated segments that are
// neither empty nor "." nor "..", no leading or trailing '/'.
//
// Every backend enforces the same rules so that a key that works against
// memory also works on disk and on S3.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key longer than %d bytes", ErrInvalidKey, MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidKey, key)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: %q contains NUL", ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty path segment", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrInvalidKey, key, seg)
		}
	}
	return nil
}

// ClampRange turns GetRange's (off, length) into a half-open byte interval
// [start, end) of an object of the given size. It defines the range
// semantics every backend shares:
//   - off < 0 is ErrInvalidRange;
//   - length < 0 means "to the end of the object";
//   - a range reaching past the end is cut at the end;
//   - off >= size yields the empty interval (not an error), so a reader that
//     asks for "everything after what I already have" needs no special case.
func ClampRange(off, length, size int64) (start, end int64, err error) {
	if off < 0 {
		return 0, 0, fmt.Errorf("%w: offset %d", ErrInvalidRange, off)
	}
	if off >= size {
		return size, size, nil
	}
	end = size
	if length >= 0 && length < size-off {
		end = off + length
	}
	return off, end, nil
}
