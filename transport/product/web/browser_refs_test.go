package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// namesRepo is alice/names (public) on the site: main, a branch other
// forked from main's first commit, a branch feature/x/y ahead of main by
// two, an annotated tag v1.0 and lightweight tags light and feature (git
// keeps refs/heads/feature and refs/heads/feature/x/y apart, but not a
// tag and a branch: tree/feature/x/y/… must still find the branch).
type namesRepo struct {
	first, main, deep, tip string            // commit ids: main~1, main, feature/x/y~1, feature/x/y
	ahead, behind          map[string]string // git rev-list --left-right --count main...{branch}
}

func newNamesRepo(t *testing.T, s *site) *namesRepo {
	t.Helper()
	env := s.env
	s.srv.CreateRepo(t, "alice/names")
	s.srv.Admin(t, "set-visibility", "alice/names", "public")
	wt := env.Scratch(t)
	n := &namesRepo{ahead: map[string]string{}, behind: map[string]string{}}
	n.first = env.Commit(t, wt, "first on main", map[string]string{"README.md": "# names\n", "src/a.go": "package a\n"})
	n.main = env.Commit(t, wt, "second on main", map[string]string{"src/b.go": "package b\n"})
	env.Run(t, wt, "tag", "-a", "v1.0", "-m", "Release one <b>bold</b>\n\nNotes.", n.first)
	env.Run(t, wt, "tag", "light", n.main)
	env.Run(t, wt, "tag", "feature", n.first)
	env.Run(t, wt, "checkout", "-q", "-b", "feature/x/y")
	n.deep = env.Commit(t, wt, "deep file", map[string]string{"src/deep/y.go": "package y // on feature/x/y\n"})
	n.tip = env.Commit(t, wt, "tip of feature/x/y", map[string]string{"src/deep/z.go": "package y\n"})
	env.Run(t, wt, "checkout", "-q", "-b", "other", n.first)
	env.Commit(t, wt, "on other", map[string]string{"other.txt": "o\n"})
	env.Run(t, wt, "checkout", "-q", "main")
	env.Run(t, wt, "push", "-q", s.srv.HTTPURL(s.aliceToken, "alice/names"), "--all")
	env.Run(t, wt, "push", "-q", s.srv.HTTPURL(s.aliceToken, "alice/names"), "--tags")
	for _, b := range []string{"other", "feature/x/y"} {
		lr := strings.Fields(env.Run(t, wt, "rev-list", "--left-right", "--count", "main..."+b))
		n.ahead[b], n.behind[b] = lr[1], lr[0]
	}
	return n
}

// TestNamesOverReadAPI: tree, blob, commits and raw by a branch holding
// "/", by a branch it prefixes, by tag and by id, over the real read
// API; links stay on the name; the branches and tags pages and the
// repository page's summary.
func TestNamesOverReadAPI(t *testing.T) {
	s := newSite(t)
	n := newNamesRepo(t, s)
	for _, tc := range []struct {
		path   string
		status int
		want   []string
		not    []string
	}{
		{"/alice/names/tree/feature/x/y/src", 200, []string{
			`<summary>feature/x/y</summary>`,
			`href="/alice/names/tree/feature/x/y/src/deep"`,
			`href="/alice/names/blob/feature/x/y/src/a.go"`,
			`href="/alice/names/commits/feature/x/y/src" id="history"`,
			`id="permalink" href="/alice/names/tree/` + n.tip + `/src"`,
		}, nil},
		// The longest ref wins; a shorter one is read with the rest as a path.
		{"/alice/names/tree/feature/src", 200, []string{`<summary>feature</summary>`, `a.go`}, []string{"b.go", "deep"}},
		{"/alice/names/blob/feature/x/y/src/deep/y.go", 200, []string{"on feature/x/y", `href="/alice/names/raw/feature/x/y/src/deep/y.go"`}, nil},
		{"/alice/names/blob/v1.0/README.md", 200, []string{`<summary>v1.0</summary>`, "<h1>names</h1>", `href="/alice/names/commits/v1.0/README.md"`}, nil},
		{"/alice/names/tree/light/src", 200, []string{`<summary>light</summary>`, "b.go"}, []string{"deep"}},
		{"/alice/names/commits/feature/x/y/src/deep", 200, []string{"tip of feature/x/y", "deep file"}, []string{"second on main"}},
		{"/alice/names/commits/refs/heads/feature/x/y", 200, []string{"tip of feature/x/y", "second on main", `href="/alice/names/commits/feature/x/y"`}, nil},
		{"/alice/names/commit/other", 200, []string{"on other"}, nil},
		// An id is a ref spelling: links stay on the id, no permanent link.
		{"/alice/names/tree/" + n.first + "/src", 200, []string{`<summary>` + n.first[:10] + `</summary>`, `href="/alice/names/blob/` + n.first + `/src/a.go"`}, []string{`id="permalink"`, "b.go"}},
		{"/alice/names/tree/nope/src", 404, []string{"no branch, tag or commit named nope"}, nil},
		{"/alice/names/blob/feature/x/y", 404, nil, nil},
		{"/alice/names/commits/main?from=zz", 400, nil, nil},
		{"/alice/names/commit/main/src", 404, nil, nil},
		{"/alice/names/branches", 200, []string{
			`id="default">default</span>`, "tip of feature/x/y",
			`>` + n.ahead["other"] + ` ahead<`, `>` + n.behind["other"] + ` behind<`,
			`>` + n.ahead["feature/x/y"] + ` ahead<`, `>` + n.behind["feature/x/y"] + ` behind<`,
		}, []string{`id="by-name"`}},
		{"/alice/names/tags", 200, []string{"Release one &lt;b&gt;bold&lt;/b&gt;", "light", "second on main"}, nil},
		{"/alice/names", 200, []string{`3 branches</a>`, `3 tags</a>`, `id="latest"`, "second on main"}, nil},
	} {
		status, body := s.get(t, tc.path, "")
		if status != tc.status {
			t.Errorf("%s: %d, want %d\n%s", tc.path, status, tc.status, body)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: no %q in\n%s", tc.path, w, body)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(body, w) {
				t.Errorf("%s: %q in\n%s", tc.path, w, body)
			}
		}
	}
	if status, body := s.get(t, "/alice/names/raw/feature/x/y/src/deep/y.go", ""); status != 200 || body != "package y // on feature/x/y\n" {
		t.Errorf("raw by branch: %d %q", status, body)
	}
}

