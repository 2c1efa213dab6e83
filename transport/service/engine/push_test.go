package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/fsck"
	"github.com/rgit/rgit/storage/object"
)

// mapReader is an object.Reader over a map; err, if set, fails every read.
type mapReader struct {
	objs map[object.ID]mapObj
	err  error
}

type mapObj struct {
	t    object.Type
	data []byte
}

func (r mapReader) ReadObject(id object.ID) (object.Type, []byte, error) {
	if r.err != nil {
		return object.Invalid, nil, r.err
	}
	o, ok := r.objs[id]
	if !ok {
		return object.Invalid, nil, fmt.Errorf("%s: %w", id, object.ErrNotFound)
	}
	return o.t, o.data, nil
}

// gitmodulesTree returns a tree naming blob .gitmodules.
func gitmodulesTree(blob object.ID) (object.ID, []byte) {
	data := append([]byte("100644 .gitmodules\x00"), blob[:]...)
	return object.Hash(object.Tree, data), data
}

// The indexer's Check hook sees trees but never blobs, so every .gitmodules
// blob the pushed trees name is checked afterwards by checkGitmodules, from
// whatever reader holds it (the push or the repository).
func TestCheckGitmodules(t *testing.T) {
	good := []byte("[submodule \"a\"]\n\tpath = a\n\turl = https://example.com/a\n")
	evil := []byte("[submodule \"a\"]\n\tpath = a\n\turl = -upload-pack=touch /tmp/pwned\n")
	subtree := []byte("100644 x\x00" + strings.Repeat("\x01", object.IDSize))
	readErr := errors.New("disk on fire")
	cases := []struct {
		name    string
		obj     *mapObj // what the reader holds under the blob id; nil: nothing
		readErr error
		check   string // fsck check id expected; "" with wantErr nil: accepted
		wantErr error
	}{
		{name: "good blob", obj: &mapObj{object.Blob, good}},
		{name: "evil url", obj: &mapObj{object.Blob, evil}, check: fsck.GitmodulesURL},
		{name: "missing", check: fsck.GitmodulesMissing},
		{name: "not a blob", obj: &mapObj{object.Tree, subtree}, check: fsck.GitmodulesBlob},
		{name: "read error", readErr: readErr, wantErr: readErr},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var blob object.ID
			if c.obj != nil {
				blob = object.Hash(c.obj.t, c.obj.data)
			} else {
				blob[0] = 0xab
			}
			ck := fsck.NewChecker(fsck.Options{})
			treeID, tree := gitmodulesTree(blob)
			if err := ck.Check(treeID, object.Tree, tree); err != nil {
				t.Fatalf("tree: %v", err)
			}
			r := mapReader{objs: map[object.ID]mapObj{}, err: c.readErr}
			if c.obj != nil {
				r.objs[blob] = *c.obj
			}
			err := checkGitmodules(ck, r)
			var fe *fsck.Error
			switch {
			case c.wantErr != nil:
				if !errors.Is(err, c.wantErr) || errors.Is(err, fsck.ErrFsck) {
					t.Fatalf("err = %v, want %v (not an fsck finding)", err, c.wantErr)
				}
			case c.check == "":
				if err != nil {
					t.Fatalf("err = %v, want accepted", err)
				}
			case !errors.As(err, &fe) || fe.Check != c.check || fe.ID != blob:
				t.Fatalf("err = %v, want %s on %s", err, c.check, blob)
			}
		})
	}
}

// A blob already passed to Check after its tree needs no second look.
func TestCheckGitmodulesSkipsCheckedBlobs(t *testing.T) {
	good := []byte("[submodule \"a\"]\n\tpath = a\n\turl = https://example.com/a\n")
	blob := object.Hash(object.Blob, good)
	ck := fsck.NewChecker(fsck.Options{})
	treeID, tree := gitmodulesTree(blob)
	if err := ck.Check(treeID, object.Tree, tree); err != nil {
		t.Fatal(err)
	}
	if err := ck.Check(blob, object.Blob, good); err != nil {
		t.Fatal(err)
	}
	if err := checkGitmodules(ck, mapReader{err: errors.New("must not be read")}); err != nil {
		t.Fatalf("checked blob read again: %v", err)
	}
}
