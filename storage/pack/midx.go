package pack

import (
	"bytes"
	"cmp"
	"encoding/binary"

	"github.com/rgit/rgit/storage/object"
)

// multiIndex is a Set's merged object index, git's multi-pack-index kept
// in memory: every object of the set once, in id order, naming the pack
// that serves it (the first holding it, in set order) and its position in
// that pack's index, with a fanout over the first id byte. A lookup
// across N packs is then one binary search instead of one per pack, and
// a miss (a negotiation "have" the server lacks) costs one search, not N.
// An entry carries the first 8 bytes of its id, so a search touches only
// this array until it meets an equal prefix; the full ids stay in the
// packs' mapped indexes. 16 bytes per object.
type multiIndex struct {
	fanout [256]uint32 // fanout[b]: entries whose id's first byte is <= b
	ents   []midxEntry // sorted by id
}

type midxEntry struct {
	prefix uint64 // the id's first 8 bytes, big-endian
	loc    uint64 // pack<<32 | index position
}

// multiIndexAfter is how many single-pack-walk lookups a Set does before
// it builds its multi-index: a eighth of its objects. A Set used for a
// few lookups (a push's checks) never pays the merge; one serving a
// clone or a negotiation builds it early, and the merge (a heap over the
// packs' sorted ids, O(objects × log packs)) is then a fraction of the
// lookups it saves.
func multiIndexAfter(objects int) int64 { return int64(objects / 8) }

// buildMultiIndex merges the packs' sorted indexes.
func buildMultiIndex(packs []*Pack) *multiIndex {
	total := 0
	for _, p := range packs {
		total += p.idx.Count()
	}
	mi := &multiIndex{ents: make([]midxEntry, 0, total)}
	// A binary min-heap of cursors, one per pack with ids left, ordered
	// by current id and then by pack (so the first pack wins a tie).
	type cursor struct{ pack, pos int }
	idOf := func(c cursor) []byte {
		return packs[c.pack].idx.ids[c.pos*object.IDSize : (c.pos+1)*object.IDSize]
	}
	less := func(a, b cursor) bool {
		if c := bytes.Compare(idOf(a), idOf(b)); c != 0 {
			return c < 0
		}
		return a.pack < b.pack
	}
	heap := make([]cursor, 0, len(packs))
	down := func(i int) {
		for {
			l, small := 2*i+1, i
			if l < len(heap) && less(heap[l], heap[small]) {
				small = l
			}
			if r := l + 1; r < len(heap) && less(heap[r], heap[small]) {
				small = r
			}
			if small == i {
				return
			}
			heap[i], heap[small] = heap[small], heap[i]
			i = small
		}
	}
	for pi, p := range packs {
		if p.idx.Count() > 0 {
			heap = append(heap, cursor{pi, 0})
		}
	}
	for i := len(heap)/2 - 1; i >= 0; i-- {
		down(i)
	}
	var last []byte
	for len(heap) > 0 {
		c := heap[0]
		if id := idOf(c); last == nil || !bytes.Equal(id, last) {
			mi.ents = append(mi.ents, midxEntry{binary.BigEndian.Uint64(id), uint64(c.pack)<<32 | uint64(c.pos)})
			mi.fanout[id[0]]++
			last = id
		}
		if c.pos+1 < packs[c.pack].idx.Count() {
			heap[0].pos++
		} else {
			heap[0] = heap[len(heap)-1]
			heap = heap[:len(heap)-1]
		}
		down(0)
	}
	for b := 1; b < 256; b++ {
		mi.fanout[b] += mi.fanout[b-1]
	}
	return mi
}

// find returns the pack and index position serving id.
func (mi *multiIndex) find(packs []*Pack, id object.ID) (int, int, bool) {
	lo := uint32(0)
	if id[0] > 0 {
		lo = mi.fanout[id[0]-1]
	}
	hi := mi.fanout[id[0]]
	want := binary.BigEndian.Uint64(id[:])
	for lo < hi {
		m := (lo + hi) >> 1
		e := mi.ents[m]
		pi, pos := int(e.loc>>32), int(uint32(e.loc))
		c := cmp.Compare(e.prefix, want)
		if c == 0 {
			c = bytes.Compare(packs[pi].idx.ids[pos*object.IDSize:(pos+1)*object.IDSize], id[:])
		}
		switch {
		case c == 0:
			return pi, pos, true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0, 0, false
}