// TestBrowserNames walks the names in a browser: from the repository page
// to a branch holding "/", into a directory and a file, to its history,
// keeping the branch in every URL; the permanent link; a tag and an id
// in the same shapes; the branches and tags pages.
func TestBrowserNames(t *testing.T) {
	s := newSite(t)
	n := newNamesRepo(t, s)
	b := newBrowser(t, s.base)

	b.open("/alice/names", "#summary")
	if got := b.text("#summary"); !strings.Contains(got, "3 branches") || !strings.Contains(got, "3 tags") || !strings.Contains(got, "second on main") {
		t.Errorf("summary %q", got)
	}
	b.shot("names-repository")

	b.open("/alice/names/tree/feature/x/y", "#tree")
	b.do("open src", chromedp.Click(chromedp.CSS(`#tree a[href$="/src"]`)), chromedp.WaitVisible(chromedp.CSS(`#tree a[href$="/src/deep"]`)))
	b.do("open deep", chromedp.Click(chromedp.CSS(`#tree a[href$="/src/deep"]`)), chromedp.WaitVisible(chromedp.CSS(`#tree a[href$="/y.go"]`)))
	b.do("open y.go", chromedp.Click(chromedp.CSS(`#tree a[href$="/y.go"]`)), chromedp.WaitVisible(chromedp.CSS("#file .chroma")))
	if loc := b.location(); !strings.HasSuffix(loc, "/alice/names/blob/feature/x/y/src/deep/y.go") {
		t.Errorf("the file by branch is at %s", loc)
	}
	if label := b.text("#picker summary"); label != "feature/x/y" {
		t.Errorf("ref label %q", label)
	}
	if crumbs := b.text("#crumbs"); !strings.Contains(crumbs, "names / src / deep / y.go") {
		t.Errorf("breadcrumbs %q", crumbs)
	}
	b.shot("names-blob-branch")
	b.do("open the history", chromedp.Click(chromedp.CSS("#history")), chromedp.WaitVisible(chromedp.CSS("#log a.subject")))
	if loc := b.location(); !strings.HasSuffix(loc, "/alice/names/commits/feature/x/y/src/deep/y.go") {
		t.Errorf("the history by branch is at %s", loc)
	}
	if log := b.text("#log"); !strings.Contains(log, "deep file") || strings.Contains(log, "second on main") {
		t.Errorf("history of y.go: %q", log)
	}
	b.shot("names-commits-branch")
	b.do("follow the permanent link", chromedp.Click(chromedp.CSS("#permalink")), chromedp.WaitVisible(chromedp.CSS("#log a.subject")))
	if loc := b.location(); !strings.HasSuffix(loc, "/alice/names/commits/"+n.tip+"/src/deep/y.go") {
		t.Errorf("the permanent link is %s", loc)
	}

	b.open("/alice/names/blob/v1.0/README.md", "#file")
	if label := b.text("#picker summary"); label != "v1.0" {
		t.Errorf("ref label %q", label)
	}
	b.shot("names-blob-tag")
	b.open("/alice/names/tree/"+n.first+"/src", "#tree")
	if label := b.text("#picker summary"); label != n.first[:10] {
		t.Errorf("ref label %q", label)
	}
	b.do("open a.go by id", chromedp.Click(chromedp.CSS(`#tree a[href$="/a.go"]`)), chromedp.WaitVisible(chromedp.CSS("#file .chroma")))
	if loc := b.location(); !strings.HasSuffix(loc, "/alice/names/blob/"+n.first+"/src/a.go") {
		t.Errorf("the file by id is at %s", loc)
	}
	b.shot("names-blob-id")

	b.open("/alice/names", "#branches-link")
	b.do("open branches", chromedp.Click(chromedp.CSS("#branches-link")), chromedp.WaitVisible(chromedp.CSS("#branches")))
	if rows := b.text("#branches"); !strings.Contains(rows, n.ahead["other"]+" ahead · "+n.behind["other"]+" behind") || !strings.Contains(rows, "default") {
		t.Errorf("branches:\n%s", rows)
	}
	b.clean("branches")
	b.shot("branches")
	b.do("open a branch", chromedp.Click(chromedp.CSS(`#branches a.refname[href$="/tree/feature/x/y"]`)), chromedp.WaitVisible(chromedp.CSS("#tree")))
	b.do("open tags", chromedp.Click(chromedp.CSS("#tags-link")), chromedp.WaitVisible(chromedp.CSS("#tags")))
	if rows := b.text("#tags"); !strings.Contains(rows, "Release one <b>bold</b>") || !strings.Contains(rows, "light") {
		t.Errorf("tags:\n%s", rows)
	}
	b.clean("tags")
	b.shot("tags")
}
