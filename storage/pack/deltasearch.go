package pack

// Fresh delta search for full repacks (git repack -f): instead of copying
// the deltas the packs happen to store (one per push, against whatever
// the client chose), every object is compared with the previous few
// objects of its type in git's order (type, path name hash, size
// descending), and the smallest delta found is written.

import (
	"cmp"
	"compress/zlib"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"unicode"

	"github.com/rgit/rgit/storage/object"
)

// Delta search defaults (git's pack.window, pack.windowMemory is unbounded
// in git; rgit bounds it so a repack's memory does not grow with the
// objects' sizes).
const (
	DefaultDeltaWindow       = 10
	DefaultDeltaWindowMemory = 64 << 20
	// DefaultDeltaMaxObject: larger objects are written whole and never
	// held in the window (git's core.bigFileThreshold is 512 MiB; a
	// server repacking in the background keeps it lower).
	DefaultDeltaMaxObject = 16 << 20
)

// DeltaSearchOptions configure Set.WriteRepackDeltas.
type DeltaSearchOptions struct {
	Window       int   // candidate bases per object (0: DefaultDeltaWindow)
	MaxDepth     int   // longest delta chain (0: DefaultRepackDepth)
	WindowMemory int64 // bytes of inflated objects the window holds (0: DefaultDeltaWindowMemory)
	MaxObject    int64 // objects larger are not searched (0: DefaultDeltaMaxObject)
	// NameHash gives an object's path hash (NameHash of a path it is
	// reachable under) so versions of one file sort together; nil or 0:
	// unknown, ordered by size alone.
	NameHash func(object.ID) uint32
	Progress ProgressFunc
}

// NameHash is git's pack_name_hash: the last characters of a path weigh
// most, so files with the same name (or extension) in any directory sort
// next to each other.
func NameHash(path string) uint32 {
	var h uint32
	for _, c := range []byte(path) {
		if unicode.IsSpace(rune(c)) {
			continue
		}
		h = h>>2 + uint32(c)<<24
	}
	return h
}

// dentry is one object of a delta search, in search order.
type dentry struct {
	id    object.ID
	typ   object.Type
	size  int64
	name  uint32
	order int // first position in the caller's list
	it    witem
}

// dcand is an object in the search window: a possible delta base.
type dcand struct {
	data  []byte
	index *deltaIndex // built the first time the candidate is tried
	out   int64       // its offset in the output pack
	depth int
}

