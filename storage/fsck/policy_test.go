package fsck

import (
	"strconv"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

func TestRejectsTable(t *testing.T) {
	sec := CheckInfo{ID: "s", Severity: SevWarn, Class: Security}
	guard := CheckInfo{ID: "g", Severity: SevInfo, Class: Guard}
	cosm := CheckInfo{ID: "c", Severity: SevError, Class: Cosmetic}
	info := CheckInfo{ID: "i", Severity: SevInfo, Class: Cosmetic}
	tests := []struct {
		name                        string
		c                           CheckInfo
		skipped, strict, rejectInfo bool
		want                        bool
	}{
		{"security default", sec, false, false, false, true},
		{"security skipped", sec, true, false, false, true},
		{"security strict skipped", sec, true, true, true, true},
		{"guard default", guard, false, false, false, true},
		{"guard skipped", guard, true, false, false, false},
		{"cosmetic default", cosm, false, false, false, false},
		{"cosmetic strict", cosm, false, true, false, true},
		{"cosmetic strict skipped", cosm, true, true, false, false},
		{"info strict", info, false, true, false, false},
		{"info strict rejectInfo", info, false, true, true, true},
		{"info default rejectInfo", info, false, false, true, false},
	}
	for _, tc := range tests {
		if got := Rejects(tc.c, tc.skipped, tc.strict, tc.rejectInfo); got != tc.want {
			t.Errorf("%s: Rejects = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDefaultAcceptsCosmetic: an old public history's zero-padded modes and
// bad timezones pass by default, are reported through Accepted, and fail
// under Strict.
func TestDefaultAcceptsCosmetic(t *testing.T) {
	tree := mkTree(ent{"040000", "d", treeID})
	commit := commitWithAuthor("A <a> 1 +000")
	objs := []struct {
		t     object.Type
		data  []byte
		check string
	}{{object.Tree, tree, ZeroPaddedFilemode}, {object.Commit, commit, BadTimezone}}

	def := NewChecker(Options{})
	for _, o := range objs {
		if err := def.Check(object.Hash(o.t, o.data), o.t, o.data); err != nil {
			t.Fatalf("default: %s rejected: %v", o.check, err)
		}
	}
	sample, total := def.Accepted()
	if total != 2 || len(sample) != 2 || sample[0].Check != ZeroPaddedFilemode || sample[1].Check != BadTimezone {
		t.Fatalf("Accepted = %+v, %d; want the two findings", sample, total)
	}
	if sample[0].ID != object.Hash(object.Tree, tree) {
		t.Fatalf("finding names object %s, want the tree", sample[0].ID)
	}

	strict := NewChecker(Options{Strict: true})
	for _, o := range objs {
		if got := checkName(t, strict.Check(object.Hash(o.t, o.data), o.t, o.data)); got != o.check {
			t.Fatalf("strict: got %q, want %q", got, o.check)
		}
	}
}

// TestSecurityRejectsUnderEveryMode: default, strict and a skip list naming
// every check still reject the security family.
func TestSecurityRejectsUnderEveryMode(t *testing.T) {
	all := map[string]bool{}
	for _, ci := range Checks() {
		all[ci.ID] = true
	}
	cases := []struct {
		t     object.Type
		data  []byte
		check string
	}{
		{object.Tree, mkTree(dir(".git")), HasDotgit},
		{object.Tree, mkTree(dir("..")), HasDotdot},
		{object.Tree, mkTree(file("a/b")), FullPathname},
		{object.Tree, mkTree(symlink(".gitmodules")), GitmodulesSymlink},
		{object.Tree, mkTree(file("b"), file("a")), TreeNotSorted},
		{object.Commit, lines(parentLine, author, committer, "", "m"), MissingTree},
	}
	for _, opts := range []Options{{}, {Strict: true}, {Skip: all}, {Strict: true, Skip: all}} {
		for _, tc := range cases {
			c := NewChecker(opts)
			if got := checkName(t, c.Check(object.Hash(tc.t, tc.data), tc.t, tc.data)); got != tc.check {
				t.Errorf("opts %+v: got %q, want %q", opts, got, tc.check)
			}
		}
	}
	for _, ci := range Checks() {
		if ci.Class == Security && !Rejects(ci, true, false, false) {
			t.Errorf("%s: security check does not reject", ci.ID)
		}
	}
}

// TestAcceptedIsBounded: a pack full of cosmetic findings keeps a bounded
// sample but counts them all.
func TestAcceptedIsBounded(t *testing.T) {
	c := NewChecker(Options{})
	for i := range 100 {
		data := lines(treeLine, "author A <a> 1 +000", committer, "", strconv.Itoa(i))
		if err := c.Check(object.Hash(object.Commit, data), object.Commit, data); err != nil {
			t.Fatal(err)
		}
	}
	sample, total := c.Accepted()
	if total != 100 || len(sample) != maxAccepted {
		t.Fatalf("Accepted: %d kept of %d, want %d of 100", len(sample), total, maxAccepted)
	}
}
