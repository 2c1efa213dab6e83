package bitmap

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/rgit/rgit/storage/format"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
)

// Sentinel errors callers may branch on. Any of them means: ignore the
// bitmap and walk.
var (
	// ErrCorrupt: the file is truncated, fails its checksum or is
	// otherwise malformed.
	ErrCorrupt = errors.New("corrupt bitmap index")
	// ErrMismatch: the file is intact but belongs to another pack.
	ErrMismatch = errors.New("bitmap index does not match pack")
	// ErrUnsupported: the request needs something bitmaps cannot answer
	// (shallow, deepen, some filters); the caller must walk.
	ErrUnsupported = errors.New("request not answerable from bitmaps")
)

var magic = []byte("RGBM")

const (
	// version is what WriteTo writes for a bitmap without bases, and
	// versionLayer for one with: a node that predates layers refuses only
	// those (and walks). Version 1 differs from 2 only in its trailer
	// (SHA-1 instead of CRC-32C); Parse reads all three.
	version      = 2
	versionV1    = 1
	versionLayer = 3
	// maxBases bounds a layer's base list: maintenance keeps a
	// repository's packs logarithmic in its objects, far below this.
	maxBases   = 256
	baseRefLen = object.IDSize + 4
	headerLen  = 4 + 4 + object.IDSize + 4 + 4
	numTypes   = 4
	crcLen     = 4
)

// castagnoli is the CRC-32C table; crc32 computes it with the CPU's CRC
// instructions where there are some.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// unseal checks data's signature, version and trailing checksum and
// returns what the checksum covers. Every open verifies the whole file so
// that damage is found before a query trusts a mask; version 2 seals with
// CRC-32C because that check then costs ~0.04 ms per MB instead of SHA-1's
// ~0.5 ms, paid by every process that opens the pack. The checksum guards
// against damage, not forgery: whoever can write the file can reseal it
// with either.
func unseal(data []byte) ([]byte, error) {
	if len(data) < headerLen+crcLen {
		return nil, fmt.Errorf("%d bytes: %w", len(data), ErrCorrupt)
	}
	if !bytes.Equal(data[:4], magic) {
		return nil, fmt.Errorf("bad signature: %w", ErrCorrupt)
	}
	v := binary.BigEndian.Uint32(data[4:])
	if err := format.Bitmap.Check(v); err != nil {
		return nil, err
	}
	switch v {
	case version, versionLayer:
		body := data[:len(data)-crcLen]
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(data[len(body):]) {
			return nil, fmt.Errorf("checksum: %w", ErrCorrupt)
		}
		return body, nil
	case versionV1:
		if len(data) < headerLen+object.IDSize {
			return nil, fmt.Errorf("%d bytes: %w", len(data), ErrCorrupt)
		}
		body := data[:len(data)-object.IDSize]
		if sum := sha1.Sum(body); !bytes.Equal(sum[:], data[len(body):]) {
			return nil, fmt.Errorf("checksum: %w", ErrCorrupt)
		}
		return body, nil
	default: // format.Bitmap and this switch disagree
		return nil, fmt.Errorf("version %d: %w", v, ErrCorrupt)
	}
}

// typeSlot maps an object type to its type mask, or -1.
func typeSlot(t object.Type) int {
	switch t {
	case object.Commit:
		return 0
	case object.Tree:
		return 1
	case object.Blob:
		return 2
	case object.Tag:
		return 3
	}
	return -1
}

// Index is a loaded bitmap index for one pack. It is read-only and safe for
// concurrent use; masks are decoded per query (over a Stack).
type Index struct {
	p     *pack.Pack
	count int // objects in p
	// bases are the packs the index is layered over, in stack order; none
	// for a pack that holds a whole repository.
	bases []packRef
	// span is how many positions the masks cover: the bases' objects,
	// then p's.
	span    int
	types   [numTypes][]byte
	entries map[object.ID]int // position in list
	list    []entry           // in file order
}

// packRef names a pack below a layer: its checksum and object count.
type packRef struct {
	sum   object.ID
	count int
}

func refOf(p *pack.Pack) packRef { return packRef{p.Checksum(), p.Index().Count()} }

// entry is one stored reachability mask. A mask with a base is stored as
// its XOR with the base's mask: neighbouring commits reach nearly the same
// objects, so the XOR is mostly zero words, which the encoding collapses.
type entry struct {
	id   object.ID
	base int // index in list of an earlier entry, or -1
	mask []byte
}

