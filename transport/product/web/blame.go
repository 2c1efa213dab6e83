package web

import (
	"net/http"
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
	Runs               []blameRunView
	Truncated          bool
	TruncatedReason    string
	ContentLost        bool
}

// blameRunView is a run as the page shows it: its commit once, then its
// lines.
type blameRunView struct {
	OID, Href string
	C         BlameCommit
	Lines     []blameLine
}

type blameLine struct {
	N    int
	Text string
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
		History: q.link("commits", path), Lines: a.Lines, Truncated: a.Truncated, TruncatedReason: a.TruncatedReason}
	text := strings.SplitAfter(b.Content, "\n")
	// The blob answer is capped and base64 for what is not UTF-8: lines
	// it cannot give are shown empty, and the page says so.
	if b.Binary {
		text = nil
	}
	p.ContentLost = b.Binary || b.Truncated
	for _, run := range a.Runs {
		v := blameRunView{OID: run.Commit, Href: q.href("commit", run.Commit, ""), C: a.Commits[run.Commit]}
		for n := run.Start; n < run.Start+run.Count; n++ {
			l := blameLine{N: n}
			if n-1 < len(text) {
				l.Text = strings.TrimSuffix(text[n-1], "\n")
			}
			v.Lines = append(v.Lines, l)
		}
		p.Runs = append(p.Runs, v)
	}
	h.render(w, r, http.StatusOK, "blame", p)
}
