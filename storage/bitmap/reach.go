package bitmap

import (
	"context"
	"fmt"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
)

// Reach is the set of objects reachable from a list of tips (a
// repository's refs): what git would send a fetch, and so all a reader may
// be shown. It is read-only and safe for concurrent use.
type Reach struct {
	s   *Stack
	ext map[object.ID]int // positions of reached objects outside s
	b   bitset
}

// Reachable computes everything reachable from tips, which may be of any
// type (tags are followed, as a fetch's are). The commits s stores masks
// for are answered from them; the rest, the objects of packs outside s,
// is walked from the tips down to the nearest masked commits, skipping
// subtrees already reached. s nil means no bitmap: the whole history is
// walked once, with positions taken from objs, the repository's objects
// (so no object needs a table entry of its own). g reads the repository's
// objects. A missing object is an error.
func Reachable(ctx context.Context, s *Stack, objs *pack.Set, g *walk.Graph, tips []object.ID) (*Reach, error) {
	if s == nil {
		s = stackOver(objs, make([]*Index, len(objs.Packs())))
	}
	q, err := newQuery(ctx, s, g)
	if err != nil {
		return nil, err
	}
	b := newBitset(s.span)
	if err := q.fill(&b, tips); err != nil {
		return nil, fmt.Errorf("reachable from %d tips: %w", len(tips), err)
	}
	return &Reach{s: s, ext: q.ext, b: b}, nil
}

// Has reports whether id is reachable.
func (r *Reach) Has(id object.ID) bool {
	if i, ok := r.s.find(id); ok {
		return r.b.has(i)
	}
	i, ok := r.ext[id]
	return ok && r.b.has(i)
}

// HoldsAll reports whether every object of p is reachable: whether a
// client that may fetch the reached objects may be handed p whole. For a
// pack of the stack it reads p's run of positions, and looks up only the
// objects whose position is another pack's (those p shares with a pack
// below it); for any other pack it looks up every object.
func (r *Reach) HoldsAll(p *pack.Pack) bool {
	x := p.Index()
	start := -1
	for i, q := range r.s.packs {
		if q == p {
			start = r.s.offs[i]
			break
		}
	}
	for j := range x.Count() {
		if start >= 0 && r.b.has(start+j) {
			continue
		}
		if !r.Has(x.ID(j)) {
			return false
		}
	}
	return true
}
