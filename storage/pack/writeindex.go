package pack

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/rgit/rgit/storage/object"
)

// IndexEntry is one object of an index being written.
type IndexEntry struct {
	ID     object.ID
	Offset int64
	CRC    uint32
}

// WriteIndex writes an .idx v2 for entries, which must be sorted by ID with
// no duplicates. Offsets of 2 GiB and more go to the 64-bit table exactly as
// git writes them, so the output is byte-identical to git's. It returns the
// index checksum (its last 20 bytes).
func WriteIndex(w io.Writer, entries []IndexEntry, packChecksum object.ID) (object.ID, error) {
	var sum object.ID
	for i := 1; i < len(entries); i++ {
		if bytes.Compare(entries[i-1].ID[:], entries[i].ID[:]) >= 0 {
			return sum, fmt.Errorf("write index: entries not sorted or duplicate id %s", entries[i].ID)
		}
	}
	h := sha1.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 64<<10)
	var b [8]byte
	bw.Write(idxMagic)
	var fan [256]uint32
	for _, e := range entries {
		fan[e.ID[0]]++
	}
	var total uint32
	for i := range fan {
		total += fan[i]
		binary.BigEndian.PutUint32(b[:4], total)
		bw.Write(b[:4])
	}
	for i := range entries {
		bw.Write(entries[i].ID[:])
	}
	for i := range entries {
		binary.BigEndian.PutUint32(b[:4], entries[i].CRC)
		bw.Write(b[:4])
	}
	nLarge := uint32(0)
	for i := range entries {
		off := entries[i].Offset
		if off < 0 {
			return sum, fmt.Errorf("write index: negative offset for %s", entries[i].ID)
		}
		v := uint32(off)
		if off >= largeOffset {
			v = largeOffset | nLarge
			nLarge++
		}
		binary.BigEndian.PutUint32(b[:4], v)
		bw.Write(b[:4])
	}
	for i := range entries {
		if off := entries[i].Offset; off >= largeOffset {
			binary.BigEndian.PutUint64(b[:], uint64(off))
			bw.Write(b[:])
		}
	}
	bw.Write(packChecksum[:])
	if err := bw.Flush(); err != nil {
		return sum, fmt.Errorf("write index: %w", err)
	}
	h.Sum(sum[:0])
	if _, err := w.Write(sum[:]); err != nil {
		return sum, fmt.Errorf("write index: %w", err)
	}
	return sum, nil
}