// noBase marks an entry stored whole.
const noBase = 1<<32 - 1

// maxChain bounds how many XORs decoding one mask takes.
const maxChain = 16

// Pack returns the pack the index describes.
func (x *Index) Pack() *pack.Pack { return x.p }

// Len returns the number of objects with a stored reachability mask.
func (x *Index) Len() int { return len(x.entries) }

// PathFor returns the bitmap file name that sits next to packPath
// ("pack-<hash>.pack" -> "pack-<hash>.bitmap").
func PathFor(packPath string) string {
	return strings.TrimSuffix(packPath, ".pack") + ".bitmap"
}

// Open reads the bitmap file at path for pack p.
func Open(path string, p *pack.Pack) (*Index, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read bitmap %s: %w", path, err)
	}
	x, err := Parse(data, p)
	if err != nil {
		return nil, fmt.Errorf("bitmap %s: %w", path, err)
	}
	return x, nil
}

// Parse loads an encoded index for pack p. The Index keeps references into
// data, which must not be modified afterwards.
func Parse(data []byte, p *pack.Pack) (*Index, error) {
	body, err := unseal(data)
	if err != nil {
		return nil, err
	}
	var sum object.ID
	copy(sum[:], body[8:])
	count := int(binary.BigEndian.Uint32(body[8+object.IDSize:]))
	n := int(binary.BigEndian.Uint32(body[12+object.IDSize:]))
	if sum != p.Checksum() || count != p.Index().Count() {
		return nil, fmt.Errorf("bitmap for pack %s (%d objects), pack is %s (%d objects): %w",
			sum, count, p.Checksum(), p.Index().Count(), ErrMismatch)
	}
	x := &Index{p: p, count: count, span: count, entries: make(map[object.ID]int, min(n, len(body)/object.IDSize))}
	rest := body[headerLen:]
	if binary.BigEndian.Uint32(body[4:]) == versionLayer {
		if rest, err = x.parseBases(rest); err != nil {
			return nil, err
		}
	}
	depth := make([]int, 0, min(n, len(body)/object.IDSize))
	mask := func() ([]byte, error) {
		if len(rest) < 4 {
			return nil, fmt.Errorf("truncated mask: %w", ErrCorrupt)
		}
		l := binary.BigEndian.Uint32(rest)
		if uint64(l) > uint64(len(rest)-4) || l%8 != 0 {
			return nil, fmt.Errorf("mask length %d: %w", l, ErrCorrupt)
		}
		m := rest[4 : 4+l]
		rest = rest[4+l:]
		return m, nil
	}
	for t := range x.types {
		if x.types[t], err = mask(); err != nil {
			return nil, err
		}
	}
	for i := range n {
		if len(rest) < object.IDSize+4 {
			return nil, fmt.Errorf("truncated entry: %w", ErrCorrupt)
		}
		e := entry{base: -1}
		copy(e.id[:], rest)
		d := 0
		if b := binary.BigEndian.Uint32(rest[object.IDSize:]); b != noBase {
			if int64(b) >= int64(i) || depth[b] >= maxChain {
				return nil, fmt.Errorf("entry %d: bad base %d: %w", i, b, ErrCorrupt)
			}
			e.base, d = int(b), depth[b]+1
		}
		rest = rest[object.IDSize+4:]
		if e.mask, err = mask(); err != nil {
			return nil, err
		}
		if _, dup := x.entries[e.id]; dup {
			return nil, fmt.Errorf("entry %s twice: %w", e.id, ErrCorrupt)
		}
		x.entries[e.id] = len(x.list)
		x.list = append(x.list, e)
		depth = append(depth, d)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d trailing bytes: %w", len(rest), ErrCorrupt)
	}
	return x, nil
}

