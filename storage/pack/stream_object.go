package pack

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/rgit/rgit/storage/object"
)

// OpenObject returns id's type and size and a reader of its content. An
// object stored whole in a pack streams from the pack file, inflated as it
// is read, so memory stays flat however large it is; a delta is rebuilt in
// memory first, as ReadObject does. The reader fails with a corruption
// error if the content is not exactly size bytes. Close it when done.
func (s *Set) OpenObject(id object.ID) (object.Type, int64, io.ReadCloser, error) {
	pi, _, ok := s.find(id)
	if !ok {
		return object.Invalid, 0, nil, fmt.Errorf("%s: %w", id, object.ErrNotFound)
	}
	return s.packs[pi].OpenObject(id)
}

// OpenObject is Set.OpenObject for one pack.
func (p *Pack) OpenObject(id object.ID) (object.Type, int64, io.ReadCloser, error) {
	off, ok := p.idx.Lookup(id)
	if !ok {
		return object.Invalid, 0, nil, fmt.Errorf("%s: %w", id, object.ErrNotFound)
	}
	h, err := p.entryHeader(off)
	if err != nil {
		return object.Invalid, 0, nil, fmt.Errorf("read %s from %s: %w", id, p.name, err)
	}
	if h.typ == object.OfsDelta || h.typ == object.RefDelta {
		t, data, err := p.ReadObject(id)
		if err != nil {
			return object.Invalid, 0, nil, err
		}
		return t, int64(len(data)), io.NopCloser(bytes.NewReader(data)), nil
	}
	end, err := p.entryEnd(off)
	if err != nil {
		return object.Invalid, 0, nil, fmt.Errorf("read %s from %s: %w", id, p.name, err)
	}
	start := off + int64(h.hdrLen)
	if end < start || h.size > (end-start)*maxDeflateRatio+64 {
		return object.Invalid, 0, nil, corruptf("object at offset %d: bad entry bounds or size", off)
	}
	z, err := getZlib(bufioReader(io.NewSectionReader(p.f, start, end-start)))
	if err != nil {
		return object.Invalid, 0, nil, corruptf("object at offset %d: bad zlib header: %v", off, err)
	}
	return h.typ, h.size, &objectStream{z: z, left: h.size, off: off}, nil
}

// objectStream reads one whole object's inflated content, checking that
// it is exactly the declared size.
type objectStream struct {
	z    io.ReadCloser
	left int64 // bytes still due
	off  int64
	done bool
}

func (s *objectStream) Read(b []byte) (int, error) {
	if s.done || s.z == nil {
		return 0, io.EOF
	}
	if s.left == 0 {
		// Nothing more is due: the stream must end here.
		var one [1]byte
		if n, _ := s.z.Read(one[:]); n > 0 {
			return 0, corruptf("object at offset %d: inflated size exceeds the declared size", s.off)
		}
		s.done = true
		return 0, io.EOF
	}
	n, err := s.z.Read(b[:min(int64(len(b)), s.left)])
	s.left -= int64(n)
	switch {
	case errors.Is(err, io.EOF) && s.left > 0:
		return n, corruptf("object at offset %d: inflated %d bytes short of the declared size", s.off, s.left)
	case errors.Is(err, io.EOF):
		s.done = true
		return n, nil
	case err != nil:
		return n, corruptf("object at offset %d: inflate: %v", s.off, err)
	}
	return n, nil
}

func (s *objectStream) Close() error {
	if s.z != nil {
		putZlib(s.z)
		s.z = nil
	}
	return nil
}
