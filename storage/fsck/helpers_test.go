package fsck

import (
	"errors"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

var (
	blobID   = object.MustID("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")
	treeID   = object.MustID("4b825dc642cb6eb9a060e54bf8d69288fbee4904")
	commitID = object.MustID("1111111111111111111111111111111111111111")
)

// ent is one hand-crafted tree entry.
type ent struct {
	mode, name string
	id         object.ID
}

// mkTree serialises entries in the given order (no sorting: tests craft
// unsorted trees on purpose).
func mkTree(es ...ent) []byte {
	var b []byte
	for _, e := range es {
		id := e.id
		if id.IsZero() && e.mode != "zero" {
			id = blobID
		}
		mode := e.mode
		if mode == "zero" {
			mode = "100644"
		}
		b = append(b, mode...)
		b = append(b, ' ')
		b = append(b, e.name...)
		b = append(b, 0)
		b = append(b, id[:]...)
	}
	return b
}

func file(name string) ent    { return ent{mode: "100644", name: name} }
func symlink(name string) ent { return ent{mode: "120000", name: name} }
func dir(name string) ent     { return ent{mode: "40000", name: name, id: treeID} }

// checkName returns the msg id of err ("" for nil), failing on errors that
// are not *Error.
func checkName(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var fe *Error
	if !errors.As(err, &fe) || !errors.Is(err, ErrFsck) {
		t.Fatalf("error %v is not an fsck *Error", err)
	}
	return fe.Check
}

// lines joins header lines with '\n' and adds the final one.
func lines(ls ...string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }

// hex40 is an id git does not know (the empty tree would be: git always
// has it, and then complains that a parent or tag target is a tree).
// Distinct ids per role: git's object table refuses one id used both as
// a tree and as a commit.
const (
	hex40     = "0123456789abcdef0123456789abcdef01234567"
	parentHex = "1123456789abcdef0123456789abcdef01234567"
	targetHex = "2123456789abcdef0123456789abcdef01234567"
)
