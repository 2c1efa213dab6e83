package bitmap

import (
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
)

// A Stack is what queries run on: packs in a fixed order whose objects
// take consecutive bit positions (the first pack's from 0, the next's
// after them), and for some of them a bitmap Index layered over the packs
// before it. One pack with its own bitmap is the smallest stack. A roll-up
// of a repository's newest packs gets a layer over the older ones: the
// older layers' masks keep their meaning as long as the packs below them
// stay, so after a roll-up only the new layer is built, and a fetch walks
// only the objects of packs outside the stack (those pushed since).
//
// A Stack is read-only and safe for concurrent use.
type Stack struct {
	packs  []*pack.Pack
	offs   []int    // first position of packs[i]
	layers []*Index // bitmap of packs[i] over packs[:i], or nil
	span   int
	// set finds positions: the first pack in stack order holding an
	// object, as the builder numbered it, in one search once its
	// multi-index is built (a stack kept across queries builds it once).
	set *pack.Set

	typesOnce sync.Once
	typeMasks [numTypes]bitset // the layers' type masks, merged (types)
	typesErr  error
}

// NewStack stacks packs in order with their bitmaps: xs[i] belongs to
// packs[i] or is nil. A bitmap whose pack or bases do not match the stack
// is left out; nil if no bitmap remains.
func NewStack(packs []*pack.Pack, xs []*Index) *Stack {
	s := stackOf(packs, xs)
	for _, x := range s.layers {
		if x != nil {
			return s
		}
	}
	return nil
}

// stackOf is NewStack, also when no bitmap remains.
func stackOf(packs []*pack.Pack, xs []*Index) *Stack { return stackOver(pack.NewSet(packs...), xs) }

// stackOver stacks set's packs in its order, finding positions through
// set (and so through its multi-index once built); xs[i] belongs to the
// i-th pack or is nil.
func stackOver(set *pack.Set, xs []*Index) *Stack {
	packs := set.Packs()
	s := &Stack{packs: packs, offs: make([]int, len(packs)), layers: make([]*Index, len(packs)), set: set}
	for i, p := range packs {
		s.offs[i] = s.span
		s.span += p.Index().Count()
		if x := xs[i]; x != nil && x.fits(packs[:i], p) {
			s.layers[i] = x
		}
	}
	return s
}

// Single is the stack of one pack with its bitmap.
func Single(x *Index) *Stack { return NewStack([]*pack.Pack{x.p}, []*Index{x}) }

// fits reports whether x is the bitmap of p layered over exactly below.
func (x *Index) fits(below []*pack.Pack, p *pack.Pack) bool {
	if refOf(x.p) != refOf(p) || len(x.bases) != len(below) {
		return false
	}
	for i, b := range below {
		if x.bases[i] != refOf(b) {
			return false
		}
	}
	return true
}

// Choose picks the stack that covers the most of a repository's packs:
// xs[i] is the bitmap of packs[i] or nil, and a bitmap qualifies when
// every pack it is layered over is among packs. The stack is that
// bitmap's bases and pack, with whichever of their own bitmaps fit. nil if
// no bitmap qualifies.
func Choose(packs []*pack.Pack, xs []*Index) *Stack {
	byRef := make(map[packRef]int, len(packs))
	for i, p := range packs {
		byRef[refOf(p)] = i
	}
	top := -1
	var chain []int
	for i, x := range xs {
		if x == nil || (top >= 0 && x.span <= xs[top].span) {
			continue
		}
		c := make([]int, 0, len(x.bases)+1)
		for _, b := range x.bases {
			j, ok := byRef[b]
			if !ok {
				break
			}
			c = append(c, j)
		}
		if len(c) == len(x.bases) {
			top, chain = i, append(c, i)
		}
	}
	if top < 0 {
		return nil
	}
	ps, ls := make([]*pack.Pack, len(chain)), make([]*Index, len(chain))
	for k, j := range chain {
		ps[k], ls[k] = packs[j], xs[j]
	}
	return NewStack(ps, ls)
}

// Pack returns the top pack: the one whose bitmap spans the whole stack.
func (s *Stack) Pack() *pack.Pack { return s.packs[len(s.packs)-1] }

// Packs returns the stacked packs, bottom first.
func (s *Stack) Packs() []*pack.Pack { return append([]*pack.Pack(nil), s.packs...) }

// Layers returns the bitmaps of Packs() (nil where a pack has none that
// fits).
func (s *Stack) Layers() []*Index { return append([]*Index(nil), s.layers...) }

// HasBitmap reports whether the stack holds a bitmap for the pack named
// name.
func (s *Stack) HasBitmap(name string) bool {
	for i, p := range s.packs {
		if p.Name() == name {
			return s.layers[i] != nil
		}
	}
	return false
}

// find returns id's position in the stack.
func (s *Stack) find(id object.ID) (int, bool) {
	i, j, ok := s.set.Find(id)
	if !ok {
		return 0, false
	}
	return s.offs[i] + j, true
}

// Same reports whether o stacks the same packs with the same bitmaps, so
// a caller may keep using s (and the multi-index its lookups built).
func (s *Stack) Same(o *Stack) bool {
	return s != nil && o != nil && slices.Equal(s.packs, o.packs) && slices.Equal(s.layers, o.layers)
}

// id returns the object at position pos < s.span.
func (s *Stack) id(pos int) object.ID {
	i := sort.Search(len(s.offs), func(i int) bool { return s.offs[i] > pos }) - 1
	return s.packs[i].Index().ID(pos - s.offs[i])
}

// stored returns the decoded mask of id from the highest layer that has
// one.
func (s *Stack) stored(id object.ID) (bitset, bool, error) {
	for i := len(s.layers) - 1; i >= 0; i-- {
		if x := s.layers[i]; x != nil {
			if b, ok, err := x.stored(id); ok || err != nil {
				return b, ok, err
			}
		}
	}
	return nil, false, nil
}

// hasMask reports whether some layer stores a mask for id.
func (s *Stack) hasMask(id object.ID) bool {
	for _, x := range s.layers {
		if x != nil {
			if _, ok := x.entries[id]; ok {
				return true
			}
		}
	}
	return false
}

// types returns a copy of the type masks of all layers, merged: each
// layer's cover what its masks reach. They are decoded once per stack;
// the caller may add to its copy.
func (s *Stack) types() ([numTypes]bitset, error) {
	s.typesOnce.Do(func() {
		for _, x := range s.layers {
			if x == nil {
				continue
			}
			for t, m := range x.types {
				b, err := x.decodeMask(m)
				if err != nil {
					s.typesErr = fmt.Errorf("type mask %d of %s: %w", t, x.p.Name(), err)
					return
				}
				s.typeMasks[t].or(b)
			}
		}
	})
	var out [numTypes]bitset
	for t, b := range s.typeMasks {
		out[t] = slices.Clone(b)
	}
	return out, s.typesErr
}
