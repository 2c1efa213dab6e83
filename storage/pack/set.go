package pack

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rgit/rgit/storage/object"
)

// Set is a read-only view over several packs: a repository's objects.
// An object in several packs is read from the first, in the order given.
// Once it has done enough lookups a Set merges its packs' indexes into a
// multi-index (see multiIndex), so each lookup is one binary search.
// Safe for concurrent use.
type Set struct {
	packs []*Pack
	id    uint64

	lookups   atomic.Int64
	multiAt   int64 // lookups before the multi-index is built
	multiOnce sync.Once
	multi     atomic.Pointer[multiIndex]
}

// NewSet returns a Set over packs. The Set does not own them: closing
// remains the caller's job.
func NewSet(packs ...*Pack) *Set {
	s := &Set{packs: append([]*Pack(nil), packs...), id: setIDs.Add(1)}
	objects := 0
	for _, p := range s.packs {
		objects += p.idx.Count()
	}
	s.multiAt = multiIndexAfter(objects)
	return s
}

// setIDs numbers the Sets of the process.
var setIDs atomic.Uint64

// ID is a number no other Set of the process has: a key for what is
// learnt from its objects that holds no reference to it.
func (s *Set) ID() uint64 { return s.id }

// Packs returns the packs of the set.
func (s *Set) Packs() []*Pack { return append([]*Pack(nil), s.packs...) }

// find returns the pack and index position holding id.
func (s *Set) find(id object.ID) (int, int, bool) {
	if len(s.packs) == 1 {
		i, ok := s.packs[0].idx.Find(id)
		return 0, i, ok
	}
	if mi := s.multi.Load(); mi != nil {
		return mi.find(s.packs, id)
	}
	if len(s.packs) > 1 && s.lookups.Add(1) > s.multiAt {
		s.multiOnce.Do(func() { s.multi.Store(buildMultiIndex(s.packs)) })
		return s.multi.Load().find(s.packs, id)
	}
	return s.findEach(id)
}

// Find returns the index in Packs of the pack serving id (the first
// holding it) and id's position in that pack's index: one binary search
// once the multi-index is built.
func (s *Set) Find(id object.ID) (pack, pos int, ok bool) { return s.find(id) }

// findEach is find without the multi-index: one search per pack.
func (s *Set) findEach(id object.ID) (int, int, bool) {
	for pi, p := range s.packs {
		if i, ok := p.idx.Find(id); ok {
			return pi, i, true
		}
	}
	return 0, 0, false
}

// Has reports whether any pack holds id.
func (s *Set) Has(id object.ID) bool {
	_, _, ok := s.find(id)
	return ok
}

// ReadObject implements object.Reader.
func (s *Set) ReadObject(id object.ID) (object.Type, []byte, error) {
	pi, _, ok := s.find(id)
	if !ok {
		return object.Invalid, nil, fmt.Errorf("%s: %w", id, object.ErrNotFound)
	}
	return s.packs[pi].ReadObject(id)
}

// ReadShared is Pack.ReadShared on the pack holding id: the returned
// slice is shared and must not be modified.
func (s *Set) ReadShared(id object.ID) (object.Type, []byte, error) {
	pi, _, ok := s.find(id)
	if !ok {
		return object.Invalid, nil, fmt.Errorf("%s: %w", id, object.ErrNotFound)
	}
	return s.packs[pi].ReadShared(id)
}

// ReadHeader returns the type and size of id.
func (s *Set) ReadHeader(id object.ID) (object.Type, int64, error) {
	pi, _, ok := s.find(id)
	if !ok {
		return object.Invalid, 0, fmt.Errorf("%s: %w", id, object.ErrNotFound)
	}
	return s.packs[pi].ReadHeader(id)
}

var _ object.Reader = (*Set)(nil)