// WriteRepackDeltas writes a pack holding exactly objs like WriteRepack,
// but with deltas searched afresh rather than copied: objects are taken in
// (type, name hash, size descending, place in objs) order, so objs should
// list them by recency, as a walk does; each is compared with the
// previous opts.Window objects of its type, and written as a delta
// against the one giving the smallest delta, or whole. Bases always
// precede their deltas (OFS_DELTA), chains are at most opts.MaxDepth long,
// and memory holds the window (opts.WindowMemory), not the pack. Whole
// objects stored whole are copied without recompression. Every object is
// inflated and checked against its id, so the result carries no stored
// corruption. The time it takes grows with the objects' total size; bound
// it with ctx.
func (s *Set) WriteRepackDeltas(ctx context.Context, w io.Writer, objs []object.ID, opts DeltaSearchOptions) (WriteStats, error) {
	var st WriteStats
	window := cmp.Or(opts.Window, DefaultDeltaWindow)
	maxDepth := cmp.Or(opts.MaxDepth, DefaultRepackDepth)
	winMem := cmp.Or(opts.WindowMemory, DefaultDeltaWindowMemory)
	maxObj := cmp.Or(opts.MaxObject, DefaultDeltaMaxObject)
	ents, err := s.deltaEntries(ctx, objs, opts.NameHash)
	if err != nil {
		return st, fmt.Errorf("write repack: %w", err)
	}
	st.Objects = len(ents)
	pw := newPackWriter(w)
	pw.header(len(ents))
	ew := &entryWriter{set: s, pw: pw, st: &st, buf: make([]byte, 64<<10)}
	var win []*dcand // oldest first
	var held int64
	for n := range ents {
		e := &ents[n]
		if n%64 == 0 {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			if opts.Progress != nil {
				opts.Progress("compressing objects", uint64(n), uint64(len(ents)))
			}
		}
		if n > 0 && ents[n-1].typ != e.typ {
			clear(win)
			win, held = win[:0], 0 // no delta across types
		}
		p := s.packs[e.it.pack]
		out := pw.n
		if e.size > maxObj {
			if err := ew.writeStoredWhole(p, &e.it, e.id); err != nil {
				return st, fmt.Errorf("write repack: %s: %w", e.id, err)
			}
			continue
		}
		t, data, err := p.readAt(e.it.off)
		if err != nil {
			return st, fmt.Errorf("write repack: %s: %w", e.id, err)
		}
		if object.Hash(t, data) != e.id {
			return st, kindf(ErrChecksum, "write repack: %s: object at offset %d of %s hashes differently", e.id, e.it.off, p.name)
		}
		base, delta := bestDelta(win, data, maxDepth)
		depth := 0
		switch {
		case base != nil:
			depth = base.depth + 1
			h := appendEntryHeader(nil, object.OfsDelta, int64(len(delta)))
			h = appendOfsDelta(h, out-base.out)
			if err := ew.deflate(h, delta); err != nil {
				return st, fmt.Errorf("write repack: %s: %w", e.id, err)
			}
			st.Deflated++
		default:
			if err := ew.writeWhole(p, &e.it, t, data); err != nil {
				return st, fmt.Errorf("write repack: %s: %w", e.id, err)
			}
		}
		if pw.err != nil {
			return st, fmt.Errorf("write repack: %w", pw.err)
		}
		if depth >= maxDepth {
			continue // useless as a base
		}
		win = append(win, &dcand{data: data, out: out, depth: depth})
		held += int64(len(data))
		for len(win) > window || held > winMem && len(win) > 0 {
			held -= int64(len(win[0].data))
			win[0] = nil
			win = win[1:]
		}
	}
	if err := pw.finish(&st, opts.Progress, "compressing objects"); err != nil {
		return st, fmt.Errorf("write repack: %w", err)
	}
	return st, nil
}

// deltaEntries locates objs (deduplicated) and returns them in search
// order: by type, name hash, size descending (so deltas mostly remove
// data, which makes them small), then in the order of objs, as git keeps
// rev-list's: objects of neighbouring commits, which differ least, stay
// neighbours when the rest ties (the root trees of a history, say).
func (s *Set) deltaEntries(ctx context.Context, objs []object.ID, nameHash func(object.ID) uint32) ([]dentry, error) {
	type idAt struct {
		id  object.ID
		pos int
	}
	ids := make([]idAt, len(objs))
	for i, id := range objs {
		ids[i] = idAt{id, i}
	}
	slices.SortStableFunc(ids, func(a, b idAt) int { return cmpIDs(a.id, b.id) })
	ids = slices.CompactFunc(ids, func(a, b idAt) bool { return a.id == b.id })
	ents := make([]dentry, len(ids))
	for i, x := range ids {
		id := x.id
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		pi, pos, ok := s.find(id)
		if !ok {
			return nil, fmt.Errorf("%s: %w", id, object.ErrNotFound)
		}
		p := s.packs[pi]
		off := p.idx.Offset(pos)
		t, size, err := p.readHeaderAt(off)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		e := dentry{id: id, typ: t, size: size, order: x.pos, it: witem{pack: int32(pi), pos: int32(pos), off: off}}
		if nameHash != nil {
			e.name = nameHash(id)
		}
		ents[i] = e
	}
	slices.SortFunc(ents, func(a, b dentry) int {
		return cmp.Or(cmp.Compare(a.typ, b.typ), cmp.Compare(a.name, b.name),
			cmp.Compare(b.size, a.size), cmp.Compare(a.order, b.order))
	})
	return ents, nil
}

