package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/gitrun"
)

// TestMatcher: what each kind of pattern finds in a text, as git grep
// would line by line: a regexp never matches across a newline, and its
// anchors are the line's.
func TestMatcher(t *testing.T) {
	for _, c := range []struct {
		pattern         string
		regexp, fold    bool
		text            string
		first           int      // the first match's start, -1 for none
		all             [][2]int // every match in the text's first line
		wantBadEnough   bool     // a 400
		explainMismatch string
	}{
		{pattern: "foo", text: "a foo foo", first: 2, all: [][2]int{{2, 5}, {6, 9}}},
		{pattern: "FOO", text: "a foo", first: -1},
		{pattern: "FOO", fold: true, text: "a foo Foo", first: 2, all: [][2]int{{2, 5}, {6, 9}}},
		{pattern: "a[B", fold: true, text: "é A[b a[B", first: 3, all: [][2]int{{3, 6}, {7, 10}}, explainMismatch: "ASCII folding keeps offsets"},
		{pattern: "a.c", text: "a.c abc", first: 0, all: [][2]int{{0, 3}}, explainMismatch: "a literal's dot is a dot"},
		{pattern: "a.c", regexp: true, text: "abc", first: 0, all: [][2]int{{0, 3}}},
		{pattern: "b.c", regexp: true, text: "ab\ncd", first: -1, explainMismatch: ". never matches a newline"},
		{pattern: "b[^x]c", regexp: true, text: "ab\ncd", first: -1, explainMismatch: "a negated class loses the newline"},
		{pattern: `b\sc`, regexp: true, text: "ab\ncd", first: -1, explainMismatch: `\s loses the newline`},
		{pattern: `b\nc`, regexp: true, text: "ab\ncd", first: -1, explainMismatch: "a literal newline matches nothing"},
		{pattern: `(?s)b.c`, regexp: true, text: "ab\ncd", first: -1, explainMismatch: "(?s) cannot bring it back"},
		{pattern: `^c`, regexp: true, text: "ab\ncd", first: 3, explainMismatch: "^ is a line's start"},
		{pattern: `\Ac`, regexp: true, text: "ab\ncd", first: 3, explainMismatch: `\A is a line's start`},
		{pattern: `b$`, regexp: true, text: "ab\ncd", first: 1, all: [][2]int{{1, 2}}, explainMismatch: "$ is a line's end"},
		{pattern: `b\z`, regexp: true, text: "ab\ncd", first: 1, all: [][2]int{{1, 2}}},
		{pattern: `x*`, regexp: true, text: "ab", first: 0, all: nil, explainMismatch: "empty matches are hits but mark nothing"},
		{pattern: `(x+x+)+y`, regexp: true, text: strings.Repeat("x", 5000), first: -1, explainMismatch: "linear, not exponential"},
		{pattern: `Ünï`, fold: true, text: "ünï", first: 0, all: [][2]int{{0, 5}}},
		{pattern: `(a`, regexp: true, wantBadEnough: true},
		{pattern: `\p{Nope}`, regexp: true, wantBadEnough: true},
		{pattern: `((a{100}){100}){100}`, regexp: true, wantBadEnough: true},
		{pattern: `[a-z]{1000}[0-9]{1000}[a-z]{1000}[0-9]{1000}`, regexp: true, wantBadEnough: true, explainMismatch: "over the instruction limit"},
	} {
		name := fmt.Sprintf("%q regexp=%v fold=%v", c.pattern, c.regexp, c.fold)
		m, err := compileMatcher(c.pattern, c.regexp, c.fold)
		if c.wantBadEnough {
			if !errors.Is(err, ErrBadRequest) {
				t.Errorf("%s: %v, want a bad request", name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if i, _ := m.index([]byte(c.text)); i != c.first {
			t.Errorf("%s in %q: first match at %d, want %d (%s)", name, c.text, i, c.first, c.explainMismatch)
		}
		line, _, _ := strings.Cut(c.text, "\n")
		if got := m.all([]byte(line), maxHitRanges); !slices.Equal(got, c.all) {
			t.Errorf("%s in %q: matches %v, want %v", name, line, got, c.all)
		}
	}
}

// TestHitWindow: a long line is shown as a window that holds its first
// match, with context before it, never cutting a rune.
func TestHitWindow(t *testing.T) {
	long := strings.Repeat("a", 1000)
	for _, c := range []struct {
		name     string
		text     string
		ranges   [][2]int
		from, to int
	}{
		{"fits", "short", [][2]int{{0, 1}}, 0, 5},
		{"match at the start", long, [][2]int{{0, 3}}, 0, 100},
		{"context before the match", long, [][2]int{{500, 503}}, 475, 575},
		{"the whole match in view", long, [][2]int{{500, 590}}, 490, 590},
		{"a match longer than the window starts it", long, [][2]int{{500, 700}}, 500, 600},
		{"a full window at the end", long, [][2]int{{995, 1000}}, 900, 1000},
		{"no match", long, nil, 0, 100},
		{"runes kept whole", strings.Repeat("é", 100), [][2]int{{100, 102}}, 76, 174},
	} {
		from, to := hitWindow([]byte(c.text), c.ranges, 100)
		if from != c.from || to != c.to {
			t.Errorf("%s: [%d, %d), want [%d, %d)", c.name, from, to, c.from, c.to)
		}
	}
}

// TestParseSearch: the canonical query names one cache entry per
// question, and bad queries are 400s that say what is wrong.
func TestParseSearch(t *testing.T) {
	oid := strings.Repeat("a", 40)
	base := "/api/alice/site/search/" + oid
	for _, c := range []struct {
		query, canonical, bad string
	}{
		{query: "q=foo", canonical: "case=sensitive&mode=literal&q=foo&type=text"},
		{query: "type=path&q=a+b&case=insensitive&mode=regexp&page=src%2Fa.go%3A12&junk=1",
			canonical: "case=insensitive&mode=regexp&page=src%2Fa.go%3A12&q=a+b&type=path"},
		{query: "q=x&page=a%3Ab%3A0", canonical: "case=sensitive&mode=literal&page=a%3Ab%3A0&q=x&type=text"},
		{query: "", bad: "search needs q"},
		{query: "q=x&type=code", bad: `type="code"`},
		{query: "q=x&mode=glob", bad: `mode="glob"`},
		{query: "q=x&case=yes", bad: `case="yes"`},
		{query: "q=x&page=nowhere", bad: "not a search page"},
		{query: "q=x&page=a%2F..%2Fb%3A1", bad: `segment ".."`},
		{query: "q=x&page=a%3A-1", bad: "not a search page"},
		{query: "q=%28a&mode=regexp", bad: "bad regexp: error parsing regexp: missing closing ): `(a`"},
		{query: "q=" + strings.Repeat("x", maxPatternBytes+1), bad: "longer than 1000 bytes"},
		{query: "q=%ff", bad: "not UTF-8"},
	} {
		v, _ := url.ParseQuery(c.query)
		q, err := ParseRequest(base, v)
		if c.bad != "" {
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%q: %v, want a bad request saying %q", c.query, err, c.bad)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.query, err)
			continue
		}
		if got := q.Path(); got != base+"?"+c.canonical {
			t.Errorf("%q: canonical %s", c.query, got)
		}
		// The canonical form parses back to itself.
		u, _ := url.Parse(q.Path())
		again, err := ParseRequest(u.EscapedPath(), u.Query())
		if err != nil || again.Path() != q.Path() {
			t.Errorf("%q: canonical form reparses as %v, %v", c.query, again, err)
		}
	}
	if _, err := ParseRequest(base+"/extra", url.Values{"q": {"x"}}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("search with a path: %v", err)
	}
}

// searchRepo is a public repository alice/site whose main commit holds
// files, packed by git, and served by a Local with lim.
type searchRepo struct {
	g    *gitrun.Repo
	main object.ID
	b    *browseBackend
	base string
	get  func(path string) (int, http.Header, string)
}

func newSearchRepo(t *testing.T, files map[string]string, lim Limits, tree func(g *gitrun.Repo) string) *searchRepo {
	t.Helper()
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("t", "t@t", "2024-01-01T00:00:00Z")})
	dir := g.Dir
	for name, content := range files {
		g.Write(name, content)
	}
	if tree == nil {
		g.Run("add", "-A")
		g.Run("commit", "-q", "-m", "main")
	} else {
		g.Run("update-ref", "refs/heads/main", g.Run("commit-tree", "-m", "main", tree(g)))
	}
	r := &localRepo{dir: dir, main: object.MustID(g.Run("rev-parse", "main"))}
	hash := strings.TrimSpace(string(g.Output([]byte("main\n"), "pack-objects", "-q", "--revs", filepath.Join(dir, "pack"))))
	r.packPath = filepath.Join(dir, "pack-"+hash+".pack")
	b := r.open(t)
	l := newLocal(t, b)
	l.Limits = lim
	srv := newTestHandler(t, nil, l)
	sr := &searchRepo{g: g, main: r.main, b: b, base: "/api/alice/site/search/" + r.main.String()}
	sr.get = func(path string) (int, http.Header, string) { return get(t, srv, path) }
	return sr
}

// page asks one search page and decodes it.
func (r *searchRepo) page(t *testing.T, query url.Values) (searchAnswer, http.Header) {
	t.Helper()
	code, h, body := r.get(r.base + "?" + query.Encode())
	if code != http.StatusOK {
		t.Fatalf("search %s: %d %s", query.Encode(), code, body)
	}
	var a searchAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("search %s: %v in %s", query.Encode(), err, body)
	}
	return a, h
}

