package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// TestRefListsBounded: a repository with 10,000 branches (or tags) costs
// the refs read and one page's reads, sorted by name and saying so; a
// small one is read whole and listed newest first.
func TestRefListsBounded(t *testing.T) {
	for _, tc := range []struct {
		kind     string
		n        int
		page     string
		maxReads int
		byName   bool
	}{
		{"branches", 10_000, "", 2, true},           // the page's commits, one ahead-behind
		{"branches", 10_000, "?page=334", 2, true},  // the last page holds 10
		{"tags", 10_000, "", refsPerPage + 1, true}, // a tag per row, the page's commits
		{"branches", 40, "", 2, false},
	} {
		api := &countingAPI{kind: tc.kind, n: tc.n}
		h, err := New(Config{API: api})
		if err != nil {
			t.Fatal(err)
		}
		resp, body := get(t, h, "/o/r/"+tc.kind+tc.page, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s%s: %d\n%s", tc.kind, tc.page, resp.StatusCode, body)
		}
		if n := int(api.reads.Load()); n > tc.maxReads {
			t.Errorf("%s of %d%s: %d API reads, want at most %d", tc.kind, tc.n, tc.page, n, tc.maxReads)
		}
		_, picker, _ := strings.Cut(body, `id="picker"`)
		picker, _, _ = strings.Cut(picker, "</details>")
		if n := strings.Count(picker, "<li"); n > maxPicker+1 {
			t.Errorf("%s of %d: the picker lists %d refs", tc.kind, tc.n, n)
		}
		if got := strings.Contains(body, `id="by-name"`); got != tc.byName {
			t.Errorf("%s of %d: sorted by name %v, want %v", tc.kind, tc.n, got, tc.byName)
		}
		if !tc.byName {
			// Newest first: the fake dates grow with the number.
			_, list, _ := strings.Cut(body, `id="branches"`)
			if i, j := strings.Index(list, ">b0039<"), strings.Index(list, ">b0038<"); i < 0 || j < 0 || i > j {
				t.Errorf("not newest first (b0039 at %d, b0038 at %d)", i, j)
			}
		}
	}
	if resp, _ := get(t, mustNew(t, &countingAPI{kind: "branches", n: 10}), "/o/r/branches?page=2", ""); resp.StatusCode != 404 {
		t.Errorf("a page past the end: %d, want 404", resp.StatusCode)
	}
	if resp, _ := get(t, mustNew(t, &countingAPI{kind: "branches", n: 10}), "/o/r/branches?page=x", ""); resp.StatusCode != 400 {
		t.Errorf("page=x: %d, want 400", resp.StatusCode)
	}
}

func mustNew(t *testing.T, api http.Handler) *Handler {
	t.Helper()
	h, err := New(Config{API: api})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// countingAPI is a repository of n branches b0000… (or annotated tags)
// whose commits are dated by their number, counting the reads after
// refs.
type countingAPI struct {
	kind  string
	n     int
	reads atomic.Int32 // the page reads rows concurrently
	// commitsStatus, when set, refuses every commits read with it (400:
	// a read API of the release before; 404: an id no ref reaches), and
	// gone is a commit id that log answers 404 for.
	commitsStatus int
	gone          string
}

func fakeID(c byte, i int) string { return fmt.Sprintf("%c%039d", c, i) }

func (a *countingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/o/r/"), "/")
	if parts[0] == "refs" {
		refs := []Ref{{Name: "HEAD", OID: fakeID('c', 0), Target: "refs/heads/b0000"}}
		for i := range a.n {
			if a.kind == "tags" {
				refs = append(refs, Ref{Name: fmt.Sprintf("refs/tags/t%04d", i), OID: fakeID('a', i), Peeled: fakeID('c', i), Kind: "tag"})
			} else {
				refs = append(refs, Ref{Name: fmt.Sprintf("refs/heads/b%04d", i), OID: fakeID('c', i), Kind: "branch"})
			}
		}
		writeJSON(w, refs)
		return
	}
	a.reads.Add(1)
	when := func(id string) When {
		i, _ := strconv.Atoi(strings.TrimLeft(id[1:], "0") + "0")
		return When{time.Unix(int64(i), 0).UTC()}
	}
	switch parts[0] {
	case "commits":
		if a.commitsStatus != 0 {
			writeJSONError(w, a.commitsStatus, "refused")
			return
		}
		var cs []Commit
		for id := range strings.SplitSeq(parts[1], ",") {
			cs = append(cs, Commit{OID: id, Committer: Person{Time: when(id)}, Message: "m"})
		}
		writeJSON(w, cs)
	case "log":
		if parts[1] == a.gone {
			writeJSONError(w, 404, "not found")
			return
		}
		writeJSON(w, []Commit{{OID: parts[1], Committer: Person{Time: when(parts[1])}, Message: "m"}})
	case "tag":
		writeJSON(w, tagObject{Object: "c" + parts[1][1:], Type: "commit", Tagger: &Person{Time: when(parts[1])}, Message: "note"})
	case "ahead-behind":
		_, heads, _ := strings.Cut(parts[1], "...")
		type counts struct {
			Ahead    int  `json:"ahead"`
			Complete bool `json:"complete"`
		}
		ab := struct {
			Heads []counts `json:"heads"`
		}{}
		for range strings.Split(heads, ",") {
			ab.Heads = append(ab.Heads, counts{Ahead: 1, Complete: true})
		}
		writeJSON(w, ab)
	default:
		writeJSONError(w, 404, "not found")
	}
}

// BenchmarkBranchesPage: the branches page of 18 branches (the bench's
// medium fixture) over a fake API: the page's own cost, template and
// JSON, without git.
func BenchmarkBranchesPage(b *testing.B) {
	h, err := New(Config{API: &countingAPI{kind: "branches", n: 18}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r := httptest.NewRequest("GET", "/o/r/branches", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

// TestBranchesCommitsRefused: when the page's commits answer is refused
// as a whole — by a read API of the release before (400) or for a branch
// deleted since the refs were read (404) — each row's commit is read
// alone: the page still lists newest first, and only the deleted
// branch's row is without its commit.
func TestBranchesCommitsRefused(t *testing.T) {
	for _, code := range []int{http.StatusBadRequest, http.StatusNotFound} {
		api := &countingAPI{kind: "branches", n: 20, commitsStatus: code, gone: fakeID('c', 15)}
		resp, body := get(t, mustNew(t, api), "/o/r/branches", "")
		if resp.StatusCode != 200 {
			t.Fatalf("commits refused with %d: page %d\n%s", code, resp.StatusCode, body)
		}
		_, list, _ := strings.Cut(body, `id="branches"`)
		if i, j := strings.Index(list, ">b0019<"), strings.Index(list, ">b0018<"); i < 0 || j < 0 || i > j {
			t.Errorf("commits refused with %d: not newest first (b0019 at %d, b0018 at %d)", code, i, j)
		}
		for _, id := range []string{fakeID('c', 19), fakeID('c', 16)} {
			if !strings.Contains(list, "/commit/"+id) {
				t.Errorf("commits refused with %d: no commit link for %s", code, id)
			}
		}
		if strings.Contains(list, "/commit/"+fakeID('c', 15)) || !strings.Contains(list, ">b0015<") {
			t.Errorf("commits refused with %d: the deleted branch's row links its commit", code)
		}
	}
}