func cmpIDs(a, b object.ID) int {
	for i := range a {
		if c := cmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// bestDelta tries data against every candidate of the window, newest
// first, and returns the one giving the smallest delta (nil: none is
// worth it). As in git, a delta must save at least half the object, and
// a base deeper in its chain must save proportionally more, so chains
// stay short where it costs little.
func bestDelta(win []*dcand, data []byte, maxDepth int) (*dcand, []byte) {
	var best *dcand
	var bestD []byte
	for i := len(win) - 1; i >= 0; i-- {
		c := win[i]
		if c.depth >= maxDepth || len(c.data) < len(data)/32 {
			continue
		}
		limit := len(data)/2 - 20
		if c.depth > 0 {
			limit = limit * (maxDepth - c.depth) / maxDepth
		}
		if bestD != nil {
			limit = min(limit, len(bestD)-1)
		}
		if limit <= 0 {
			continue
		}
		if c.index == nil {
			c.index = newDeltaIndex(c.data)
		}
		if d := c.index.encode(data, limit); d != nil {
			best, bestD = c, d
		}
	}
	return best, bestD
}

// writeStoredWhole writes an object too large for the search: its stored
// bytes when stored whole, else resolved and deflated.
func (ew *entryWriter) writeStoredWhole(p *Pack, it *witem, id object.ID) error {
	h, err := p.entryHeader(it.off)
	if err != nil {
		return err
	}
	if h.typ >= object.OfsDelta {
		return ew.deflateWhole(p, it)
	}
	end, err := p.entryEnd(it.off)
	if err != nil {
		return err
	}
	ew.st.Reused++
	return ew.copyEntry(p, it, h, end, appendEntryHeader(nil, h.typ, h.size))
}

// writeWhole writes data (the object at it, typ t) whole: its stored
// bytes when stored whole (no recompression), else deflated.
func (ew *entryWriter) writeWhole(p *Pack, it *witem, t object.Type, data []byte) error {
	h, err := p.entryHeader(it.off)
	if err != nil {
		return err
	}
	if h.typ < object.OfsDelta {
		end, err := p.entryEnd(it.off)
		if err != nil {
			return err
		}
		ew.st.Reused++
		return ew.copyEntry(p, it, h, end, appendEntryHeader(nil, h.typ, h.size))
	}
	ew.st.Deflated++
	return ew.deflate(appendEntryHeader(nil, t, int64(len(data))), data)
}

// deflate writes an entry header and data compressed.
func (ew *entryWriter) deflate(hdr, data []byte) error {
	ew.pw.Write(hdr)
	if ew.zw == nil {
		ew.zw = zlib.NewWriter(ew.pw)
	} else {
		ew.zw.Reset(ew.pw)
	}
	if _, err := ew.zw.Write(data); err != nil {
		return err
	}
	return ew.zw.Close()
}

// Delta encoding (git's diff-delta, simplified): the base is indexed by
// the hash of every deltaBlock-byte block at block-aligned offsets; the
// target is scanned with a rolling hash of the same width, and each hit
// is verified and extended both ways into a copy instruction. Bytes no
// copy covers become insert instructions.

const (
	deltaBlock    = 16
	deltaMaxCopy  = 0x10000 // per copy instruction (git's limit, size bytes then omitted)
	deltaMaxChain = 64      // candidates tried per hash bucket
	rollPrime     = 0x01000193
)

// rollPow is rollPrime^(deltaBlock-1), the weight of a block's first byte.
var rollPow = func() uint32 {
	p := uint32(1)
	for range deltaBlock - 1 {
		p *= rollPrime
	}
	return p
}()

func blockHash(b []byte) uint32 {
	var h uint32
	for _, c := range b[:deltaBlock] {
		h = h*rollPrime + uint32(c)
	}
	return h
}

// deltaIndex indexes a base for encode.
type deltaIndex struct {
	src   []byte
	shift uint
	head  []int32 // per bucket: 1 + the first block in it, 0: empty
	next  []int32 // per block: 1 + the next block in its bucket, 0: end
}

func newDeltaIndex(src []byte) *deltaIndex {
	nb := len(src) / deltaBlock
	bitsN := max(bits.Len(uint(nb)), 4)
	x := &deltaIndex{src: src, shift: uint(32 - bitsN), head: make([]int32, 1<<bitsN), next: make([]int32, nb)}
	// Inserting from the end makes every bucket list ascend by offset.
	for k := nb - 1; k >= 0; k-- {
		b := x.bucket(blockHash(src[k*deltaBlock:]))
		x.next[k] = x.head[b]
		x.head[b] = int32(k + 1)
	}
	return x
}

func (x *deltaIndex) bucket(h uint32) uint32 { return (h * 0x9e3779b1) >> x.shift }

// matchLen is the length of the common prefix of a and b.
func matchLen(a, b []byte) int {
	n := 0
	for len(a) >= 8 && len(b) >= 8 {
		if d := binary.LittleEndian.Uint64(a) ^ binary.LittleEndian.Uint64(b); d != 0 {
			return n + bits.TrailingZeros64(d)/8
		}
		a, b, n = a[8:], b[8:], n+8
	}
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b, n = a[1:], b[1:], n+1
	}
	return n
}

// encode returns a delta that turns the base into trg, or nil if it would
// be longer than limit bytes.
func (x *deltaIndex) encode(trg []byte, limit int) []byte {
	src := x.src
	out := make([]byte, 0, min(limit, len(trg)/4+64))
	out = binary.AppendUvarint(out, uint64(len(src)))
	out = binary.AppendUvarint(out, uint64(len(trg)))
	lit := 0 // start of the pending insert bytes
	flush := func(end int) {
		for lit < end {
			n := min(end-lit, 0x7f)
			out = append(out, byte(n))
			out = append(out, trg[lit:lit+n]...)
			lit += n
		}
	}
	i := 0
	var h uint32
	if len(trg) >= deltaBlock && len(src) >= deltaBlock {
		h = blockHash(trg)
	} else {
		i = len(trg) // nothing to match
	}
	for i+deltaBlock <= len(trg) {
		bestOff, bestLen := 0, 0
		tries := 0
		for c := x.head[x.bucket(h)]; c != 0 && tries < deltaMaxChain; c = x.next[c-1] {
			tries++
			off := int(c-1) * deltaBlock
			if n := matchLen(src[off:], trg[i:]); n > bestLen {
				bestOff, bestLen = off, n
			}
		}
		if bestLen < deltaBlock {
			if i+deltaBlock < len(trg) {
				h = (h-uint32(trg[i])*rollPow)*rollPrime + uint32(trg[i+deltaBlock])
			}
			i++
			if len(out)+i-lit > limit {
				return nil
			}
			continue
		}
		// Take back pending insert bytes the base also has just before.
		for bestOff > 0 && i > lit && src[bestOff-1] == trg[i-1] {
			bestOff, i, bestLen = bestOff-1, i-1, bestLen+1
		}
		flush(i)
		for bestLen > 0 {
			n := min(bestLen, deltaMaxCopy)
			out = appendCopy(out, bestOff, n)
			bestOff, i, bestLen = bestOff+n, i+n, bestLen-n
		}
		lit = i
		if len(out) > limit {
			return nil
		}
		if i+deltaBlock <= len(trg) {
			h = blockHash(trg[i:])
		}
	}
	if len(out)+len(trg)-lit+(len(trg)-lit)/0x7f+1 > limit {
		return nil
	}
	flush(len(trg))
	return out
}

// appendCopy appends a copy instruction (size < 1<<24).
func appendCopy(out []byte, off, size int) []byte {
	at := len(out)
	cmd := byte(0x80)
	out = append(out, 0)
	for b := range 4 {
		if v := byte(off >> (8 * b)); v != 0 {
			cmd |= 1 << b
			out = append(out, v)
		}
	}
	if size != deltaMaxCopy { // a size of 0 means 0x10000
		for b := range 3 {
			if v := byte(size >> (8 * b)); v != 0 {
				cmd |= 1 << (4 + b)
				out = append(out, v)
			}
		}
	}
	out[at] = cmd
	return out
}
