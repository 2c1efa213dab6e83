package fsck

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

var badGitmodules = []byte("[submodule \"x\"]\n\turl = -evil\n")

func TestGitmodulesBlobAfterTree(t *testing.T) {
	c := NewChecker(Options{Strict: true})
	blob := object.Hash(object.Blob, badGitmodules)
	tree := mkTree(ent{"100644", ".gitmodules", blob})
	if err := c.Check(object.Hash(object.Tree, tree), object.Tree, tree); err != nil {
		t.Fatal(err)
	}
	if got := c.GitmodulesBlobs(); !slices.Equal(got, []object.ID{blob}) {
		t.Fatalf("GitmodulesBlobs = %v, want [%v]", got, blob)
	}
	if got := checkName(t, c.Check(blob, object.Blob, badGitmodules)); got != GitmodulesURL {
		t.Fatalf("Check(blob) = %q, want gitmodulesUrl", got)
	}
	if got := c.GitmodulesBlobs(); len(got) != 0 {
		t.Fatalf("GitmodulesBlobs after check = %v, want none", got)
	}
	// An unrelated blob with the same content under another id is not
	// checked.
	if err := c.Check(commitID, object.Blob, badGitmodules); err != nil {
		t.Fatalf("ordinary blob: %v", err)
	}
}

func TestGitmodulesBlobBeforeTree(t *testing.T) {
	c := NewChecker(Options{Strict: true})
	blob := object.Hash(object.Blob, badGitmodules)
	if err := c.Check(blob, object.Blob, badGitmodules); err != nil {
		t.Fatalf("blob not yet known as .gitmodules: %v", err)
	}
	// NTFS short name after a backslash still counts.
	tree := mkTree(ent{"100644", "a\\GITMOD~1", blob})
	if err := c.Check(object.Hash(object.Tree, tree), object.Tree, tree); err != nil {
		t.Fatal(err)
	}
	ids := c.GitmodulesBlobs()
	if !slices.Equal(ids, []object.ID{blob}) {
		t.Fatalf("GitmodulesBlobs = %v, want [%v]", ids, blob)
	}
	err := c.CheckGitmodules(blob, badGitmodules)
	if got := checkName(t, err); got != GitmodulesURL {
		t.Fatalf("CheckGitmodules = %v", err)
	}
	if got := c.GitmodulesBlobs(); len(got) != 0 {
		t.Fatalf("GitmodulesBlobs after check = %v, want none", got)
	}
}

func TestGitmodulesNonBlob(t *testing.T) {
	c := NewChecker(Options{Strict: true})
	sub := mkTree(file("a"))
	subID := object.Hash(object.Tree, sub)
	// The mode says blob, the object is a tree.
	tree := mkTree(ent{"100644", ".gitmodules", subID})
	if err := c.Check(object.Hash(object.Tree, tree), object.Tree, tree); err != nil {
		t.Fatal(err)
	}
	if got := checkName(t, c.Check(subID, object.Tree, sub)); got != GitmodulesBlob {
		t.Fatalf("got %q, want gitmodulesBlob", got)
	}
	if got := checkName(t, c.MissingGitmodules(blobID)); got != GitmodulesMissing {
		t.Fatalf("got %q, want gitmodulesMissing", got)
	}
}

func TestGitmodulesBlobsSorted(t *testing.T) {
	c := NewChecker(Options{Strict: true})
	var es []ent
	var want []object.ID
	for i := range 5 {
		id := object.Hash(object.Blob, fmt.Appendf(nil, "%d", i))
		want = append(want, id)
		es = append(es, ent{"100644", fmt.Sprintf("d%d\\.gitmodules", i), id})
	}
	tree := mkTree(es...)
	if err := c.Check(object.Hash(object.Tree, tree), object.Tree, tree); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(want, func(a, b object.ID) int { return slices.Compare(a[:], b[:]) })
	if got := c.GitmodulesBlobs(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestConcurrentCheck runs trees and their .gitmodules blobs through one
// Checker from many goroutines in arbitrary order; every bad blob must be
// caught either by Check or via GitmodulesBlobs + CheckGitmodules.
func TestConcurrentCheck(t *testing.T) {
	const n = 200
	c := NewChecker(Options{Strict: true})
	type obj struct {
		id   object.ID
		typ  object.Type
		data []byte
	}
	var objs []obj
	for i := range n {
		data := fmt.Appendf(nil, "[submodule \"s%d\"]\n\turl = -x%d\n", i, i)
		b := object.Hash(object.Blob, data)
		tree := mkTree(ent{"100644", ".gitmodules", b})
		objs = append(objs, obj{b, object.Blob, data}, obj{object.Hash(object.Tree, tree), object.Tree, tree})
	}
	byID := map[object.ID][]byte{}
	for _, o := range objs {
		byID[o.id] = o.data
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		caught = map[object.ID]bool{}
	)
	work := make(chan obj)
	for range 4 {
		wg.Go(func() {
			for o := range work {
				if err := c.Check(o.id, o.typ, o.data); err != nil {
					mu.Lock()
					caught[o.id] = true
					mu.Unlock()
				}
			}
		})
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	for _, id := range c.GitmodulesBlobs() {
		if err := c.CheckGitmodules(id, byID[id]); err != nil {
			caught[id] = true
		}
	}
	if len(caught) != n {
		t.Fatalf("caught %d bad .gitmodules blobs, want %d", len(caught), n)
	}
}

func TestErrorFormat(t *testing.T) {
	c := NewChecker(Options{Strict: true})
	tree := mkTree(dir(".git"))
	id := object.Hash(object.Tree, tree)
	err := c.Check(id, object.Tree, tree)
	want := "object " + id.String() + ": hasDotgit: contains '.git'"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if !errors.Is(err, ErrFsck) {
		t.Fatal("errors.Is(err, ErrFsck) = false")
	}
	if wrapped := fmt.Errorf("push: %w", err); !errors.Is(wrapped, ErrFsck) {
		t.Fatal("wrapped error does not match ErrFsck")
	}
}

func TestParseSkipList(t *testing.T) {
	got, err := ParseSkipList(" zeroPaddedFilemode, BADTIMEZONE|missingSpaceBeforeDate ,,")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{ZeroPaddedFilemode: true, BadTimezone: true, MissingSpaceBeforeDate: true}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k := range want {
		if !got[k] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if got, err := ParseSkipList(""); err != nil || len(got) != 0 {
		t.Fatalf("empty list: %v, %v", got, err)
	}
	if _, err := ParseSkipList("zeroPaddedFilemode,noSuchCheck"); !errors.Is(err, ErrUnknownCheck) {
		t.Fatalf("unknown id: err = %v, want ErrUnknownCheck", err)
	}
	if _, err := ParseSkipList("hasDotgit"); !errors.Is(err, ErrNotSkippable) {
		t.Fatalf("security id: err = %v, want ErrNotSkippable", err)
	}
}

func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, ci := range Checks() {
		if seen[ci.ID] {
			t.Errorf("duplicate check %s", ci.ID)
		}
		seen[ci.ID] = true
		got, err := ParseSkipList(ci.ID)
		security := ci.Class == Security
		if security != errors.Is(err, ErrNotSkippable) {
			t.Errorf("%s: class=%v but ParseSkipList err=%v", ci.ID, ci.Class, err)
		}
		if !security && !got[ci.ID] {
			t.Errorf("%s: not in parsed skip list", ci.ID)
		}
	}
}