// all follows the pages of a search to the end: every hit as
// "path:line:text" (or the path), and every page.
func (r *searchRepo) all(t *testing.T, query url.Values) ([]string, []searchAnswer) {
	t.Helper()
	var hits []string
	var pages []searchAnswer
	for {
		a, h := r.page(t, query)
		pages = append(pages, a)
		for _, hit := range a.Hits {
			if hit.Line == 0 {
				hits = append(hits, hit.Path)
			} else {
				hits = append(hits, fmt.Sprintf("%s:%d:%s", hit.Path, hit.Line, hit.Text))
			}
		}
		if (a.Next == "") != (h.Get("Link") == "") {
			t.Fatalf("next %q but Link %q", a.Next, h.Get("Link"))
		}
		if a.Next == "" {
			return hits, pages
		}
		if len(pages) > 1000 {
			t.Fatal("no end to the pages")
		}
		query.Set("page", a.Next)
	}
}

// grepFixture is text to search: matches at the first and last lines,
// several per line, a file with more hits than a page, names that sort
// around a directory's, a binary file, CRLF-free Unicode.
func grepFixture() map[string]string {
	var many strings.Builder
	for i := range 250 {
		fmt.Fprintf(&many, "row %d: needle %d\n", i, i*i)
	}
	return map[string]string{
		"README.md":        "# Needle\nA needle in a haystack.\nno match here\n",
		"a.txt":            "needle\nneedle needle needle\nlast line needle", // no final newline
		"a/b.txt":          "func main() {\n\tprintln(\"needle\")\n}\n",
		"a-b.txt":          "between a/ and a.txt in git's order: needle\n",
		"a0.txt":           "after the directory a: NEEDLE\n",
		"deep/x/y/z.go":    "package z\n\n// needle: 42\nfunc Z() int { return 42 }\n",
		"many.txt":         many.String(),
		"unicode.txt":      "naïve nëedle\nüber NEEDLE\n",
		"bin.dat":          "needle\x00needle\n",
		"empty.txt":        "",
		"long.txt":         strings.Repeat("x", 5000) + " needle " + strings.Repeat("y", 5000) + "\n",
		"trailing-nl.txt":  "needle\n\n\n",
		"sub/needle-named": "content without the word\n",
	}
}

