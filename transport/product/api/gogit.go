package api

import (
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v6/plumbing"
	"github.com/go-git/go-git/v6/plumbing/storer"

	"github.com/rgit/rgit/storage/object"
)

// Objects is the repository's object store as the read API needs it;
// *pack.Set (a snapshot's objects) implements it.
type Objects interface {
	ReadObject(id object.ID) (object.Type, []byte, error)
	ReadHeader(id object.ID) (object.Type, int64, error)
	// OpenObject streams an object's content (raw answers of any size).
	OpenObject(id object.ID) (object.Type, int64, io.ReadCloser, error)
	Has(id object.ID) bool
}

// goStore is go-git's object storer over rgit's packs, read-only: go-git's
// tree diff and patch code runs on the objects rgit already holds, with no
// second copy of the repository.
type goStore struct{ objs Objects }

var _ storer.EncodedObjectStorer = goStore{}

var errReadOnly = errors.New("read API object store is read-only")

func toGo(id object.ID) plumbing.Hash {
	h, _ := plumbing.FromBytes(id[:])
	return h
}

func fromGo(h plumbing.Hash) (object.ID, bool) {
	var id object.ID
	b := h.Bytes()
	if len(b) != len(id) {
		return id, false
	}
	copy(id[:], b)
	return id, true
}

func (s goStore) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	id, ok := fromGo(h)
	if !ok {
		return nil, plumbing.ErrObjectNotFound
	}
	typ, data, err := s.objs.ReadObject(id)
	if errors.Is(err, object.ErrNotFound) {
		return nil, plumbing.ErrObjectNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", id, err)
	}
	gt := plumbing.ObjectType(typ) // the numbering is git's in both
	if t != plumbing.AnyObject && t != gt {
		return nil, plumbing.ErrObjectNotFound
	}
	o := &plumbing.MemoryObject{}
	o.SetType(gt)
	o.SetSize(int64(len(data)))
	if _, err := o.Write(data); err != nil {
		return nil, err
	}
	return o, nil
}

func (s goStore) HasEncodedObject(h plumbing.Hash) error {
	if id, ok := fromGo(h); ok && s.objs.Has(id) {
		return nil
	}
	return plumbing.ErrObjectNotFound
}

func (s goStore) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	id, ok := fromGo(h)
	if !ok {
		return 0, plumbing.ErrObjectNotFound
	}
	_, size, err := s.objs.ReadHeader(id)
	if errors.Is(err, object.ErrNotFound) {
		return 0, plumbing.ErrObjectNotFound
	}
	return size, err
}

func (goStore) NewEncodedObject() plumbing.EncodedObject { return &plumbing.MemoryObject{} }

func (goStore) SetEncodedObject(plumbing.EncodedObject) (plumbing.Hash, error) {
	return plumbing.ZeroHash, errReadOnly
}

func (goStore) RawObjectWriter(plumbing.ObjectType, int64) (io.WriteCloser, error) {
	return nil, errReadOnly
}

func (goStore) IterEncodedObjects(plumbing.ObjectType) (storer.EncodedObjectIter, error) {
	return nil, errReadOnly
}

func (goStore) AddAlternate(string) error { return errReadOnly }
