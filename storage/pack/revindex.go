package pack

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rgit/rgit/storage/object"
)

// A reverse index (git's .rev, version 1) stores a pack's index positions
// in pack offset order, so a process opening the pack need not sort its
// offsets again:
//
//	"RIDX" | version u32 = 1 | hash id u32 = 1 (SHA-1) |
//	index position u32 per object, by offset | pack checksum [20] |
//	SHA-1 of everything before
//
// It is a cache of something computable from the .idx, so it is trusted
// no further than it can be checked: on load every position is checked to
// name an object whose offset lies inside the pack and is larger than the
// previous one. That sequence is unique, so a file that passes is exactly
// the order a rebuild would produce, whatever its trailing checksum says;
// the checksum is written for git's tools (fsck, and git itself reads the
// file) and not recomputed on load, which would cost as much as the check.
var revMagic = []byte("RIDX")

const (
	revVersion   = 1
	revHashSHA1  = 1
	revHeaderLen = 12
)

// RevPathFor returns the reverse index path that sits next to packPath
// ("pack-<hash>.pack" -> "pack-<hash>.rev"), where git keeps it too.
func RevPathFor(packPath string) string {
	return strings.TrimSuffix(packPath, ".pack") + ".rev"
}

// offsetOrder returns index positions sorted by pack offset, computed once
// per Pack: read from the reverse index file if OpenOptions.RevPath names a
// valid one, otherwise sorted here (and then written to RevPath for the
// next process).
func (p *Pack) offsetOrder() ([]uint32, error) {
	p.byOffOnce.Do(func() {
		if p.revPath != "" {
			if order, err := readRevIndex(p.revPath, p); err == nil {
				p.byOff = order
				return
			}
			// Missing or unusable: rebuild below and replace it.
		}
		order := make([]uint32, p.idx.Count())
		for i := range order {
			order[i] = uint32(i)
		}
		sortByOffset(p.idx, order)
		if p.byOffErr = p.checkOrder(order); p.byOffErr != nil {
			return
		}
		p.byOff = order
		if p.revPath != "" {
			// Best effort: a file that cannot be written (read-only
			// directory, full disk) only costs the next process a sort.
			_ = writeRevIndex(p.revPath, order, p.Checksum())
		}
	})
	return p.byOff, p.byOffErr
}

// checkOrder verifies that order lists index positions by strictly
// increasing offset, every offset inside the pack's object area. With
// Count entries that makes it a permutation (an offset names one
// position) and the one true offset order.
func (p *Pack) checkOrder(order []uint32) error {
	n := p.idx.Count()
	if len(order) != n {
		return corruptf("offset order has %d entries, index has %d", len(order), n)
	}
	prev := int64(-1)
	for _, pos := range order {
		if int(pos) >= n {
			return corruptf("offset order names position %d of %d", pos, n)
		}
		o := p.idx.Offset(int(pos))
		if o < packHeaderLen || o >= p.size-packTrailerLen {
			return corruptf("index offset %d of %s out of range", o, p.idx.ID(int(pos)))
		}
		if o <= prev {
			if o == prev {
				return corruptf("two index entries share offset %d", o)
			}
			return corruptf("offset order not increasing at offset %d", o)
		}
		prev = o
	}
	return nil
}

// readRevIndex loads and checks the reverse index at path for p.
func readRevIndex(path string, p *Pack) ([]uint32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read reverse index: %w", err)
	}
	order, err := parseRevIndex(data, p.Checksum())
	if err == nil {
		err = p.checkOrder(order)
	}
	if err != nil {
		return nil, fmt.Errorf("reverse index %s: %w", path, err)
	}
	return order, nil
}

// parseRevIndex decodes a reverse index's header, positions and pack
// checksum; whether the positions are right is checkOrder's job.
func parseRevIndex(data []byte, packSum object.ID) ([]uint32, error) {
	if len(data) < revHeaderLen+2*object.IDSize || (len(data)-revHeaderLen-2*object.IDSize)%4 != 0 {
		return nil, corruptf("reverse index of bad size %d", len(data))
	}
	if !bytes.Equal(data[:4], revMagic) {
		return nil, corruptf("reverse index: bad signature")
	}
	if v := binary.BigEndian.Uint32(data[4:]); v != revVersion {
		return nil, corruptf("reverse index: unsupported version %d", v)
	}
	if h := binary.BigEndian.Uint32(data[8:]); h != revHashSHA1 {
		return nil, corruptf("reverse index: unsupported hash id %d", h)
	}
	table := data[revHeaderLen : len(data)-2*object.IDSize]
	if !bytes.Equal(data[len(data)-2*object.IDSize:len(data)-object.IDSize], packSum[:]) {
		return nil, kindf(ErrChecksum, "reverse index belongs to another pack")
	}
	order := make([]uint32, len(table)/4)
	for i := range order {
		order[i] = binary.BigEndian.Uint32(table[4*i:])
	}
	return order, nil
}

// encodeRevIndex returns the reverse index file for order.
func encodeRevIndex(order []uint32, packSum object.ID) []byte {
	buf := make([]byte, 0, revHeaderLen+4*len(order)+2*object.IDSize)
	buf = append(buf, revMagic...)
	buf = binary.BigEndian.AppendUint32(buf, revVersion)
	buf = binary.BigEndian.AppendUint32(buf, revHashSHA1)
	for _, pos := range order {
		buf = binary.BigEndian.AppendUint32(buf, pos)
	}
	buf = append(buf, packSum[:]...)
	sum := sha1.Sum(buf)
	return append(buf, sum[:]...)
}

// writeRevIndex writes the reverse index atomically (temp file, rename),
// so a concurrent reader sees the old file, none, or the whole new one.
func writeRevIndex(path string, order []uint32, packSum object.ID) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-rev-*")
	if err != nil {
		return fmt.Errorf("write reverse index %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if _, err := f.Write(encodeRevIndex(order, packSum)); err != nil {
		f.Close()
		return fmt.Errorf("write reverse index %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write reverse index %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write reverse index %s: %w", path, err)
	}
	return nil
}
