package walk

import (
	"encoding/binary"

	"github.com/rgit/rgit/storage/object"
)

// idSet is an open-addressing hash set of object ids. Ids are SHA-1 output,
// so their leading bytes are already uniformly distributed and serve as the
// hash. It stores ids inline (20 bytes a slot, no per-entry allocation),
// which is several times more compact than map[object.ID]struct{}.
//
// The zero id marks an empty slot; it is tracked separately so that it can
// still be a member. The zero value is an empty set ready to use.
type idSet struct {
	slots   []object.ID
	n       int
	hasZero bool
}

func newIDSet(hint int) *idSet {
	s := &idSet{}
	if hint > 0 {
		s.resize(hint)
	}
	return s
}

// resize rehashes into a table that can hold want entries at <= 1/2 load.
func (s *idSet) resize(want int) {
	size := 16
	for size < 2*want {
		size <<= 1
	}
	old := s.slots
	s.slots = make([]object.ID, size)
	mask := uint64(size - 1)
	for i := range old {
		if old[i].IsZero() {
			continue
		}
		j := binary.LittleEndian.Uint64(old[i][:8]) & mask
		for !s.slots[j].IsZero() {
			j = (j + 1) & mask
		}
		s.slots[j] = old[i]
	}
}

// Len returns the number of members.
func (s *idSet) Len() int {
	if s.hasZero {
		return s.n + 1
	}
	return s.n
}

// Has reports whether id is a member.
func (s *idSet) Has(id object.ID) bool {
	if id.IsZero() {
		return s.hasZero
	}
	if len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	j := binary.LittleEndian.Uint64(id[:8]) & mask
	for {
		if s.slots[j] == id {
			return true
		}
		if s.slots[j].IsZero() {
			return false
		}
		j = (j + 1) & mask
	}
}

// Add inserts id and reports whether it was newly added.
func (s *idSet) Add(id object.ID) bool {
	if id.IsZero() {
		added := !s.hasZero
		s.hasZero = true
		return added
	}
	if 2*(s.n+1) > len(s.slots) {
		s.resize(s.n + 1)
	}
	mask := uint64(len(s.slots) - 1)
	j := binary.LittleEndian.Uint64(id[:8]) & mask
	for {
		if s.slots[j] == id {
			return false
		}
		if s.slots[j].IsZero() {
			s.slots[j] = id
			s.n++
			return true
		}
		j = (j + 1) & mask
	}
}
