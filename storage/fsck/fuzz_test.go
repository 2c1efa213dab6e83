package fsck

import (
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// fuzzCheck runs one object through a fresh Checker twice and asserts the
// invariants every input must keep: no panic, only registered check ids,
// and the same verdict both times.
func fuzzCheck(t *testing.T, typ object.Type, data []byte) {
	c := NewChecker(Options{Strict: true, RejectInfo: true})
	id := object.Hash(typ, data)
	err1 := c.Check(id, typ, data)
	err2 := c.Check(id, typ, data)
	if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
		t.Fatalf("non-deterministic: %v vs %v", err1, err2)
	}
	if err1 != nil {
		if _, ok := Lookup(checkName(t, err1)); !ok {
			t.Fatalf("unregistered check in %v", err1)
		}
	}
}

func FuzzCheckTree(f *testing.F) {
	f.Add(mkTree(file("a"), dir("b")))
	f.Add(mkTree(symlink(".gitmodules"), file("GITMOD~1"), dir(".g\u200cit")))
	f.Add([]byte("100644 a\x00"))
	for _, n := range dangerousDotGit {
		f.Add(mkTree(file(n)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzCheck(t, object.Tree, data)
		// The name predicates must not panic on arbitrary bytes either.
		isDotGit(data)
		for _, d := range []dotfile{dotGitmodules, dotGitattributes, dotGitignore, dotMailmap} {
			d.is(data)
		}
	})
}

func FuzzCheckCommit(f *testing.F) {
	for _, tc := range commitCases {
		f.Add(tc.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzCheck(t, object.Commit, data) })
}

func FuzzCheckTag(f *testing.F) {
	for _, tc := range tagCases {
		f.Add(tc.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzCheck(t, object.Tag, data) })
}

func FuzzGitmodules(f *testing.F) {
	for _, tc := range gitmodulesCases {
		f.Add([]byte(tc.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := NewChecker(Options{Strict: true})
		id := object.Hash(object.Blob, data)
		err := c.CheckGitmodules(id, data)
		if err != nil {
			if _, ok := Lookup(checkName(t, err)); !ok {
				t.Fatalf("unregistered check in %v", err)
			}
		}
		// The same blob reached through a tree gives the same verdict.
		tree := mkTree(ent{"100644", ".gitmodules", id})
		c2 := NewChecker(Options{Strict: true})
		if err := c2.Check(object.Hash(object.Tree, tree), object.Tree, tree); err != nil {
			t.Fatal(err)
		}
		err2 := c2.Check(id, object.Blob, data)
		if (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
			t.Fatalf("CheckGitmodules %v, Check %v", err, err2)
		}
		_ = validSubmoduleURL(string(data)) // must not panic
		_ = validSubmoduleName(string(data))
	})
}