// TestSearchLikeGitGrep: every search finds exactly the lines git grep
// finds in the same commit (git grep -n -I, with -F, -E or -i to
// match), over every page.
func TestSearchLikeGitGrep(t *testing.T) {
	r := newSearchRepo(t, grepFixture(), Limits{}, nil)
	for _, c := range []struct {
		q, mode, kase string
		grep          []string
	}{
		{"needle", "literal", "sensitive", []string{"-F"}},
		{"NEEDLE", "literal", "insensitive", []string{"-F", "-i"}},
		{"nee.le", "literal", "sensitive", []string{"-F"}},
		{"ne+dle [0-9]+$", "regexp", "sensitive", []string{"-E"}},
		{"^needle", "regexp", "sensitive", []string{"-E"}},
		{"needle$", "regexp", "sensitive", []string{"-E"}},
		{"(needle ){2}", "regexp", "insensitive", []string{"-E", "-i"}},
		{"[^a-z]needle", "regexp", "sensitive", []string{"-E"}},
		{"return|main", "regexp", "sensitive", []string{"-E"}},
	} {
		hits, pages := r.all(t, url.Values{"q": {c.q}, "mode": {c.mode}, "case": {c.kase}})
		args := append([]string{"grep", "-n", "-I", "--no-color"}, c.grep...)
		res := r.g.Try(nil, append(args, "-e", c.q, "main")...)
		var want []string
		for l := range strings.SplitSeq(res.Out(), "\n") {
			if l != "" {
				want = append(want, strings.TrimPrefix(l, "main:"))
			}
		}
		// The one line too long to show whole: compare where it is.
		for i, h := range hits {
			if strings.HasPrefix(h, "long.txt:") {
				hits[i] = "long.txt:1"
			}
		}
		for i, w := range want {
			if strings.HasPrefix(w, "long.txt:") {
				want[i] = "long.txt:1"
			}
		}
		if !slices.Equal(hits, want) {
			t.Errorf("%q %s %s: %d hits in %d pages\n%s\ngit grep %v: %d\n%s", c.q, c.mode, c.kase, len(hits), len(pages),
				strings.Join(hits, "\n"), c.grep, len(want), strings.Join(want, "\n"))
		}
		for _, p := range pages {
			if p.Partial || len(p.Hits) > searchPageHits {
				t.Errorf("%q: a page of %d hits, partial %v (%s)", c.q, len(p.Hits), p.Partial, p.StoppedReason)
			}
		}
	}

	// Empty lines: git grep also reports a line after some files' last
	// newline, which the file does not have.
	if hits, _ := r.all(t, url.Values{"q": {"^$"}, "mode": {"regexp"}}); !slices.Equal(hits, []string{"deep/x/y/z.go:2:", "trailing-nl.txt:2:", "trailing-nl.txt:3:"}) {
		t.Errorf("empty lines: %q", hits)
	}

	// Hits show their matches, and the binary file is counted.
	a, _ := r.page(t, url.Values{"q": {"needle"}})
	if a.SkippedBinary != 1 || a.Partial || a.Next == "" || len(a.Hits) != searchPageHits {
		t.Errorf("first page: binary %d, partial %v, next %q, %d hits", a.SkippedBinary, a.Partial, a.Next, len(a.Hits))
	}
	for _, h := range a.Hits {
		for _, rg := range h.Ranges {
			if h.Text[rg[0]:rg[1]] != "needle" {
				t.Errorf("%s:%d: range %v of %q is not the match", h.Path, h.Line, rg, h.Text)
			}
		}
		if len(h.Ranges) == 0 {
			t.Errorf("%s:%d %q: no match marked", h.Path, h.Line, h.Text)
		}
		if h.Path == "long.txt" && (!h.Clipped || len(h.Text) > maxHitText || !strings.Contains(h.Text, " needle ")) {
			t.Errorf("long line shown as %d bytes, clipped %v", len(h.Text), h.Clipped)
		}
	}

	// File names: git ls-tree's paths that match.
	hits, _ := r.all(t, url.Values{"q": {"needle"}, "type": {"path"}})
	if !slices.Equal(hits, []string{"sub/needle-named"}) {
		t.Errorf("path search: %v", hits)
	}
	hits, _ = r.all(t, url.Values{"q": {`^a.*\.txt$`}, "type": {"path"}, "mode": {"regexp"}})
	if want := []string{"a-b.txt", "a.txt", "a/b.txt", "a0.txt"}; !slices.Equal(hits, want) {
		t.Errorf("path regexp search: %v, want %v", hits, want)
	}

	// A bad regexp is a clear 400; so is a search of a blob.
	code, _, body := r.get(r.base + "?mode=regexp&q=" + url.QueryEscape("a(b"))
	if code != http.StatusBadRequest || !strings.Contains(body, "missing closing )") {
		t.Errorf("bad regexp: %d %s", code, body)
	}
	blob := r.g.Run("rev-parse", "main:a.txt")
	if code, _, body := r.get("/api/alice/site/search/" + blob + "?q=x"); code != http.StatusNotFound {
		t.Errorf("search of a blob: %d %s", code, body)
	}
}

