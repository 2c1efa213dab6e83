package walk

import (
	"context"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// edgeWorld builds objects by hand: what a push carries and what the
// repository had.
type edgeWorld struct{ objs map[object.ID]memObj }

func (w *edgeWorld) put(t object.Type, data string) object.ID {
	id := object.Hash(t, []byte(data))
	w.objs[id] = memObj{t, []byte(data)}
	return id
}

func treeEntry(mode, name string, id object.ID) string {
	return mode + " " + name + "\x00" + string(id[:])
}

func commitBody(tree object.ID, parents ...object.ID) string {
	s := "tree " + tree.String() + "\n"
	for _, p := range parents {
		s += "parent " + p.String() + "\n"
	}
	return s + "author A <a@x> 1 +0000\ncommitter C <c@x> 1 +0000\n\nm\n"
}

// TestEdgesClosed: Closed is true only when every reference of the pushed
// objects is present with the expected type, and whenever it is true the
// walk agrees (a false leaves the verdict to the walk, which may accept an
// unreachable gap).
func TestEdgesClosed(t *testing.T) {
	zero := object.ID{}
	for _, tc := range []struct {
		name string
		// build returns the pushed objects (in the order the indexer
		// would hand them over) and the tips; everything put is readable.
		build      func(w *edgeWorld) (pushed, tips []object.ID)
		wantClosed bool
		wantWalkOK bool
	}{
		{"complete history", func(w *edgeWorld) ([]object.ID, []object.ID) {
			b := w.put(object.Blob, "x")
			sub := w.put(object.Tree, treeEntry("100644", "f", b))
			tr := w.put(object.Tree, treeEntry("100644", "a", b)+treeEntry("40000", "d", sub)+treeEntry("160000", "m", zero))
			c1 := w.put(object.Commit, commitBody(tr))
			c2 := w.put(object.Commit, commitBody(tr, c1))
			tag := w.put(object.Tag, "object "+c2.String()+"\ntype commit\ntag v1\ntagger T <t@x> 1 +0000\n\nv1\n")
			return []object.ID{b, sub, tr, c1, c2, tag}, []object.ID{tag, c2}
		}, true, true},
		{"parent in the repository", func(w *edgeWorld) ([]object.ID, []object.ID) {
			tr := w.put(object.Tree, "")
			old := w.put(object.Commit, commitBody(tr))
			c := w.put(object.Commit, commitBody(tr, old))
			return []object.ID{c}, []object.ID{c}
		}, true, true},
		{"missing blob", func(w *edgeWorld) ([]object.ID, []object.ID) {
			tr := w.put(object.Tree, treeEntry("100644", "a", object.Hash(object.Blob, []byte("gone"))))
			c := w.put(object.Commit, commitBody(tr))
			return []object.ID{tr, c}, []object.ID{c}
		}, false, false},
		{"missing tip", func(w *edgeWorld) ([]object.ID, []object.ID) {
			return nil, []object.ID{object.Hash(object.Commit, []byte("nothing"))}
		}, false, false},
		{"tree named as a parent", func(w *edgeWorld) ([]object.ID, []object.ID) {
			tr := w.put(object.Tree, "")
			c := w.put(object.Commit, commitBody(tr, tr))
			return []object.ID{c}, []object.ID{c}
		}, false, false},
		{"one object expected as tree and as blob", func(w *edgeWorld) ([]object.ID, []object.ID) {
			b := w.put(object.Blob, "")
			tr := w.put(object.Tree, treeEntry("100644", "a", b)+treeEntry("40000", "b", b))
			c := w.put(object.Commit, commitBody(tr))
			return []object.ID{tr, c}, []object.ID{c}
		}, false, false},
		{"gap in an object no tip reaches", func(w *edgeWorld) ([]object.ID, []object.ID) {
			tr := w.put(object.Tree, "")
			c := w.put(object.Commit, commitBody(tr))
			stray := w.put(object.Tree, treeEntry("100644", "a", object.Hash(object.Blob, []byte("gone"))))
			return []object.ID{tr, c, stray}, []object.ID{c}
		}, false, true},
		{"unparsable commit", func(w *edgeWorld) ([]object.ID, []object.ID) {
			c := w.put(object.Commit, "not a commit")
			return []object.ID{c}, []object.ID{c}
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &edgeWorld{objs: map[object.ID]memObj{}}
			pushed, tips := tc.build(w)
			e := NewEdges()
			for _, id := range pushed {
				o := w.objs[id]
				e.Add(o.typ, o.data)
			}
			r := &memReader{objs: w.objs}
			if got := e.Closed(r, tips); got != tc.wantClosed {
				t.Errorf("Closed = %v, want %v", got, tc.wantClosed)
			}
			isPushed := map[object.ID]bool{}
			for _, id := range pushed {
				isPushed[id] = true
			}
			known := func(id object.ID) bool { _, ok := w.objs[id]; return ok && !isPushed[id] }
			err := CheckConnected(context.Background(), r, tips, known)
			if (err == nil) != tc.wantWalkOK {
				t.Errorf("CheckConnected = %v, want ok=%v", err, tc.wantWalkOK)
			}
		})
	}
}
