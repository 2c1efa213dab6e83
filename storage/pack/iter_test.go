package pack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

func TestObjectIter(t *testing.T) {
	fx := sharedFixture(t)
	p := openFixture(t, fx)
	want := catFileAll(t, fx.dir)
	ents, err := p.Entries()
	if err != nil || len(ents) != len(want) {
		t.Fatalf("%d entries, %v", len(ents), err)
	}
	it := p.Objects()
	n := 0
	for {
		id, typ, data, err := it.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if id != ents[n].ID || typ != want[id].typ || !bytes.Equal(data, want[id].data) {
			t.Fatalf("object %d (%s) wrong", n, id)
		}
		if n > 0 && ents[n].Offset <= ents[n-1].Offset {
			t.Fatal("entries not in offset order")
		}
		n++
	}
	if n != len(want) {
		t.Fatalf("iterated %d objects, want %d", n, len(want))
	}
	// EntrySizes: the same order, each entry up to the next one's start,
	// together the whole pack but its header and trailer.
	sizes, err := p.EntrySizes()
	if err != nil {
		t.Fatal(err)
	}
	var i int
	var total int64
	for id, size := range sizes {
		if id != ents[i].ID || (i+1 < len(ents) && size != ents[i+1].Offset-ents[i].Offset) || size <= 0 {
			t.Fatalf("entry %d: %s %d bytes", i, id, size)
		}
		if one, ok, err := p.EntrySize(id); one != size || !ok || err != nil {
			t.Fatalf("EntrySize(%s) = %d, %v, %v; EntrySizes says %d", id, one, ok, err, size)
		}
		total += size
		i++
	}
	if i != len(ents) || total != p.Size()-12-20 {
		t.Fatalf("%d sizes totalling %d bytes, pack of %d", i, total, p.Size())
	}
	if _, ok, err := p.EntrySize(object.ID{1}); ok || err != nil {
		t.Fatalf("EntrySize of a missing object: %v, %v", ok, err)
	}
}

// Offsets of 2 GiB and more go to the 64-bit table, in id order.
func TestWriteIndexLargeOffsets(t *testing.T) {
	ents := []IndexEntry{
		{ID: object.ID{0x01}, Offset: 12, CRC: 1},
		{ID: object.ID{0x02}, Offset: 5 << 32, CRC: 2},
		{ID: object.ID{0x80}, Offset: 0x7fffffff, CRC: 3},
		{ID: object.ID{0xfe}, Offset: 0x80000000, CRC: 4},
	}
	var buf bytes.Buffer
	sum, err := WriteIndex(&buf, ents, object.ID{9})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := ParseIndex(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if idx.Verify() != nil || idx.Checksum() != sum || idx.PackChecksum() != (object.ID{9}) {
		t.Fatal("checksums wrong")
	}
	for i, e := range ents {
		if idx.ID(i) != e.ID || idx.Offset(i) != e.Offset || idx.CRC(i) != e.CRC {
			t.Fatalf("entry %d: %s %d %d", i, idx.ID(i), idx.Offset(i), idx.CRC(i))
		}
	}
	// Two large entries: 8 (header) + 1024 + 4*(20+4+4) + 2*8 + 40.
	if buf.Len() != 8+1024+4*28+16+40 {
		t.Fatalf("size %d", buf.Len())
	}
	off32 := buf.Bytes()[8+1024+4*24:]
	if binary.BigEndian.Uint32(off32[4:]) != 0x80000000 || binary.BigEndian.Uint32(off32[12:]) != 0x80000001 {
		t.Fatal("large offset table not in id order")
	}
	if _, err := WriteIndex(io.Discard, []IndexEntry{ents[1], ents[0]}, object.ID{}); err == nil {
		t.Fatal("unsorted entries accepted")
	}
}
