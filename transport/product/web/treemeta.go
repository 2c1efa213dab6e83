package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// LastCommits is GET lastcommit's answer: each entry of a directory
// with the newest commit that changed it, where the API's budget
// reached.
type LastCommits struct {
	Entries []struct {
		Name   string `json:"name"`
		Commit string `json:"commit"`
	} `json:"entries"`
	Commits map[string]struct {
		Committer Person `json:"committer"`
		Subject   string `json:"subject"`
	} `json:"commits"`
	Truncated       bool   `json:"truncated"`
	TruncatedReason string `json:"truncated_reason"`
}

// lastView is an entry's last commit as the listing shows it.
type lastView struct {
	Subject, Href string
	When          When
}

// lastCommitBudget is the time the tree page lets the API look for its
// entries' last commits (timeout_ms): the listing is shown either way,
// with the commits found by then.
const lastCommitBudget = time.Second

// lastCommitWait bounds the whole call, past the API's own budget: an
// API tier that does not answer costs the page no more than this.
const lastCommitWait = lastCommitBudget + 2*time.Second

// dirsFirst orders a listing as forges do: directories (and submodules)
// first, then files, each in the API's (git's) order.
func dirsFirst(es []entryView) {
	slices.SortStableFunc(es, func(a, b entryView) int {
		return rankOf(a.Kind) - rankOf(b.Kind)
	})
}

func rankOf(kind string) int {
	if kind == "tree" || kind == "commit" {
		return 0
	}
	return 1
}

// addLastCommits asks the API for the last commit of each entry of p
// (the directory path at oid) within the page's budget and shows what it
// found. The listing does not depend on it: a failure, or a budget that
// found nothing, leaves the page without the column.
func (h *Handler) addLastCommits(r *http.Request, q *repoReq, p *treePage) {
	if r.Method == http.MethodHead || len(p.Entries) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), lastCommitWait)
	defer cancel()
	path := apiPath(q.owner, q.name, "lastcommit", p.OID, p.Path) + "?" +
		url.Values{"timeout_ms": {strconv.FormatInt(lastCommitBudget.Milliseconds(), 10)}}.Encode()
	var lc LastCommits
	if _, err := getJSON(ctx, h.api, path, q.token, &lc); err != nil {
		h.log.Info("web: tree shown without last commits", zap.String("repo", q.owner+"/"+q.name), zap.String("path", p.Path), zap.Error(err))
		return
	}
	byName := make(map[string]*lastView, len(lc.Entries))
	for _, e := range lc.Entries {
		if c, ok := lc.Commits[e.Commit]; ok {
			byName[e.Name] = &lastView{Subject: c.Subject, Href: q.href("commit", e.Commit, ""), When: c.Committer.Time}
		}
	}
	for i := range p.Entries {
		p.Entries[i].Last = byName[p.Entries[i].Name]
	}
	p.HasLast = len(byName) > 0
	if lc.Truncated {
		p.LastNote = fmt.Sprintf("Last commits found for %d of %d entries: %s.", len(byName), len(p.Entries), lc.TruncatedReason)
	}
}
