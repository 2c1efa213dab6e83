package web

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
)

// The branches and tags pages. Newest first needs each ref's date (its
// commit's, all in one read, and an annotated tag's own, a read each),
// so the order is bounded: with at most maxDated branches
// (tags) every one is read and the list is sorted by date; past that
// the list is sorted by name, says so, and only the page's refs are
// read. A repository with 10,000 branches costs a page's reads, not
// 10,000. Every read is an id-addressed API answer, cached like the rest.

// refsPerPage is the page size of the branches and tags pages.
const refsPerPage = 30

// maxDated is the most refs a page reads to sort by date.
const maxDated = 100

// aheadBehind is GET ahead-behind's answer for several heads: each
// one's counts against the base, in the order asked.
type aheadBehind struct {
	Heads []struct {
		Ahead    int  `json:"ahead"`
		Behind   int  `json:"behind"`
		Complete bool `json:"complete"`
	} `json:"heads"`
}

// tagObject is GET tag's answer: an annotated tag.
type tagObject struct {
	Object  string  `json:"object"`
	Type    string  `json:"type"`
	Tagger  *Person `json:"tagger"`
	Message string  `json:"message"`
}

// refRow is one branch or tag of a list.
type refRow struct {
	Ref     Ref
	Name    string
	Href    string // the tree on it
	Commit  *commitView
	Date    When // the commit's, or an annotated tag's own
	Default bool
	// Ahead and Behind count against the default branch ("" on it); a
	// walk cut short shows "N+".
	Ahead, Behind string
	Tag           *tagObject // an annotated tag
	read          bool       // its date and details were read (readRows)
}

type refsPage struct {
	page
	Kind     string        // "branches" or "tags"
	RowsHTML template.HTML // refRowsHTML
	Total    int
	ByName   bool // too many to sort by date
	MaxDated int
	Prev     string
	Next     string
	PageNo   int
	Pages    int
}

func (h *Handler) branches(w http.ResponseWriter, r *http.Request) { h.refList(w, r, "branches") }
func (h *Handler) tags(w http.ResponseWriter, r *http.Request)     { h.refList(w, r, "tags") }

// refList is the branches or tags page (kind).
func (h *Handler) refList(w http.ResponseWriter, r *http.Request, kind string) {
	q, ok := h.begin(w, r)
	if !ok {
		return
	}
	pageNo := 1
	if s := r.URL.Query().Get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			h.fail(w, r, nil, http.StatusBadRequest, "page is not a page number")
			return
		}
		pageNo = n
	}
	want := "branch"
	if kind == "tags" {
		want = "tag"
	}
	def, _ := q.headRef()
	var rows []refRow
	for _, ref := range q.refs {
		if ref.Kind == want {
			rows = append(rows, refRow{Ref: ref, Name: ref.Short(), Href: q.linkRef("tree", ref, ""), Default: ref.Name == def.Name})
		}
	}
	p := refsPage{Kind: kind, Total: len(rows), MaxDated: maxDated, PageNo: pageNo,
		Pages: max(1, (len(rows)+refsPerPage-1)/refsPerPage)}
	if pageNo > p.Pages {
		h.fail(w, r, nil, http.StatusNotFound, "no such page")
		return
	}
	p.ByName = len(rows) > maxDated
	if !p.ByName {
		if err := h.readRows(r.Context(), q, rows, Ref{}); err != nil {
			h.fail(w, r, err, 0, "")
			return
		}
	}
	sortRows(rows, kind, p.ByName)
	rows = rows[(pageNo-1)*refsPerPage : min(len(rows), pageNo*refsPerPage)]
	if kind != "branches" {
		def = Ref{}
	}
	if err := h.readRows(r.Context(), q, rows, def); err != nil {
		h.fail(w, r, err, 0, "")
		return
	}
	p.RowsHTML = refRowsHTML(rows, kind == "branches")
	self := q.base() + "/" + kind
	if pageNo > 1 {
		p.Prev = self + "?" + url.Values{"page": {strconv.Itoa(pageNo - 1)}}.Encode()
	}
	if pageNo < p.Pages {
		p.Next = self + "?" + url.Values{"page": {strconv.Itoa(pageNo + 1)}}.Encode()
	}
	title := "Branches"
	if kind == "tags" {
		title = "Tags"
	}
	if hr, ok := q.headRef(); ok {
		q.at = at{Ref: hr, Commit: hr.Commit()}
	}
	p.page = page{Title: title + " · " + q.owner + "/" + q.name, Viewer: viewer(r), Repo: h.head(r, q, "tree", "")}
	h.render(w, r, http.StatusOK, "refs", p)
}

