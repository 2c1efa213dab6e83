package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// stubAPI answers the read API's JSON contract from canned data, with the
// access rules the real API applies: tokens "alice-token" and
// "bob-token"; alice/private is private (401 anonymous, 404 to bob,
// exactly as a missing repository), alice/demo is public and full of
// script-injection attempts.
type stubAPI struct {
	mux *http.ServeMux
}

const (
	oidC1   = "1111111111111111111111111111111111111111"
	oidC2   = "2222222222222222222222222222222222222222"
	oidBlob = "3333333333333333333333333333333333333333"
	// hostile is what repository content tries to smuggle into the page.
	hostile = `<script>document.title="pwned"</script><img src=x onerror=alert(1)>`
)

func newStubAPI() *stubAPI {
	s := &stubAPI{mux: http.NewServeMux()}
	owners := map[string]string{"alice-token": "alice", "bob-token": "bob"}
	repos := map[string]bool{"alice/demo": true, "alice/private": false}
	s.mux.HandleFunc("GET /api/repos", func(w http.ResponseWriter, r *http.Request) {
		who, ok := caller(r, owners)
		if !ok {
			writeJSONError(w, 401, "invalid token")
			return
		}
		list := RepoList{Viewer: who, Repos: []RepoItem{{Owner: "alice", Name: "demo", Public: true}}}
		if who == "alice" {
			list.Repos = append(list.Repos, RepoItem{Owner: "alice", Name: "private"})
		}
		writeJSON(w, list)
	})
	s.mux.HandleFunc("GET /api/{owner}/{name}/{op}/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		who, ok := caller(r, owners)
		if !ok {
			writeJSONError(w, 401, "invalid token")
			return
		}
		full := r.PathValue("owner") + "/" + r.PathValue("name")
		public, exists := repos[full]
		if !exists || !public && who != r.PathValue("owner") {
			if who == "" {
				writeJSONError(w, 401, "authentication required")
				return
			}
			writeJSONError(w, 404, "not found")
			return
		}
		s.answer(w, r, r.PathValue("op"), r.PathValue("rest"))
	})
	s.mux.HandleFunc("GET /api/{owner}/{name}/refs", func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path += "/x"
		s.mux.ServeHTTP(w, r2)
	})
	return s
}

func (s *stubAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func caller(r *http.Request, owners map[string]string) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", true
	}
	who, ok := owners[strings.TrimPrefix(h, "Bearer ")]
	return who, ok
}

func (s *stubAPI) answer(w http.ResponseWriter, r *http.Request, op, rest string) {
	person := Person{Name: "Mallory " + hostile, Email: "m@example.com", Time: When{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
	c1 := Commit{OID: oidC1, Author: person, Committer: person, Message: "first " + hostile + "\n\nbody " + hostile}
	c2 := Commit{OID: oidC2, Parents: []string{oidC1}, Author: person, Committer: person, Message: "second"}
	switch {
	case op == "refs" || op == "refs/x":
		writeJSON(w, []Ref{
			{Name: "HEAD", OID: oidC2, Target: "refs/heads/main"},
			{Name: "refs/heads/main", OID: oidC2, Kind: "branch"},
			{Name: "refs/heads/" + hostile, OID: oidC1, Kind: "branch"},
			{Name: "refs/tags/v1", OID: "4444444444444444444444444444444444444444", Peeled: oidC1, Kind: "tag"},
		})
	case op == "tree" && (rest == oidC2 || rest == oidC1):
		writeJSON(w, []Entry{
			{Name: "README.md", Kind: "blob", Mode: "100644", OID: oidBlob, Size: 10},
			{Name: hostile + ".go", Kind: "blob", Mode: "100644", OID: oidBlob, Size: 10},
			{Name: "src", Kind: "tree", Mode: "040000", OID: oidBlob},
			{Name: "vendor", Kind: "commit", Mode: "160000", OID: oidBlob},
		})
	case op == "tree" && strings.HasSuffix(rest, "/src"):
		writeJSON(w, []Entry{{Name: "main.go", Kind: "blob", Mode: "100644", OID: oidBlob, Size: 30}})
	case op == "blob" && strings.HasSuffix(rest, "/README.md"):
		writeJSON(w, Blob{OID: oidBlob, Size: 10, Content: "# Hello " + hostile + "\n\n[x](javascript:alert(1))\n\n" + hostile + "\n"})
	case op == "blob" && rest == oidC2+"/src/main.go":
		writeJSON(w, Blob{OID: oidBlob, Size: 30, Content: "package main\n\n// " + hostile + "\nfunc main() {}\n"})
	case op == "raw":
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(hostile))
	case op == "log":
		if rest == oidC2 {
			q := r.URL.Query()
			w.Header().Set("Link", "</api/alice/demo/log/"+oidC1+"?"+q.Encode()+`>; rel="next"`)
			writeJSON(w, []Commit{c2})
			return
		}
		writeJSON(w, []Commit{c1})
	case op == "commits":
		var cs []*Commit
		for id := range strings.SplitSeq(rest, ",") {
			switch id {
			case oidC1:
				cs = append(cs, &c1)
			case oidC2:
				cs = append(cs, &c2)
			default:
				cs = append(cs, nil)
			}
		}
		writeJSON(w, cs)
	case op == "commit" && rest == oidC1:
		writeJSON(w, CommitDetail{Commit: c1, Files: []FileChange{{Path: hostile, Status: "added", Additions: 1}},
			Diff: "diff --git a/" + hostile + " b/" + hostile + "\nnew file mode 100644\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+" + hostile + "\n"})
	case op == "compare":
		writeJSON(w, Comparison{Base: oidC1, Head: oidC2, MergeBase: oidC1, Ahead: 1, Commits: []Commit{c2},
			Diff: "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-old\n+new\n"})
	default:
		writeJSONError(w, 404, "not found")
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
