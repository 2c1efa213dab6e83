package lfs

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/rgit/rgit/storage/repo"
)

// MaxPointerSize is the largest blob read as a pointer, as git-lfs reads
// them (a pointer is about 130 bytes; extensions add lines).
const MaxPointerSize = 1024

// Pointer is what a Git LFS pointer file says: the object and its size.
type Pointer struct {
	OID  string
	Size int64
}

// ParsePointer reads data as a pointer file (the Git LFS spec, v1): a
// version line first, then "key value" lines in key order, oid and size
// among them, each ending in a newline. Anything else is not a pointer.
func ParsePointer(data []byte) (Pointer, bool) {
	if len(data) > MaxPointerSize || len(data) == 0 || data[len(data)-1] != '\n' {
		return Pointer{}, false
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	switch lines[0] {
	case "version https://git-lfs.github.com/spec/v1", "version https://hawser.github.com/spec/v1":
	default:
		return Pointer{}, false
	}
	var p Pointer
	haveOID, haveSize := false, false
	prev := ""
	for _, line := range lines[1:] {
		key, value, ok := strings.Cut(line, " ")
		if !ok || key == "" || value == "" || key <= prev || bytes.ContainsAny([]byte(key), " \t\r") {
			return Pointer{}, false
		}
		prev = key
		switch key {
		case "oid":
			oid, ok := strings.CutPrefix(value, "sha256:")
			if !ok || !repo.ValidLFSOID(oid) {
				return Pointer{}, false
			}
			p.OID, haveOID = oid, true
		case "size":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 || strconv.FormatInt(n, 10) != value {
				return Pointer{}, false
			}
			p.Size, haveSize = n, true
		}
	}
	return p, haveOID && haveSize
}