// TestSearchBudgets: a page stops where a budget ends, says which and
// where, and the pages after it go on from there: following them finds
// every hit an unbounded search finds, in the same order.
func TestSearchBudgets(t *testing.T) {
	files := grepFixture()
	whole := newSearchRepo(t, files, Limits{}, nil)
	want, _ := whole.all(t, url.Values{"q": {"needle"}})
	for _, c := range []struct {
		lim     Limits
		setting string
	}{
		{Limits{MaxSearchBytes: 2000}, SettingMaxSearchBytes},
		{Limits{MaxSearchFiles: 3}, SettingMaxSearchFiles},
		{Limits{MaxSearchBlobs: 2}, SettingMaxSearchBlobs},
		{Limits{MaxEntries: 4}, SettingMaxEntries},
	} {
		r := newSearchRepo(t, files, c.lim, nil)
		hits, pages := r.all(t, url.Values{"q": {"needle"}})
		if !slices.Equal(hits, want) {
			t.Errorf("%s: paged hits differ from one search:\n%s\nwant\n%s", c.setting, strings.Join(hits, "\n"), strings.Join(want, "\n"))
		}
		stopped := 0
		for _, p := range pages {
			if !p.Partial {
				continue
			}
			stopped++
			if !strings.Contains(p.StoppedReason, "set "+c.setting) || p.StoppedAt == "" || !strings.HasPrefix(p.Next, p.StoppedAt+":") {
				t.Errorf("%s: stopped %q at %q, next %q", c.setting, p.StoppedReason, p.StoppedAt, p.Next)
			}
		}
		if stopped == 0 {
			t.Errorf("%s: no page stopped on the budget (%d pages)", c.setting, len(pages))
		}
		if c.setting == SettingMaxSearchBytes {
			for _, p := range pages {
				if p.BytesScanned > c.lim.MaxSearchBytes+searchChunk+int64(len(files["long.txt"])) {
					t.Errorf("a page scanned %d bytes, budget %d", p.BytesScanned, c.lim.MaxSearchBytes)
				}
			}
		}
	}
}

