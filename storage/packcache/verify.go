package packcache

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"

	"github.com/rgit/rgit/storage/object"
)

// ErrCorrupt is wrapped by every verification failure of a pack or index
// file (downloaded or found on disk).
var ErrCorrupt = errors.New("packcache: corrupt pack file")

const (
	packHeaderSize = 12
	idxHeaderSize  = 8 + 256*4 // magic+version, fanout table
	idxEntrySize   = object.IDSize + 4 + 4
)

var (
	packMagic = []byte("PACK")
	idxMagic  = []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}
)

// nameHash extracts the pack checksum from a pack name "pack-<40 hex>".
func nameHash(name string) (object.ID, error) {
	hexPart, ok := strings.CutPrefix(name, "pack-")
	if !ok {
		return object.ID{}, fmt.Errorf("pack name %q: want pack-<hex>", name)
	}
	id, err := object.ParseID(hexPart)
	if err != nil {
		return object.ID{}, fmt.Errorf("pack name %q: %w", name, err)
	}
	return id, nil
}

// trailerHasher hashes everything written to it except the final
// object.IDSize bytes, which it keeps: a pack's trailer is the SHA-1 of the
// bytes before it, so this checks a pack in one streaming pass.
type trailerHasher struct {
	h    hash.Hash
	tail []byte
	n    int64
}

func newTrailerHasher() *trailerHasher {
	return &trailerHasher{h: sha1.New(), tail: make([]byte, 0, 2*object.IDSize)}
}

func (t *trailerHasher) Write(p []byte) (int, error) {
	t.n += int64(len(p))
	if len(p) >= object.IDSize {
		t.h.Write(t.tail)
		t.h.Write(p[:len(p)-object.IDSize])
		t.tail = append(t.tail[:0], p[len(p)-object.IDSize:]...)
		return len(p), nil
	}
	t.tail = append(t.tail, p...)
	if extra := len(t.tail) - object.IDSize; extra > 0 {
		t.h.Write(t.tail[:extra])
		t.tail = append(t.tail[:0], t.tail[extra:]...)
	}
	return len(p), nil
}

// check reports whether the bytes seen form a plausibly sized pack whose
// trailer is the SHA-1 of its content and equals want.
func (t *trailerHasher) check(want object.ID) error {
	if t.n < packHeaderSize+object.IDSize {
		return fmt.Errorf("%w: pack is %d bytes, too short", ErrCorrupt, t.n)
	}
	sum := t.h.Sum(nil)
	if !bytes.Equal(sum, t.tail) {
		return fmt.Errorf("%w: pack trailer %x does not match content hash %x", ErrCorrupt, t.tail, sum)
	}
	if !bytes.Equal(t.tail, want[:]) {
		return fmt.Errorf("%w: pack trailer %x does not match name %s", ErrCorrupt, t.tail, want)
	}
	return nil
}

// verifyPackFile checks the pack at path: signature, and either the full
// content hash (full) or only that the stored trailer equals want.
func verifyPackFile(path string, want object.ID, full bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Size() < packHeaderSize+object.IDSize {
		return fmt.Errorf("%w: %s is %d bytes, too short", ErrCorrupt, path, st.Size())
	}
	var hdr [4]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if !bytes.Equal(hdr[:], packMagic) {
		return fmt.Errorf("%w: %s: bad signature", ErrCorrupt, path)
	}
	if !full {
		var trailer object.ID
		if _, err := f.ReadAt(trailer[:], st.Size()-object.IDSize); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if trailer != want {
			return fmt.Errorf("%w: %s: trailer %s does not match name %s", ErrCorrupt, path, trailer, want)
		}
		return nil
	}
	th := newTrailerHasher()
	if _, err := io.Copy(th, f); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := th.check(want); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// verifyIdx checks a version 2 index held in memory: magic, a size that
// agrees with the object count in the fanout table, the index's own
// checksum, and that it indexes the pack named by want.
func verifyIdx(data []byte, want object.ID) error {
	if len(data) < idxHeaderSize+2*object.IDSize {
		return fmt.Errorf("%w: index is %d bytes, too short", ErrCorrupt, len(data))
	}
	if !bytes.Equal(data[:8], idxMagic) {
		return fmt.Errorf("%w: index: bad signature or version", ErrCorrupt)
	}
	n := int64(binary.BigEndian.Uint32(data[8+255*4:]))
	minSize := idxHeaderSize + n*idxEntrySize + 2*object.IDSize
	extra := int64(len(data)) - minSize
	// The only variable part is the 8-byte large-offset table (≤ 1 per object).
	if extra < 0 || extra%8 != 0 || extra/8 > n {
		return fmt.Errorf("%w: index size %d does not fit %d objects", ErrCorrupt, len(data), n)
	}
	body, sum := data[:len(data)-object.IDSize], data[len(data)-object.IDSize:]
	if got := sha1.Sum(body); !bytes.Equal(got[:], sum) {
		return fmt.Errorf("%w: index checksum mismatch", ErrCorrupt)
	}
	packSum := data[len(data)-2*object.IDSize : len(data)-object.IDSize]
	if !bytes.Equal(packSum, want[:]) {
		return fmt.Errorf("%w: index is for pack %x, not %s", ErrCorrupt, packSum, want)
	}
	return nil
}

func verifyIdxFile(path string, want object.ID) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := verifyIdx(data, want); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