// sortRows orders a list: newest first when dated (ties and undated by
// name), else by name (tags descending, so later versions lead).
func sortRows(rows []refRow, kind string, byName bool) {
	slices.SortStableFunc(rows, func(a, b refRow) int {
		if !byName {
			if c := b.Date.Compare(a.Date.Time); c != 0 {
				return c
			}
		}
		if kind == "tags" {
			return strings.Compare(b.Name, a.Name)
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// readsInFlight bounds the tag reads one list page makes at once.
const readsInFlight = 4

// commitsPerRead is the most ids one commits read asks for: the API's
// limit (api.MaxCommits), no fewer than maxDated, so a page is one read.
const commitsPerRead = 100

// readRows reads the details of the rows not read yet: each annotated
// tag's object (a few at a time), then every row's commit in one
// commits answer, then, with a default branch def, every other branch's
// divergence from it.
func (h *Handler) readRows(ctx context.Context, q *repoReq, rows []refRow, def Ref) error {
	var todo []*refRow
	for i := range rows {
		if r := &rows[i]; !r.read {
			r.read = true
			todo = append(todo, r)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readsInFlight)
	for _, row := range todo {
		if row.Ref.Peeled != "" {
			g.Go(func() error { return h.readTag(gctx, q, row) })
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for len(todo) > 0 {
		n := min(len(todo), commitsPerRead)
		if err := h.readCommits(ctx, q, todo[:n]); err != nil {
			return err
		}
		todo = todo[n:]
	}
	if def.Name == "" {
		return nil
	}
	return h.divergence(ctx, q, def, rows)
}

// readTag reads an annotated tag's object; one gone or not a tag shows
// without it.
func (h *Handler) readTag(ctx context.Context, q *repoReq, row *refRow) error {
	var t tagObject
	if _, err := getJSON(ctx, h.api, apiPath(q.owner, q.name, "tag", row.Ref.OID), q.token, &t); err != nil {
		return tolerate(err)
	}
	row.Tag = &t
	if t.Tagger != nil {
		row.Date = t.Tagger.Time
	}
	return nil
}

// readCommits reads the rows' commits in one answer; a ref whose object
// is gone or not a commit shows without one. When that answer is refused
// as a whole (an id no ref reaches any more: a branch deleted since the
// refs were read; or a read API of the release before, which has no
// commits answer: 400), each row's commit is read alone, as that release
// did.
func (h *Handler) readCommits(ctx context.Context, q *repoReq, rows []*refRow) error {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.Ref.Commit()
	}
	var cs []*Commit
	_, err := getJSON(ctx, h.api, apiPath(q.owner, q.name, "commits", strings.Join(ids, ",")), q.token, &cs)
	switch code := statusOf(err); {
	case err == nil:
	case code == http.StatusNotFound, code == http.StatusBadRequest:
		return h.readCommitsOneByOne(ctx, q, rows)
	default:
		return tolerate(err)
	}
	if len(cs) != len(rows) {
		return fmt.Errorf("commits answered %d commits for %d", len(cs), len(rows))
	}
	for i, c := range cs {
		rows[i].setCommit(q, c)
	}
	return nil
}

// readCommitsOneByOne reads each row's commit by a log of one, a few at
// a time.
func (h *Handler) readCommitsOneByOne(ctx context.Context, q *repoReq, rows []*refRow) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readsInFlight)
	for _, row := range rows {
		g.Go(func() error {
			var cs []*Commit
			if _, err := getJSON(gctx, h.api, apiPath(q.owner, q.name, "log", row.Ref.Commit())+"?n=1", q.token, &cs); err != nil {
				return tolerate(err)
			}
			if len(cs) == 1 {
				row.setCommit(q, cs[0])
			}
			return nil
		})
	}
	return g.Wait()
}

// setCommit shows c (nil: none) as the row's commit, its date the row's
// unless a tag gave one.
func (row *refRow) setCommit(q *repoReq, c *Commit) {
	if c == nil {
		return
	}
	row.Commit = &commitView{Commit: *c, Href: q.href("commit", c.OID, "")}
	if row.Date.IsZero() {
		row.Date = c.Committer.Time
	}
}

// divergence fills the ahead and behind counts against def of the rows
// with a commit, but def's own: one ahead-behind answer, one walk of
// history for them all.
func (h *Handler) divergence(ctx context.Context, q *repoReq, def Ref, rows []refRow) error {
	var of []*refRow
	var heads []string
	for i := range rows {
		if r := &rows[i]; !r.Default && r.Commit != nil {
			of, heads = append(of, r), append(heads, r.Ref.Commit())
		}
	}
	if len(of) == 0 {
		return nil
	}
	var ab aheadBehind
	if _, err := getJSON(ctx, h.api, apiPath(q.owner, q.name, "ahead-behind", def.Commit()+"..."+strings.Join(heads, ",")), q.token, &ab); err != nil {
		return tolerate(err)
	}
	if len(ab.Heads) != len(of) {
		return fmt.Errorf("ahead-behind answered %d heads for %d", len(ab.Heads), len(of))
	}
	for i, c := range ab.Heads {
		r := of[i]
		r.Ahead, r.Behind = strconv.Itoa(c.Ahead), strconv.Itoa(c.Behind)
		if !c.Complete {
			r.Ahead += "+"
			r.Behind += "+"
		}
	}
	return nil
}

// tolerate drops the failures that concern one ref (its object is not
// a commit, or is gone since the refs were read); the rest fail the page.
func tolerate(err error) error {
	switch statusOf(err) {
	case http.StatusNotFound, http.StatusUnprocessableEntity:
		return nil
	}
	return err
}

// repoSummary is the repository page's line: branch and tag counts and
// the default branch's latest commit.
type repoSummary struct {
	Branches, Tags         int
	BranchesHref, TagsHref string
	Latest                 *commitView
}

func (h *Handler) summary(ctx context.Context, q *repoReq) (*repoSummary, error) {
	s := &repoSummary{BranchesHref: q.base() + "/branches", TagsHref: q.base() + "/tags"}
	for _, r := range q.refs {
		switch r.Kind {
		case "branch":
			s.Branches++
		case "tag":
			s.Tags++
		}
	}
	rows := []refRow{{Ref: q.at.Ref}}
	if err := h.readRows(ctx, q, rows, Ref{}); err != nil {
		return nil, err
	}
	s.Latest = rows[0].Commit
	return s, nil
}
