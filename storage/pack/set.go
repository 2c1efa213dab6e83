package pack

import (
	"fmt"

	"github.com/rgit/rgit/storage/object"
)

// Set is a read-only view over several packs: a repository's objects.
// Lookups try packs in the order given. Safe for concurrent use.
type Set struct {
	packs []*Pack
}

// NewSet returns a Set over packs. The Set does not own them: closing
// remains the caller's job.
func NewSet(packs ...*Pack) *Set {
	return &Set{packs: append([]*Pack(nil), packs...)}
}

// Packs returns the packs of the set.
func (s *Set) Packs() []*Pack { return append([]*Pack(nil), s.packs...) }

// find returns the pack and index position holding id.
func (s *Set) find(id object.ID) (int, int, bool) {
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

// ReadHeader returns the type and size of id.
func (s *Set) ReadHeader(id object.ID) (object.Type, int64, error) {
	pi, _, ok := s.find(id)
	if !ok {
		return object.Invalid, 0, fmt.Errorf("%s: %w", id, object.ErrNotFound)
	}
	return s.packs[pi].ReadHeader(id)
}

var _ object.Reader = (*Set)(nil)
