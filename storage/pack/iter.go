package pack

import (
	"io"
	"iter"

	"github.com/rgit/rgit/storage/object"
)

// Entry locates one object in a pack.
type Entry struct {
	ID     object.ID
	Offset int64
	CRC    uint32
}

// Entries returns the pack's entries in offset (storage) order.
func (p *Pack) Entries() ([]Entry, error) {
	order, err := p.offsetOrder()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(order))
	for i, pos := range order {
		out[i] = Entry{ID: p.idx.ID(int(pos)), Offset: p.idx.Offset(int(pos)), CRC: p.idx.CRC(int(pos))}
	}
	return out, nil
}

// EntrySizes returns the pack's objects in offset order with the bytes
// each entry takes in the pack (header and compressed data): what sending
// the pack whole costs per object, read from the index alone.
func (p *Pack) EntrySizes() (iter.Seq2[object.ID, int64], error) {
	order, err := p.offsetOrder()
	if err != nil {
		return nil, err
	}
	end := p.size - packTrailerLen
	return func(yield func(object.ID, int64) bool) {
		for i, pos := range order {
			next := end
			if i+1 < len(order) {
				next = p.idx.Offset(int(order[i+1]))
			}
			if !yield(p.idx.ID(int(pos)), next-p.idx.Offset(int(pos))) {
				return
			}
		}
	}, nil
}

// EntrySize returns the bytes id's entry takes in the pack, as
// EntrySizes does for all of them; ok is false when the pack lacks id.
func (p *Pack) EntrySize(id object.ID) (size int64, ok bool, err error) {
	off, ok := p.idx.Lookup(id)
	if !ok {
		return 0, false, nil
	}
	end, err := p.entryEnd(off)
	if err != nil {
		return 0, true, err
	}
	return end - off, true, nil
}

// ObjectIter reads every object of a pack in offset order, which is the
// order git stores OFS_DELTA bases before their deltas, so the pack's base
// cache is used well. It is not safe for concurrent use.
type ObjectIter struct {
	p     *Pack
	order []uint32
	i     int
	err   error
}

// Objects returns an iterator over all objects of the pack.
func (p *Pack) Objects() *ObjectIter {
	order, err := p.offsetOrder()
	return &ObjectIter{p: p, order: order, err: err}
}

// Next returns the next object, or io.EOF after the last one.
func (it *ObjectIter) Next() (object.ID, object.Type, []byte, error) {
	if it.err != nil {
		return object.ID{}, object.Invalid, nil, it.err
	}
	if it.i >= len(it.order) {
		return object.ID{}, object.Invalid, nil, io.EOF
	}
	pos := int(it.order[it.i])
	it.i++
	id := it.p.idx.ID(pos)
	t, data, err := it.p.readAt(it.p.idx.Offset(pos))
	if err != nil {
		it.err = err
		return id, object.Invalid, nil, err
	}
	return id, t, data, nil
}
