package fsck

import (
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

func TestTreeChecks(t *testing.T) {
	tests := []struct {
		name string
		tree []byte
		want string
		info bool // check with RejectInfo
	}{
		{"valid", mkTree(file("a"), ent{"100755", "b", blobID}, symlink("c"), dir("d"), ent{"160000", "e", commitID}), "", false},
		{"empty tree", nil, "", false},
		{"gitmodules blob", mkTree(file(".gitmodules")), "", false},
		{"dir sorts as name/", mkTree(file("a.c"), dir("a")), "", false},
		{"file before longer name", mkTree(file("a"), file("a.c")), "", false},
		{"nullSha1", mkTree(ent{mode: "zero", name: "a"}), NullSha1, false},
		{"fullPathname", mkTree(file("a/b")), FullPathname, false},
		{"emptyName", mkTree(file("")), EmptyName, false},
		{"hasDot", mkTree(dir(".")), HasDot, false},
		{"hasDotdot", mkTree(dir("..")), HasDotdot, false},
		{"hasDotgit", mkTree(dir(".git")), HasDotgit, false},
		{"hasDotgit after backslash", mkTree(file("a\\.git")), HasDotgit, false},
		{"hasDotgit short name after backslash", mkTree(file("a\\GIT~1\\b")), HasDotgit, false},
		{"zeroPaddedFilemode", mkTree(ent{"040000", "d", treeID}), ZeroPaddedFilemode, false},
		{"badFilemode ignored by default", mkTree(ent{"100664", "a", blobID}), "", false},
		{"badFilemode", mkTree(ent{"100664", "a", blobID}), BadFilemode, true},
		{"badFilemode odd type", mkTree(ent{"10644", "a", blobID}), BadFilemode, true},
		{"duplicateEntries adjacent", mkTree(file("a"), file("a")), DuplicateEntries, false},
		{"duplicateEntries file and dir", mkTree(file("a"), dir("a")), DuplicateEntries, false},
		{"duplicateEntries non-adjacent", mkTree(file("a"), file("a.c"), dir("a")), DuplicateEntries, false},
		{"treeNotSorted", mkTree(file("b"), file("a")), TreeNotSorted, false},
		{"treeNotSorted dir", mkTree(dir("a"), file("a.c")), TreeNotSorted, false},
		{"badTree truncated", mkTree(file("a"))[:10], BadTree, false},
		{"badTree mode", []byte("10x644 a\x00" + strings.Repeat("x", 20)), BadTree, false},
		{"badTree no mode", []byte(" a\x00" + strings.Repeat("x", 20)), BadTree, false},
		{"badTree short id", []byte("100644 a\x00abc"), BadTree, false},
		{"gitmodulesSymlink", mkTree(symlink(".gitmodules")), GitmodulesSymlink, false},
		{"gitmodulesSymlink short name", mkTree(symlink("GITMOD~1")), GitmodulesSymlink, false},
		{"gitmodulesSymlink hashed short name", mkTree(symlink("gi7eba~1")), GitmodulesSymlink, false},
		{"gitmodulesSymlink hfs", mkTree(symlink(".git\u200cmodules")), GitmodulesSymlink, false},
		{"gitmodulesSymlink after backslash", mkTree(symlink("x\\.gitmodules")), GitmodulesSymlink, false},
		{"gitmodulesBlob tree", mkTree(dir(".gitmodules")), GitmodulesBlob, false},
		{"gitmodulesBlob gitlink", mkTree(ent{"160000", ".gitmodules", commitID}), GitmodulesBlob, false},
		{"gitattributesSymlink", mkTree(symlink(".gitattributes")), GitattributesSymlink, false},
		{"gitignoreSymlink", mkTree(symlink("GITIGN~1")), GitignoreSymlink, false},
		{"mailmapSymlink", mkTree(symlink(".mailmap")), MailmapSymlink, false},
		{"gitignore regular file", mkTree(file(".gitignore")), "", true},
		{"largePathname", mkTree(file(strings.Repeat("x", 4097))), LargePathname, false},
		{"long but allowed", mkTree(file(strings.Repeat("x", 4096))), "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker(Options{Strict: true, RejectInfo: tc.info})
			id := object.Hash(object.Tree, tc.tree)
			err := c.Check(id, object.Tree, tc.tree)
			if got := checkName(t, err); got != tc.want {
				t.Fatalf("Check = %v, want check %q", err, tc.want)
			}
		})
	}
}

func TestTreeDangerousNames(t *testing.T) {
	c := NewChecker(Options{Strict: true})
	for _, n := range dangerousDotGit {
		for _, e := range []ent{file(n), dir(n)} {
			tree := mkTree(e)
			err := c.Check(object.Hash(object.Tree, tree), object.Tree, tree)
			if got := checkName(t, err); got != HasDotgit {
				t.Errorf("tree with %s %q: %v, want hasDotgit", e.mode, n, err)
			}
		}
	}
	for _, n := range safeDotGit {
		tree := mkTree(file(n))
		if err := c.Check(object.Hash(object.Tree, tree), object.Tree, tree); err != nil {
			t.Errorf("tree with %q: %v, want nil", n, err)
		}
	}
}

func TestTreeSkip(t *testing.T) {
	tree := mkTree(ent{"040000", "d", treeID})
	skip, err := ParseSkipList("zeroPaddedFilemode")
	if err != nil {
		t.Fatal(err)
	}
	c := NewChecker(Options{Strict: true, Skip: skip})
	if err := c.Check(object.Hash(object.Tree, tree), object.Tree, tree); err != nil {
		t.Fatalf("skipped zeroPaddedFilemode still fails: %v", err)
	}
	// Skipping one check leaves the next one in force.
	tree = mkTree(ent{"040000", "d", treeID}, file("c"), file("b"))
	if got := checkName(t, c.Check(object.Hash(object.Tree, tree), object.Tree, tree)); got != TreeNotSorted {
		t.Fatalf("got %q, want treeNotSorted", got)
	}
	// Security checks cannot be skipped even if a caller builds the map.
	c = NewChecker(Options{Strict: true, Skip: map[string]bool{HasDotgit: true, DuplicateEntries: true}})
	tree = mkTree(dir(".git"))
	if got := checkName(t, c.Check(object.Hash(object.Tree, tree), object.Tree, tree)); got != HasDotgit {
		t.Fatalf("got %q, want hasDotgit despite skip", got)
	}
}
