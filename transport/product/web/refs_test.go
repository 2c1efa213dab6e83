package web

import (
	"strings"
	"testing"
)

// TestResolveRef: the longest leading run of segments that names a ref
// wins; an id is an id; tags before branches, as git reads names.
func TestResolveRef(t *testing.T) {
	const idA, idB, idC, idT = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
		"cccccccccccccccccccccccccccccccccccccccc", "dddddddddddddddddddddddddddddddddddddddd"
	names := newRefNames([]Ref{
		{Name: "HEAD", OID: idA, Target: "refs/heads/main"},
		{Name: "refs/heads/main", OID: idA, Kind: "branch"},
		{Name: "refs/heads/feature", OID: idB, Kind: "branch"},
		{Name: "refs/heads/feature/x/y", OID: idC, Kind: "branch"},
		{Name: "refs/tags/v1", OID: idT, Peeled: idA, Kind: "tag"},
		{Name: "refs/heads/v1", OID: idB, Kind: "branch"},
		{Name: "refs/notes/commits", OID: idB, Kind: "other"},
	})
	for _, tc := range []struct {
		url               string
		ok                bool
		ref, commit, path string
	}{
		{"feature/x/y/src/a.go", true, "refs/heads/feature/x/y", idC, "src/a.go"},
		{"feature/x/y", true, "refs/heads/feature/x/y", idC, ""},
		{"feature/x/z/a.go", true, "refs/heads/feature", idB, "x/z/a.go"},
		{"feature/x", true, "refs/heads/feature", idB, "x"},
		{"main", true, "refs/heads/main", idA, ""},
		{"v1/README.md", true, "refs/tags/v1", idA, "README.md"}, // the tag, peeled, before the branch v1
		{"refs/heads/v1/README.md", true, "refs/heads/v1", idB, "README.md"},
		{"refs/heads/feature/x/y/a", true, "refs/heads/feature/x/y", idC, "a"},
		{"HEAD/docs", true, "HEAD", idA, "docs"},
		{idC + "/feature/x/y", true, "", idC, "feature/x/y"},
		{idT, true, "", idT, ""},
		{"notes/commits", false, "", "", ""}, // only heads and tags go by their short names
		{"nope/a.go", false, "", "", ""},
		{"Main", false, "", "", ""},
		{"", false, "", "", ""},
	} {
		got, ok := names.resolve(splitAt(tc.url))
		if ok != tc.ok || got.Ref.Name != tc.ref || got.Commit != tc.commit || got.Path != tc.path {
			t.Errorf("%q: %v %q %q %q, want %v %q %q %q", tc.url, ok, got.Ref.Name, got.Commit, got.Path, tc.ok, tc.ref, tc.commit, tc.path)
		}
	}
}

// TestSpellRef: links name a ref so that the URL reads back as that ref
// and path, falling back to the full name, then to nothing (the id).
func TestSpellRef(t *testing.T) {
	refs := []Ref{
		{Name: "refs/heads/feature", OID: "b", Kind: "branch"},
		{Name: "refs/heads/feature/x/y", OID: "c", Kind: "branch"},
		{Name: "refs/tags/v1", OID: "t", Kind: "tag"},
		{Name: "refs/heads/v1", OID: "v", Kind: "branch"},
	}
	names := newRefNames(refs)
	for _, tc := range []struct {
		ref, path, want string
		ok              bool
	}{
		{"refs/heads/feature/x/y", "a.go", "feature/x/y", true},
		{"refs/heads/feature", "src/a.go", "feature", true},
		{"refs/heads/feature", "x/y/a.go", "", false}, // feature/x/y shadows it
		{"refs/tags/v1", "", "v1", true},
		{"refs/heads/v1", "", "refs/heads/v1", true}, // the tag v1 takes the short name
	} {
		var r Ref
		for _, c := range refs {
			if c.Name == tc.ref {
				r = c
			}
		}
		got, ok := names.spell(r, tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s + %q: %q %v, want %q %v", tc.ref, tc.path, got, ok, tc.want, tc.ok)
		}
		if ok {
			if back, _ := names.resolve(append(strings.Split(got, "/"), splitAt(tc.path)...)); back.Ref.Name != tc.ref {
				t.Errorf("%s spelled %q reads back as %s", tc.ref, got, back.Ref.Name)
			}
		}
	}
}