// parseBases reads a layer's base list from the front of rest and returns
// what follows it.
func (x *Index) parseBases(rest []byte) ([]byte, error) {
	if len(rest) < 4 {
		return nil, fmt.Errorf("truncated base list: %w", ErrCorrupt)
	}
	n := int(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	if n == 0 || n > maxBases || len(rest) < n*baseRefLen {
		return nil, fmt.Errorf("%d bases: %w", n, ErrCorrupt)
	}
	x.bases = make([]packRef, n)
	for i := range x.bases {
		copy(x.bases[i].sum[:], rest)
		x.bases[i].count = int(binary.BigEndian.Uint32(rest[object.IDSize:]))
		x.span += x.bases[i].count
		rest = rest[baseRefLen:]
	}
	if x.span > math.MaxInt32 {
		return nil, fmt.Errorf("layer spans %d objects: %w", x.span, ErrCorrupt)
	}
	return rest, nil
}

// decodeMask expands an encoded mask of this index. Bits past its span
// would name objects outside the packs it covers, so they are refused.
func (x *Index) decodeMask(m []byte) (bitset, error) {
	b, err := decode(m, (x.span+63)/64)
	if err != nil {
		return nil, err
	}
	if r := x.span % 64; r != 0 && b[len(b)-1]>>r != 0 {
		return nil, fmt.Errorf("mask past %d objects: %w", x.span, ErrCorrupt)
	}
	return b, nil
}

// stored returns the decoded reachability mask of id, if it has one.
func (x *Index) stored(id object.ID) (bitset, bool, error) {
	i, ok := x.entries[id]
	if !ok {
		return nil, false, nil
	}
	b, err := x.decodeEntry(i)
	if err != nil {
		return nil, false, fmt.Errorf("mask of %s: %w", id, err)
	}
	return b, true, nil
}

// decodeEntry decodes list[i], applying its chain of bases.
func (x *Index) decodeEntry(i int) (bitset, error) {
	e := x.list[i]
	b, err := x.decodeMask(e.mask)
	if err != nil || e.base < 0 {
		return b, err
	}
	base, err := x.decodeEntry(e.base)
	if err != nil {
		return nil, err
	}
	for w := range b {
		b[w] ^= base[w]
	}
	return b, nil
}

// WriteTo writes the index in the file format of the package comment. It
// streams: the masks of a big history are tens of MB, and a copy of them
// all (doubled by append's growth) was the peak of a bitmap build.
func (x *Index) WriteTo(w io.Writer) (int64, error) {
	cw := &crcWriter{w: bufio.NewWriterSize(w, 64<<10)}
	var scratch [headerLen]byte
	buf := append(scratch[:0], magic...)
	v := uint32(version)
	if len(x.bases) > 0 {
		v = versionLayer
	}
	buf = binary.BigEndian.AppendUint32(buf, v)
	sum := x.p.Checksum()
	buf = append(buf, sum[:]...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(x.count))
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(x.list)))
	cw.write(buf)
	if len(x.bases) > 0 {
		cw.write(binary.BigEndian.AppendUint32(scratch[:0], uint32(len(x.bases))))
		for _, b := range x.bases {
			cw.write(binary.BigEndian.AppendUint32(append(scratch[:0], b.sum[:]...), uint32(b.count)))
		}
	}
	writeMask := func(m []byte) {
		cw.write(binary.BigEndian.AppendUint32(scratch[:0], uint32(len(m))))
		cw.write(m)
	}
	for _, m := range x.types {
		writeMask(m)
	}
	for _, e := range x.list {
		base := uint32(noBase)
		if e.base >= 0 {
			base = uint32(e.base)
		}
		cw.write(binary.BigEndian.AppendUint32(append(scratch[:0], e.id[:]...), base))
		writeMask(e.mask)
	}
	n := cw.n
	cw.write(binary.BigEndian.AppendUint32(scratch[:0], cw.crc))
	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	if cw.err != nil {
		return n, fmt.Errorf("write bitmap: %w", cw.err)
	}
	return cw.n, nil
}

// crcWriter writes to w, keeping the CRC-32C of what it wrote and the
// first error.
type crcWriter struct {
	w   *bufio.Writer
	crc uint32
	n   int64
	err error
}

func (c *crcWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	c.crc = crc32.Update(c.crc, castagnoli, b)
	k, err := c.w.Write(b)
	c.n += int64(k)
	c.err = err
}

// WriteFile writes the index to path atomically (temp file and rename), so
// a reader never sees a partial file.
func (x *Index) WriteFile(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".bitmap-*")
	if err != nil {
		return fmt.Errorf("write bitmap %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if _, err := x.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write bitmap %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write bitmap %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write bitmap %s: %w", path, err)
	}
	return nil
}
