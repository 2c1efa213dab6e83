package web

import (
	"html/template"
	"net/http"
	"strconv"
	"strings"
)

// BlameAnswer is GET blame's answer (docs/read-api.md#blame).
type BlameAnswer struct {
	Commit  string                 `json:"commit"`
	Path    string                 `json:"path"`
	Lines   int                    `json:"lines"`
	Runs    []BlameRun             `json:"runs"`
	Commits map[string]BlameCommit `json:"commits"`
	// Truncated: the walk stopped early (TruncatedReason says why); the
	// first lines' commit is then the oldest one reached.
	Truncated       bool   `json:"truncated"`
	TruncatedReason string `json:"truncated_reason,omitempty"`
}

// BlameRun is consecutive lines one commit last changed.
type BlameRun struct {
	Commit string `json:"commit"`
	Start  int    `json:"start"` // from 1
	Count  int    `json:"count"`
}

// BlameCommit describes a commit of a blame.
type BlameCommit struct {
	Path    string `json:"path"`
	Author  Person `json:"author"`
	Summary string `json:"summary"`
}

type blamePage struct {
	page
	Path               string
	Crumbs             []crumb
	File, Raw, History string
	Lines              int
	Truncated          bool
	TruncatedReason    string
	ContentLost        bool
	// Rows is bulkMark, standing for the table's runs (blameRowsHTML),
	// written around the template as a file's source is.
	Rows template.HTML
}

// blameRunView is a run as the page shows it: its commit once, then its
// lines.
type blameRunView struct {
	OID, Href    string
	C            BlameCommit
	Start, Count int
}

// blame is the blame view of /{owner}/{name}/blame/{ref}/{path...}, the
// ref a branch, tag or commit id (refs.go).
func (h *Handler) blame(w http.ResponseWriter, r *http.Request) {
	q, ok := h.beginAt(w, r)
	if !ok {
		return
	}
	h.showBlame(w, r, q, q.at.Commit, q.at.Path)
}

// showBlame renders the blame of path at commit oid (a full id, resolved from the URL): each
// run of lines under its commit, from the API's blame and the file's
// text from its blob answer.
func (h *Handler) showBlame(w http.ResponseWriter, r *http.Request, q *repoReq, oid, path string) {
	apiBlame := apiPath(q.owner, q.name, "blame", oid, path)
	if h.headOnly(w, r, q, apiBlame) {
		return
	}
	var a BlameAnswer
	if _, err := getJSON(r.Context(), h.api, apiBlame, q.token, &a); err != nil {
		h.fail(w, r, err, 0, "")
		return
	}
	var b Blob
	if _, err := getJSON(r.Context(), h.api, apiPath(q.owner, q.name, "blob", oid, path), q.token, &b); err != nil {
		h.fail(w, r, err, 0, "")
		return
	}
	p := blamePage{page: page{Title: "Blame · " + path + " · " + q.owner + "/" + q.name, Viewer: viewer(r), Repo: h.head(r, q, "blame", path)},
		Path: path, Crumbs: q.crumbs(path), File: q.link("blob", path), Raw: q.link("raw", path),
		History: q.link("commits", path), Lines: a.Lines, Truncated: a.Truncated, TruncatedReason: a.TruncatedReason,
		Rows: bulkMark}
	text := strings.SplitAfter(b.Content, "\n")
	// The blob answer is capped and base64 for what is not UTF-8: lines
	// it cannot give are shown empty, and the page says so.
	if b.Binary {
		text = nil
	}
	p.ContentLost = b.Binary || b.Truncated
	runs := make([]blameRunView, len(a.Runs))
	for i, run := range a.Runs {
		runs[i] = blameRunView{OID: run.Commit, Href: q.href("commit", run.Commit, ""), C: a.Commits[run.Commit], Start: run.Start, Count: run.Count}
	}
	// A line's markup is about 100 bytes besides its text; a run's head
	// about 300 besides its names.
	rows := blameRowsHTML(codeBuf(2*len(b.Content)+100*a.Lines+300*len(runs)), runs, text, path)
	h.renderAround(w, r, http.StatusOK, "blame", p, rows)
	releaseCode(rows)
}

// blameRowsHTML appends to b the blame table's runs as blame.html's range
// wrote them (TestHandHTMLAsTemplate): a template action per line cost
// half the view. text is the file's lines, each with its "\n"; a line
// past its end is shown empty.
func blameRowsHTML(b []byte, runs []blameRunView, text []string, path string) []byte {
	var num [20]byte
	for _, run := range runs {
		b = append(b, "<tbody class=\"run\">\n<tr class=\"who\"><td colspan=\"2\"><a href=\""...)
		b = appendURLAttr(b, run.Href)
		b = append(b, `"><code>`...)
		b = appendText(b, shortOID(run.OID))
		b = append(b, `</code></a> <b class="author">`...)
		b = appendText(b, run.C.Author.Name)
		b = append(b, `</b> <span class="muted">`...)
		b = appendText(b, formatWhen(run.C.Author.Time))
		b = append(b, `</span> <span class="summary">`...)
		b = appendText(b, run.C.Summary)
		b = append(b, `</span>`...)
		if run.C.Path != "" && run.C.Path != path {
			b = append(b, ` <span class="muted">(as `...)
			b = appendText(b, run.C.Path)
			b = append(b, `)</span>`...)
		}
		b = append(b, "</td></tr>\n"...)
		for n := run.Start; n < run.Start+run.Count; n++ {
			ln := strconv.AppendInt(num[:0], int64(n), 10)
			b = append(b, `<tr><td class="ln"><a id="L`...)
			b = append(b, ln...)
			b = append(b, `" href="#L`...)
			b = append(b, ln...)
			b = append(b, `">`...)
			b = append(b, ln...)
			b = append(b, `</a></td><td class="code">`...)
			if n >= 1 && n <= len(text) {
				b = appendText(b, strings.TrimSuffix(text[n-1], "\n"))
			}
			b = append(b, "</td></tr>\n"...)
		}
		b = append(b, `</tbody>`...)
	}
	return b
}
