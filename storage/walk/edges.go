package walk

import (
	"sync"

	"github.com/rgit/rgit/storage/object"
)

// Edges collects the references of a push's new commits, trees and tags
// while the pack is indexed (the indexer hands each one over anyway, for
// fsck), so that Closed can decide connectivity without reading any of them
// back from the pack: on a history of 20,000 objects that reading was a
// fifth of the push. Memory is one entry per distinct referenced object.
// It is safe for concurrent use.
type Edges struct {
	mu   sync.Mutex
	want map[object.ID]object.Type
	// broken is set when a collected object did not parse or two
	// referrers expect different types of one object: Closed then leaves
	// the verdict (and the error naming the culprit) to CheckConnected.
	broken bool
}

// NewEdges returns an empty collector.
func NewEdges() *Edges { return &Edges{want: map[object.ID]object.Type{}} }

// edge is one reference: id, expected to have type want.
type edge struct {
	id   object.ID
	want object.Type
}

// Add records what the object of type t with content data points at, as
// CheckConnected would follow it: a commit's tree and parents, a tag's
// target, a tree's entries (submodule commits excepted). Blobs point at
// nothing.
func (e *Edges) Add(t object.Type, data []byte) {
	var out []edge
	var err error
	switch t {
	case object.Commit:
		var c object.CommitInfo
		if c, err = object.ParseCommit(data); err == nil {
			out = append(out, edge{c.Tree, object.Tree})
			for _, p := range c.Parents {
				out = append(out, edge{p, object.Commit})
			}
		}
	case object.Tag:
		var tg object.TagInfo
		if tg, err = object.ParseTag(data); err == nil {
			out = append(out, edge{tg.Object, tg.ObjectType})
		}
	case object.Tree:
		ti := object.NewTreeIter(data)
		for te, ok := ti.Next(); ok; te, ok = ti.Next() {
			switch {
			case te.IsGitlink():
			case te.IsTree():
				out = append(out, edge{te.ID, object.Tree})
			default:
				out = append(out, edge{te.ID, object.Blob})
			}
		}
		err = ti.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.broken = true
		return
	}
	for _, x := range out {
		if w, ok := e.want[x.id]; ok && w != x.want {
			e.broken = true
		}
		e.want[x.id] = x.want
	}
}

// Closed reports whether tips and every collected reference can be read
// from r (the new objects and the repository's) with the type their
// referrer expects. When it is true, so is the verdict of
// CheckConnected(ctx, r, tips, known) for any known: each object that walk
// could reach either is new, and had its references checked here, or is
// in r. When it is false nothing is decided: a reference of an object no
// tip reaches may be missing, which a push may carry; walk to know.
func (e *Edges) Closed(r SizeReader, tips []object.ID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.broken {
		return false
	}
	for _, id := range tips {
		if _, _, err := r.ReadHeader(id); err != nil {
			return false
		}
	}
	for id, want := range e.want {
		typ, _, err := r.ReadHeader(id)
		if err != nil || typ != want {
			return false
		}
	}
	return true
}
