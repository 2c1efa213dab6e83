package pack

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/rgit/rgit/storage/object"
)

// .idx v2 layout: magic, version, 256-entry fanout, sorted ids, CRC32s,
// 32-bit offsets (MSB set: index into the 64-bit table), 64-bit offsets,
// pack checksum, idx checksum.
var idxMagic = []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}

const (
	idxHeaderLen = 8
	fanoutLen    = 256 * 4
	largeOffset  = 0x80000000
)

// Index is a read-only .idx v2 file. The file is memory-mapped where the
// platform allows it, so opening is cheap and nothing is loaded eagerly.
// Methods are safe for concurrent use.
type Index struct {
	data    []byte
	unmap   func() error
	count   int
	ids     []byte // count*20
	crcs    []byte // count*4
	offs    []byte // count*4
	large   []byte // 8 bytes each
	packSum object.ID
}

// OpenIndex opens and validates the structure of an .idx v2 file.
func OpenIndex(path string) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	defer f.Close()
	data, unmap, err := mapFile(f)
	if err != nil {
		return nil, fmt.Errorf("map index %s: %w", path, err)
	}
	idx, err := parseIndex(data)
	if err != nil {
		_ = unmap()
		return nil, fmt.Errorf("index %s: %w", path, err)
	}
	idx.unmap = unmap
	return idx, nil
}

// ParseIndex reads an .idx v2 held in memory; data must not be modified
// while the Index is in use.
func ParseIndex(data []byte) (*Index, error) { return parseIndex(data) }

func parseIndex(data []byte) (*Index, error) {
	if len(data) < idxHeaderLen+fanoutLen+2*object.IDSize {
		return nil, corruptf("index too short (%d bytes)", len(data))
	}
	if !bytes.Equal(data[:4], idxMagic[:4]) {
		return nil, corruptf("index: bad signature (only v2 supported)")
	}
	if !bytes.Equal(data[4:8], idxMagic[4:]) {
		return nil, corruptf("index: unsupported version %d", binary.BigEndian.Uint32(data[4:8]))
	}
	fan := data[idxHeaderLen : idxHeaderLen+fanoutLen]
	prev := uint32(0)
	for i := 0; i < 256; i++ {
		v := binary.BigEndian.Uint32(fan[4*i:])
		if v < prev {
			return nil, corruptf("index: fanout not monotonic")
		}
		prev = v
	}
	n := int64(prev)
	rest := int64(len(data)) - idxHeaderLen - fanoutLen - 2*object.IDSize
	if n*(object.IDSize+8) > rest {
		return nil, corruptf("index: %d objects do not fit in %d bytes", n, len(data))
	}
	largeBytes := rest - n*(object.IDSize+8)
	if largeBytes%8 != 0 {
		return nil, corruptf("index: bad size %d", len(data))
	}
	p := int64(idxHeaderLen + fanoutLen)
	idx := &Index{data: data, count: int(n), unmap: func() error { return nil }}
	idx.ids = data[p : p+n*object.IDSize]
	p += n * object.IDSize
	idx.crcs = data[p : p+n*4]
	p += n * 4
	idx.offs = data[p : p+n*4]
	p += n * 4
	idx.large = data[p : p+largeBytes]
	p += largeBytes
	copy(idx.packSum[:], data[p:])
	return idx, nil
}

// Verify checks the index's own trailing checksum.
func (x *Index) Verify() error {
	n := len(x.data) - object.IDSize
	sum := sha1.Sum(x.data[:n])
	if !bytes.Equal(sum[:], x.data[n:]) {
		return kindf(ErrChecksum, "index checksum mismatch")
	}
	return nil
}

// Count returns the number of objects.
func (x *Index) Count() int { return x.count }

// ID returns the i-th object id in sorted order.
func (x *Index) ID(i int) object.ID {
	var id object.ID
	copy(id[:], x.ids[i*object.IDSize:])
	return id
}

// CRC returns the CRC32 of the i-th object's raw pack entry.
func (x *Index) CRC(i int) uint32 { return binary.BigEndian.Uint32(x.crcs[4*i:]) }

// Offset returns the pack offset of the i-th object, or -1 if the index
// points outside its 64-bit offset table (corrupt index).
func (x *Index) Offset(i int) int64 {
	v := binary.BigEndian.Uint32(x.offs[4*i:])
	if v&largeOffset == 0 {
		return int64(v)
	}
	j := int(v &^ largeOffset)
	if j >= len(x.large)/8 {
		return -1
	}
	o := binary.BigEndian.Uint64(x.large[8*j:])
	if o > 1<<62 {
		return -1
	}
	return int64(o)
}

// PackChecksum returns the checksum of the pack this index describes.
func (x *Index) PackChecksum() object.ID { return x.packSum }

// Checksum returns the index file's own checksum.
func (x *Index) Checksum() object.ID {
	var id object.ID
	copy(id[:], x.data[len(x.data)-object.IDSize:])
	return id
}

// Find returns the position of id in the sorted id table.
func (x *Index) Find(id object.ID) (int, bool) {
	lo := 0
	if id[0] > 0 {
		lo = int(binary.BigEndian.Uint32(x.data[idxHeaderLen+4*(int(id[0])-1):]))
	}
	hi := int(binary.BigEndian.Uint32(x.data[idxHeaderLen+4*int(id[0]):]))
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		c := bytes.Compare(x.ids[m*object.IDSize:(m+1)*object.IDSize], id[:])
		switch {
		case c == 0:
			return m, true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0, false
}

// Lookup returns the pack offset of id.
func (x *Index) Lookup(id object.ID) (offset int64, ok bool) {
	i, ok := x.Find(id)
	if !ok {
		return 0, false
	}
	return x.Offset(i), true
}

// Close releases the mapping. The Index must not be used afterwards.
func (x *Index) Close() error {
	if x.unmap == nil {
		return nil
	}
	err := x.unmap()
	x.unmap = nil
	return err
}
