package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// SearchResult is GET search's answer (docs/read-api.md#search).
type SearchResult struct {
	Hits []struct {
		Path    string   `json:"path"`
		Line    int      `json:"line"`
		Text    string   `json:"text"`
		Clipped bool     `json:"clipped"`
		Ranges  [][2]int `json:"ranges"`
	} `json:"hits"`
	Files         int    `json:"files"`
	SkippedBinary int    `json:"skipped_binary"`
	SkippedLarge  int    `json:"skipped_large"`
	Partial       bool   `json:"partial"`
	StoppedReason string `json:"stopped_reason"`
	StoppedAt     string `json:"stopped_at"`
	Next          string `json:"next"`
}

type searchPage struct {
	page
	Action string
	// The form as asked: the pattern, its options and the ref.
	Q, Ref           string
	Paths, Re, Fold  bool
	OID              string
	Searched         bool
	Groups           []searchGroup
	Hits             int
	Res              SearchResult
	Next, Error      string
	PathHits         []searchLine
	SkippedSomething bool
}

// searchGroup is one file's hits.
type searchGroup struct {
	Path, Href string
	Lines      []searchLine
}

// searchLine is a hit: a line (N, Href at the line) or a path, its
// matches marked.
type searchLine struct {
	N       int
	Href    string
	Segs    []seg
	Clipped bool
}

// seg is a piece of a hit's text, marked when it is a match.
type seg struct {
	Text string
	Mark bool
}

// segments cuts text at the match ranges (byte offsets, [start, end)).
// Ranges out of order, overlapping or outside text are ignored, so a
// bad answer can cost a mark, never a panic; the template escapes the
// pieces.
func segments(text string, ranges [][2]int) []seg {
	var out []seg
	at := 0
	for _, r := range ranges {
		if r[0] < at || r[1] <= r[0] || r[1] > len(text) {
			continue
		}
		if r[0] > at {
			out = append(out, seg{Text: text[at:r[0]]})
		}
		out = append(out, seg{Text: text[r[0]:r[1]], Mark: true})
		at = r[1]
	}
	if at < len(text) || len(out) == 0 {
		out = append(out, seg{Text: text[at:]})
	}
	return out
}

// searchAt sets q.at to what a search page searches: ref as the user
// gave it (a branch, a tag or a commit id, refs.go), HEAD when empty.
func (q *repoReq) searchAt(ref string) bool {
	if ref == "" {
		hr, ok := q.headRef()
		if ok {
			q.at = at{Ref: hr, Commit: hr.Commit()}
		}
		return ok
	}
	a, ok := q.resolve(ref)
	if ok {
		q.at = a
	}
	return ok
}

// search is /{owner}/{name}/search?q=&ref=&type=&mode=&case=&page=: the
// read API's search of one commit, hits grouped by file, each linking to
// its line.
func (h *Handler) search(w http.ResponseWriter, r *http.Request) {
	q, ok := h.begin(w, r)
	if !ok {
		return
	}
	v := r.URL.Query()
	p := searchPage{page: page{Title: "Search · " + q.owner + "/" + q.name, Viewer: viewer(r)}, Action: q.base() + "/search",
		Q: v.Get("q"), Ref: strings.TrimSpace(v.Get("ref")), Paths: v.Get("type") == "path", Re: v.Get("mode") == "regexp",
		Fold: v.Get("case") == "insensitive"}
	found := q.searchAt(p.Ref)
	oid := q.at.Commit
	p.Repo = h.head(r, q, "tree", "")
	if !found {
		p.Error = "no branch, tag or commit named " + p.Ref
		if p.Ref == "" {
			p.Error = "this repository is empty"
		}
		h.render(w, r, http.StatusNotFound, "search", p)
		return
	}
	p.OID = oid
	if p.Q == "" {
		h.render(w, r, http.StatusOK, "search", p)
		return
	}
	args := url.Values{"q": {p.Q}}
	for _, k := range []string{"type", "mode", "case", "page"} {
		if s := v.Get(k); s != "" {
			args.Set(k, s)
		}
	}
	path := apiPath(q.owner, q.name, "search", oid) + "?" + args.Encode()
	if h.headOnly(w, r, q, path) {
		return
	}
	if _, err := getJSON(r.Context(), h.api, path, q.token, &p.Res); err != nil {
		if statusOf(err) != http.StatusBadRequest {
			h.fail(w, r, err, 0, "")
			return
		}
		// The API says what is wrong with the pattern.
		p.Error = apiMessage(err)
		h.render(w, r, http.StatusBadRequest, "search", p)
		return
	}
	p.Searched, p.Hits = true, len(p.Res.Hits)
	p.SkippedSomething = p.Res.SkippedBinary+p.Res.SkippedLarge > 0
	for _, hit := range p.Res.Hits {
		if p.Paths {
			p.PathHits = append(p.PathHits, searchLine{Href: q.link("blob", hit.Path), Segs: segments(hit.Path, hit.Ranges)})
			continue
		}
		if n := len(p.Groups); n == 0 || p.Groups[n-1].Path != hit.Path {
			p.Groups = append(p.Groups, searchGroup{Path: hit.Path, Href: q.link("blob", hit.Path)})
		}
		g := &p.Groups[len(p.Groups)-1]
		g.Lines = append(g.Lines, searchLine{N: hit.Line, Href: g.Href + "#L" + strconv.Itoa(hit.Line),
			Segs: segments(hit.Text, hit.Ranges), Clipped: hit.Clipped})
	}
	if p.Res.Next != "" {
		// Later pages search the same commit, whatever the ref does.
		next := url.Values{"q": {p.Q}, "ref": {oid}, "page": {p.Res.Next}}
		for _, k := range []string{"type", "mode", "case"} {
			if s := v.Get(k); s != "" {
				next.Set(k, s)
			}
		}
		p.Next = p.Action + "?" + next.Encode()
	}
	h.render(w, r, http.StatusOK, "search", p)
}
