package pack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/rgit/rgit/storage/object"
)

// DefaultRepackDepth bounds the delta chains WriteRepack builds (git's
// pack.depth default).
const DefaultRepackDepth = 50

// rcopy is the stored copy WriteRepack chose for one object.
type rcopy struct {
	it    witem
	h     entryHeader
	base  int32 // index of the delta base in the sorted ids; -1: write whole
	depth int16 // delta chain length below this entry; -1 unknown, -2 visiting
	// A whole copy to fall back on when the delta must go (a cycle, a
	// chain too deep); whole.off == 0: none, resolve the delta instead.
	whole witem
	wh    entryHeader
}

const (
	depthUnknown  = -1
	depthVisiting = -2
)

// WriteRepack writes a pack holding exactly objs, for a repack of the
// whole repository. Like WritePack it copies stored bytes and computes no
// delta, but it chooses among the copies of an object stored in several
// packs: a delta whose base is also written wins over a whole copy. A
// repository built from pushes needs that: a pushed thin pack is completed
// with whole copies of its bases, which older packs store as deltas, so
// taking the first copy found keeps one whole object per push and file.
// Entries are written bases first (by chain depth), every delta as
// OFS_DELTA, and chains are cut to whole objects beyond maxDepth (0:
// DefaultRepackDepth) or where two packs' deltas would form a cycle.
func (s *Set) WriteRepack(ctx context.Context, w io.Writer, objs []object.ID, maxDepth int, progress ProgressFunc) (WriteStats, error) {
	var st WriteStats
	if maxDepth <= 0 {
		maxDepth = DefaultRepackDepth
	}
	cmpID := func(a, b object.ID) int { return bytes.Compare(a[:], b[:]) }
	ids := slices.Clone(objs)
	slices.SortFunc(ids, cmpID)
	ids = slices.Compact(ids)
	indexOf := func(id object.ID) (int32, bool) {
		i, ok := slices.BinarySearchFunc(ids, id, cmpID)
		return int32(i), ok
	}
	cs := make([]rcopy, len(ids))
	for i, id := range ids {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return st, err
			}
		}
		if err := s.chooseCopy(&cs[i], id, indexOf); err != nil {
			return st, fmt.Errorf("write repack: %w", err)
		}
	}
	limitChains(cs, maxDepth)
	order := make([]int32, len(cs))
	for i := range order {
		order[i] = int32(i)
	}
	// Bases before deltas; within a depth, pack then offset order, so
	// reads are sequential.
	slices.SortFunc(order, func(a, b int32) int {
		ca, cb := &cs[a], &cs[b]
		if ca.depth != cb.depth {
			return int(ca.depth) - int(cb.depth)
		}
		return cmpItem(ca.it, cb.it)
	})

	st.Objects = len(cs)
	pw := newPackWriter(w)
	pw.header(len(cs))
	ew := &entryWriter{set: s, pw: pw, st: &st, buf: make([]byte, 64<<10)}
	for n, i := range order {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			if progress != nil {
				progress("writing objects", uint64(n), uint64(len(order)))
			}
		}
		if err := ew.writeRepackEntry(cs, i); err != nil {
			return st, fmt.Errorf("write repack: %s: %w", ids[i], err)
		}
		if pw.err != nil {
			return st, fmt.Errorf("write repack: %w", pw.err)
		}
	}
	if err := pw.finish(&st, progress, "writing objects"); err != nil {
		return st, fmt.Errorf("write repack: %w", err)
	}
	return st, nil
}

// chooseCopy looks at every stored copy of id and records the preferred
// one in c: a delta whose base is written too, else a whole copy, else
// (base not written) a delta to resolve.
func (s *Set) chooseCopy(c *rcopy, id object.ID, indexOf func(object.ID) (int32, bool)) error {
	c.base, c.depth = -1, depthUnknown
	found := false
	for pi, p := range s.packs {
		pos, ok := p.idx.Find(id)
		if !ok {
			continue
		}
		it := witem{pack: int32(pi), pos: int32(pos), off: p.idx.Offset(pos)}
		h, err := p.entryHeader(it.off)
		if err != nil {
			return err
		}
		if h.typ < object.OfsDelta {
			if c.whole.off == 0 {
				c.whole, c.wh = it, h
			}
			if !found || c.base < 0 && c.h.typ >= object.OfsDelta {
				c.it, c.h, found = it, h, true // better than resolving a delta
			}
			continue
		}
		if c.base >= 0 {
			continue // a usable delta is already chosen
		}
		baseID := h.baseID
		if h.typ == object.OfsDelta {
			if baseID, err = p.idAt(h.baseOfs); err != nil {
				return err
			}
		}
		if b, ok := indexOf(baseID); ok {
			c.it, c.h, c.base, found = it, h, b, true
		} else if !found {
			c.it, c.h, found = it, h, true // resolved when written
		}
	}
	if !found {
		return fmt.Errorf("%s: %w", id, object.ErrNotFound)
	}
	if c.base < 0 && c.h.typ < object.OfsDelta {
		c.depth = 0
	}
	return nil
}

// limitChains sets every entry's chain depth, turning deltas into whole
// objects where a chain would exceed maxDepth or close a cycle (possible
// when two packs store deltas of the same pair in opposite directions).
// Pure over cs: the policy in one place.
func limitChains(cs []rcopy, maxDepth int) {
	toWhole := func(i int32) {
		c := &cs[i]
		c.base, c.depth = -1, 0
		if c.whole.off != 0 {
			c.it, c.h = c.whole, c.wh
		}
	}
	var path []int32
	for i := range cs {
		if cs[i].depth >= 0 {
			continue
		}
		path = path[:0]
		cur := int32(i)
		for cs[cur].depth == depthUnknown && cs[cur].base >= 0 {
			cs[cur].depth = depthVisiting
			path = append(path, cur)
			cur = cs[cur].base
		}
		switch cs[cur].depth {
		case depthVisiting: // the chain came back to cur: cut it there
			toWhole(cur)
		case depthUnknown: // a whole object, or a delta to resolve
			cs[cur].depth = 0
		}
		for k := len(path) - 1; k >= 0; k-- {
			p := path[k]
			if cs[p].depth >= 0 {
				continue // cur, cut above
			}
			if d := cs[cs[p].base].depth + 1; int(d) <= maxDepth {
				cs[p].depth = d
			} else {
				toWhole(p)
			}
		}
	}
}

// writeRepackEntry writes cs[i]: a stored whole object or delta copied
// (the delta re-pointed at its base's new offset), or a delta resolved
// and deflated when its base is not written.
func (ew *entryWriter) writeRepackEntry(cs []rcopy, i int32) error {
	c := &cs[i]
	p := ew.set.packs[c.it.pack]
	c.it.out = ew.pw.n
	end, err := p.entryEnd(c.it.off)
	if err != nil {
		return err
	}
	switch {
	case c.h.typ < object.OfsDelta:
		ew.st.Reused++
		return ew.copyEntry(p, &c.it, c.h, end, appendEntryHeader(nil, c.h.typ, c.h.size))
	case c.base >= 0:
		hdr := appendEntryHeader(nil, object.OfsDelta, c.h.size)
		hdr = appendOfsDelta(hdr, c.it.out-cs[c.base].it.out)
		ew.st.ReusedDeltas++
		return ew.copyEntry(p, &c.it, c.h, end, hdr)
	}
	return ew.deflateWhole(p, &c.it)
}