// TestSearchResumedFileNotRemembered: a page that starts inside a file
// has not seen that file's first lines, so another path naming the same
// blob is still searched whole.
func TestSearchResumedFileNotRemembered(t *testing.T) {
	same := "needle\nhay\n"
	r := newSearchRepo(t, map[string]string{"a.txt": same, "b.txt": same}, Limits{}, nil)
	a, _ := r.page(t, url.Values{"q": {"needle"}, "page": {"a.txt:1"}})
	if len(a.Hits) != 1 || a.Hits[0].Path != "b.txt" || a.Hits[0].Line != 1 {
		t.Errorf("from a.txt:1: %+v", a.Hits)
	}
}

// TestSearchTimeBudget: the clock stops a page between chunks, naming
// the setting; a later page goes on from where it stopped. Over HTTP
// such a page is never stored.
func TestSearchTimeBudget(t *testing.T) {
	var big strings.Builder
	for i := 0; big.Len() < 10*searchChunk; i++ {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	files := map[string]string{"big.txt": big.String(), "z.txt": "line 1234\n"}
	r := newSearchRepo(t, files, Limits{}, nil)
	// A second a look at the fake clock: the deadline has passed at the
	// first look after the deadline is set, after the first chunk.
	clock := time.Unix(0, 0)
	tick := func() time.Time { clock = clock.Add(time.Second); return clock }
	q := &SearchQuery{Pattern: "line 1234"}
	var err error
	if q.m, err = compileMatcher(q.Pattern, false, false); err != nil {
		t.Fatal(err)
	}
	rd := newReader(context.Background(), r.b.set, Limits{SearchTimeout: 500 * time.Millisecond})
	a, err := rd.search(r.main, q, tick)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Partial || !a.timedOut || !strings.Contains(a.StoppedReason, "set "+SettingSearchTimeout) || a.StoppedAt != "big.txt" ||
		a.BytesScanned < searchChunk || a.BytesScanned >= 2*searchChunk {
		t.Fatalf("stopped %v (%q at %q) after %d bytes", a.Partial, a.StoppedReason, a.StoppedAt, a.BytesScanned)
	}
	cur, err := parseCursor(a.Next)
	if err != nil || cur.Path != "big.txt" || cur.Line == 0 {
		t.Fatalf("next %q: %v", a.Next, err)
	}
	// The page after it starts after the last line the first one scanned.
	q.Page = cur
	rd = newReader(context.Background(), r.b.set, Limits{SearchTimeout: time.Hour})
	rest, err := rd.search(r.main, q, tick)
	if err != nil || rest.Partial {
		t.Fatalf("the rest: %+v, %v", rest, err)
	}
	if got := len(a.Hits) + len(rest.Hits); got != strings.Count(big.String(), "line 1234")+1 || rest.Hits[0].Line <= cur.Line {
		t.Errorf("%d+%d hits, the second page from line %d", len(a.Hits), len(rest.Hits), rest.Hits[0].Line)
	}

	// Over HTTP with a budget already over at the first look: partial and
	// uncacheable.
	hr := newSearchRepo(t, files, Limits{SearchTimeout: time.Nanosecond}, nil)
	code, h, body := hr.get(hr.base + "?q=line+1234")
	if code != http.StatusOK || !strings.Contains(body, SettingSearchTimeout) || h.Get("Cache-Control") != "no-store" || h.Get("ETag") != "" {
		t.Errorf("timed-out page: %d %s %q %q", code, body[:min(len(body), 300)], h.Get("Cache-Control"), h.Get("ETag"))
	}
}

// TestSearchHostile: what an anonymous caller can make one page cost.
// A tree naming one file a million times stops on the file budget having
// read that file once; a tree of a million directories stops on the
// entry budget; a file over the size limit is skipped unread; regexps
// that backtracking engines take exponential time over run in one pass;
// trees nested deeper than git allows are skipped.
func TestSearchHostile(t *testing.T) {
	t.Run("tree bomb", func(t *testing.T) {
		r := newSearchRepo(t, nil, Limits{}, func(g *gitrun.Repo) string { return g.TreeBomb(6, 10, "boom\n") })
		for _, typ := range []string{"text", "path"} {
			a, _ := r.page(t, url.Values{"q": {"absent"}, "type": {typ}})
			if !a.Partial || !strings.Contains(a.StoppedReason, SettingMaxSearchFiles) || a.Files != DefaultMaxSearchFiles ||
				a.BlobsRead > 1 || a.Next == "" {
				t.Errorf("%s: partial %v (%s) after %d files, %d blobs read, next %q", typ, a.Partial, a.StoppedReason, a.Files, a.BlobsRead, a.Next)
			}
		}
		a, _ := r.page(t, url.Values{"q": {"boom"}})
		if len(a.Hits) != searchPageHits || a.Partial || a.Next != "0/0/0/0/9/9:1" {
			t.Errorf("hits: %d, partial %v, next %q", len(a.Hits), a.Partial, a.Next)
		}
		// Full pages of paths follow each other without a gap or a repeat.
		p1, _ := r.page(t, url.Values{"q": {"/"}, "type": {"path"}})
		p2, _ := r.page(t, url.Values{"q": {"/"}, "type": {"path"}, "page": {p1.Next}})
		if len(p1.Hits) != searchPageHits || len(p2.Hits) == 0 || p1.Hits[len(p1.Hits)-1].Path != "0/0/0/0/9/9" || p2.Hits[0].Path != "0/0/0/1/0/0" {
			t.Errorf("path pages: %d hits to %v, then %d from %v", len(p1.Hits), p1.Hits[len(p1.Hits)-1], len(p2.Hits), p2.Hits)
		}
	})
	t.Run("directory bomb", func(t *testing.T) {
		r := newSearchRepo(t, nil, Limits{MaxEntries: 50_000}, func(g *gitrun.Repo) string {
			id := strings.TrimSpace(string(g.Output(nil, "mktree")))
			for range 6 {
				var b strings.Builder
				for i := range 10 {
					fmt.Fprintf(&b, "040000 tree %s\t%d\n", id, i)
				}
				id = strings.TrimSpace(string(g.Output([]byte(b.String()), "mktree")))
			}
			return id
		})
		a, _ := r.page(t, url.Values{"q": {"x"}})
		if !a.Partial || !strings.Contains(a.StoppedReason, SettingMaxEntries) || a.Files != 0 || a.Next == "" {
			t.Errorf("partial %v (%s), %d files, next %q", a.Partial, a.StoppedReason, a.Files, a.Next)
		}
		// The next page goes on past it.
		b, _ := r.page(t, url.Values{"q": {"x"}, "page": {a.Next}})
		if !b.Partial || b.Next <= a.Next {
			t.Errorf("second page: partial %v, next %q after %q", b.Partial, b.Next, a.Next)
		}
	})
	t.Run("huge file", func(t *testing.T) {
		huge := strings.Repeat("needle\n", (DefaultMaxSearchFileBytes/7)+1)
		r := newSearchRepo(t, map[string]string{"huge.txt": huge, "small.txt": "needle\n"}, Limits{}, nil)
		objs := &countingObjects{Objects: r.b.set, reads: map[object.ID]int{}}
		q, _ := parseSearch(url.Values{"q": {"needle"}})
		a, err := newReader(context.Background(), objs, Limits{}).search(r.main, q, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		hugeID := object.MustID(r.g.Run("rev-parse", "main:huge.txt"))
		if a.SkippedLarge != 1 || len(a.Hits) != 1 || a.Hits[0].Path != "small.txt" || objs.reads[hugeID] != 0 {
			t.Errorf("skipped %d, hits %v, huge.txt read %d times", a.SkippedLarge, a.Hits, objs.reads[hugeID])
		}
	})
	t.Run("pathological regexps", func(t *testing.T) {
		var text strings.Builder
		for text.Len() < 512<<10 {
			text.WriteString(strings.Repeat("x", 4000) + "\n" + strings.Repeat("a", 60) + "\n")
		}
		r := newSearchRepo(t, map[string]string{"x.txt": text.String()}, Limits{}, nil)
		for _, re := range []string{`(x+x+)+y`, `(.*)*(.*)*z`, `(a|aa)*c`, `(x*)*(x*)*(x*)*$y`, `^(([a-z])+.)+[A-Z]([a-z])+$`} {
			a, _ := r.page(t, url.Values{"q": {re}, "mode": {"regexp"}})
			if a.Partial || len(a.Hits) != 0 || a.BytesScanned != int64(text.Len()) {
				t.Errorf("%s: partial %v (%s), %d hits, %d of %d bytes", re, a.Partial, a.StoppedReason, len(a.Hits), a.BytesScanned, text.Len())
			}
		}
	})
	t.Run("deeper than git allows", func(t *testing.T) {
		// maxSearchDepth+1 nested directories beside top.txt, in memory
		// (git takes minutes to write and pack them).
		objs := memObjects{}
		top := objs.add(object.Blob, []byte("needle\n"))
		id := objs.add(object.Tree, nil)
		for range maxSearchDepth + 1 {
			id = objs.add(object.Tree, []byte("40000 d\x00"+string(id[:])))
		}
		root := objs.add(object.Tree, []byte("40000 d\x00"+string(id[:])+"100644 top.txt\x00"+string(top[:])))
		q, _ := parseSearch(url.Values{"q": {"needle"}})
		a, err := newReader(context.Background(), objs, Limits{}).search(root, q, time.Now)
		if err != nil || a.SkippedDeep != 1 || len(a.Hits) != 1 || a.Hits[0].Path != "top.txt" {
			t.Errorf("skipped deep %d, hits %v, %v", a.SkippedDeep, a.Hits, err)
		}
	})
}

// memObjects is an object store in memory.
type memObjects map[object.ID]memObject

type memObject struct {
	t    object.Type
	data []byte
}

func (m memObjects) add(t object.Type, data []byte) object.ID {
	id := object.Hash(t, data)
	m[id] = memObject{t, data}
	return id
}

func (m memObjects) ReadObject(id object.ID) (object.Type, []byte, error) {
	o, ok := m[id]
	if !ok {
		return 0, nil, object.ErrNotFound
	}
	return o.t, o.data, nil
}

func (m memObjects) ReadHeader(id object.ID) (object.Type, int64, error) {
	t, data, err := m.ReadObject(id)
	return t, int64(len(data)), err
}

func (m memObjects) OpenObject(id object.ID) (object.Type, int64, io.ReadCloser, error) {
	t, data, err := m.ReadObject(id)
	return t, int64(len(data)), io.NopCloser(bytes.NewReader(data)), err
}

func (m memObjects) Has(id object.ID) bool { _, ok := m[id]; return ok }

// countingObjects counts whole-object reads by id.
type countingObjects struct {
	Objects
	reads map[object.ID]int
}

func (c *countingObjects) ReadObject(id object.ID) (object.Type, []byte, error) {
	c.reads[id]++
	return c.Objects.ReadObject(id)
}
