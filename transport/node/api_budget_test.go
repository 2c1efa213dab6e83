package node_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/gitrun"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/product/api"
	"github.com/rgit/rgit/transport/service/admission"
)

// pushTreeBomb pushes to repo (made public) a commit whose tree nests 6
// levels of 10 subtrees, a million paths in a few kilobytes, on top of a
// commit with a README. It returns both commits.
func pushTreeBomb(t *testing.T, srv *gitenv.Server, env *gitenv.Env, tok, repo string) (base, bomb string) {
	t.Helper()
	srv.CreateRepo(t, repo)
	work := env.Scratch(t)
	base = env.Commit(t, work, "base", map[string]string{"README": "hi\n"})
	g := gitrun.New(t, work, gitrun.Env{Home: env.Home})
	bomb = g.Run("commit-tree", "-p", base, "-m", "a million paths", g.TreeBomb(6, 10, "boom\n"))
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, repo), bomb+":refs/heads/main")
	srv.Admin(t, "set-visibility", repo, "public")
	return base, bomb
}

// visited is the node's count of tree entries the read API visited for
// endpoint, from /metrics.
func visited(t *testing.T, srv *gitenv.Server, endpoint string) float64 {
	t.Helper()
	return metric(t, srv, `rgit_api_tree_entries_visited_total{endpoint="`+endpoint+`"}`)
}

// TestReadAPITreeBomb: an anonymous client asks every read-API route and
// the web page about a pushed tree of a million paths. Each answers at
// once with a refusal naming the limit and its variable (archives, before
// their first byte) or an answer that says it is cut short (diffs,
// searches); path walks and logs answer in full. The entries each answer visits, as the
// node counts them, stay within the budget, and a HEAD request visits
// none.
func TestReadAPITreeBomb(t *testing.T) {
	env := gitenv.New(t)
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	tok := srv.AddToken(t, "alice")
	base, bomb := pushTreeBomb(t, srv, env, tok, "alice/pub")
	apiBase := "/api/alice/pub/"
	requests := map[string]int{}
	ask := func(method, path string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+srv.HTTPAddr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	type diff struct {
		Files []struct {
			Path   string
			Status string
		}
		Diff            string
		Truncated       bool
		TruncatedReason string `json:"truncated_reason"`
	}
	cutShort := func(path string) {
		t.Helper()
		resp, body := ask("GET", path)
		var d diff
		if resp.StatusCode != 200 || json.Unmarshal(body, &d) != nil {
			t.Fatalf("GET %s: %d %.300s", path, resp.StatusCode, body)
		}
		if !d.Truncated || !strings.Contains(d.TruncatedReason, "set RGIT_API_MAX_DIFF_FILES") || len(d.Files) != api.DefaultMaxDiffFiles {
			t.Errorf("GET %s: truncated %v (%q), %d files", path, d.Truncated, d.TruncatedReason, len(d.Files))
		}
		if len(body) > 8<<20 {
			t.Errorf("GET %s: %d bytes", path, len(body))
		}
	}

	t.Run("commit", func(t *testing.T) {
		cutShort(apiBase + "commit/" + bomb)
		requests["commit"]++
	})
	t.Run("compare", func(t *testing.T) {
		cutShort(apiBase + "compare/" + base + "..." + bomb)
		requests["compare"]++
	})
	for _, format := range []string{"tar.gz", "zip"} {
		t.Run("archive "+format, func(t *testing.T) {
			resp, body := ask("GET", apiBase+"archive/"+bomb+"."+format)
			var e struct{ Error string }
			if resp.StatusCode != http.StatusUnprocessableEntity || json.Unmarshal(body, &e) != nil ||
				e.Error != fmt.Sprintf("archive has too many entries (limit %d, set RGIT_API_MAX_ENTRIES)", api.DefaultMaxEntries) {
				t.Errorf("archive: %d %.300s", resp.StatusCode, body)
			}
			requests["archive"]++
		})
	}
	t.Run("tree walks", func(t *testing.T) {
		var entries []struct{ Name, Kind string }
		resp, body := ask("GET", apiBase+"tree/"+bomb+"/0/0/0/0/0")
		if resp.StatusCode != 200 || json.Unmarshal(body, &entries) != nil || len(entries) != 10 || entries[9].Kind != "blob" {
			t.Errorf("tree: %d %.300s", resp.StatusCode, body)
		}
		resp, body = ask("GET", apiBase+"blob/"+bomb+"/9/9/9/9/9/9")
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"content":"boom\n"`) {
			t.Errorf("blob: %d %.300s", resp.StatusCode, body)
		}
		requests["tree"]++
		requests["blob"]++
	})
	t.Run("log with a path", func(t *testing.T) {
		var commits []struct{ OID string }
		resp, body := ask("GET", apiBase+"log/"+bomb+"?path=0/0/0/0/0/0")
		if resp.StatusCode != 200 || json.Unmarshal(body, &commits) != nil || len(commits) != 1 || commits[0].OID != bomb {
			t.Errorf("log: %d %.300s", resp.StatusCode, body)
		}
		requests["log"]++
	})
	t.Run("search", func(t *testing.T) {
		var a struct {
			Files         int
			BlobsRead     int    `json:"blobs_read"`
			Partial       bool   `json:"partial"`
			StoppedReason string `json:"stopped_reason"`
			Next          string `json:"next"`
		}
		for _, typ := range []string{"text", "path"} {
			resp, body := ask("GET", apiBase+"search/"+bomb+"?q=absent&type="+typ)
			if resp.StatusCode != 200 || json.Unmarshal(body, &a) != nil || !a.Partial || a.Files != api.DefaultMaxSearchFiles ||
				a.BlobsRead > 1 || !strings.Contains(a.StoppedReason, "set RGIT_API_SEARCH_MAX_FILES") || a.Next == "" {
				t.Errorf("search type=%s: %d %.300s", typ, resp.StatusCode, body)
			}
			requests["search"]++
		}
		resp, body := ask("GET", "/alice/pub/search?q=absent&ref="+bomb)
		if resp.StatusCode != 200 || !strings.Contains(string(body), `id="search-partial"`) || !strings.Contains(string(body), "RGIT_API_SEARCH_MAX_FILES") {
			t.Errorf("search page: %d %.500s", resp.StatusCode, body)
		}
		requests["search"]++
	})
	t.Run("web commit page", func(t *testing.T) {
		resp, body := ask("GET", "/alice/pub/commit/"+bomb)
		if resp.StatusCode != 200 || !strings.Contains(string(body), `id="truncated"`) || !strings.Contains(string(body), "RGIT_API_MAX_DIFF_FILES") {
			t.Errorf("commit page: %d %.500s", resp.StatusCode, body)
		}
		resp, body = ask("GET", "/alice/pub/archive/"+bomb+".zip")
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "RGIT_API_MAX_ENTRIES") {
			t.Errorf("archive link: %d %.500s", resp.StatusCode, body)
		}
		requests["commit"]++
		requests["archive"]++
	})

	// Each answer visits at most the budget; a diff about its files and
	// their directories, an archive its six distinct trees.
	for endpoint, most := range map[string]float64{"commit": 1.2 * api.DefaultMaxDiffFiles, "compare": 1.2 * api.DefaultMaxDiffFiles,
		"archive": 60, "tree": 15, "blob": 60, "log": 12, "search": 1.2 * api.DefaultMaxSearchFiles} {
		n := visited(t, srv, endpoint)
		if per := n / float64(requests[endpoint]); per == 0 || per > most || per > api.DefaultMaxEntries {
			t.Errorf("%s: %.0f entries visited over %d answers, want at most %.0f each", endpoint, n, requests[endpoint], most)
		}
	}

	t.Run("HEAD", func(t *testing.T) {
		before := visited(t, srv, "commit") + visited(t, srv, "compare") + visited(t, srv, "log")
		for _, path := range []string{apiBase + "commit/" + bomb, apiBase + "compare/" + base + "..." + bomb,
			apiBase + "log/" + bomb + "?path=0/0/0/0/0/0", "/alice/pub/commit/" + bomb} {
			if resp, _ := ask("HEAD", path); resp.StatusCode != 200 {
				t.Errorf("HEAD %s: %d", path, resp.StatusCode)
			}
		}
		if resp, _ := ask("HEAD", apiBase+"archive/"+bomb+".tar.gz"); resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("HEAD archive: %d", resp.StatusCode)
		}
		if resp, _ := ask("HEAD", apiBase+"commit/"+strings.Repeat("0", 40)); resp.StatusCode != http.StatusNotFound {
			t.Errorf("HEAD of a missing commit: %d", resp.StatusCode)
		}
		if after := visited(t, srv, "commit") + visited(t, srv, "compare") + visited(t, srv, "log"); after != before {
			t.Errorf("HEAD requests visited %.0f tree entries", after-before)
		}
	})
}

// TestReadAPIAdmission: expensive answers are admitted like pack work.
// With the node's memory budget held by a clone, a commit diff is
// refused at once with 503 and Retry-After while a tree listing still
// answers; with RGIT_API_MAX_ACTIVE=1 and one archive being streamed to a
// client that does not read, a second archive waits for the slot and is
// refused the same way. Both answer once the work in the way is done.
func TestReadAPIAdmission(t *testing.T) {
	env := gitenv.New(t)
	adm := admission.New(admission.Limits{Memory: 100 << 20, Work: 60 << 20, MaxActive: 100}, nil)
	srv := gitenv.StartServerOpts(t, gitenv.FileStore(t), []node.Option{node.WithAdmission(adm)}, "RGIT_API_MAX_ACTIVE=1")
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/busy")
	work := env.Scratch(t)
	// An archive larger than the socket buffers: its answer stays in
	// progress while the client reads nothing.
	head := env.Commit(t, work, "big", map[string]string{"noise.bin": incompressible(16<<20, 3)})
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/busy"), "main")
	base := "/api/alice/busy/"
	busy := func(path string) {
		t.Helper()
		resp, body := apiGet(t, srv.HTTPAddr, path, tok)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s: %d, Retry-After %q: %.200s", path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	ok := func(path string) {
		t.Helper()
		resp, body := apiGet(t, srv.HTTPAddr, path, tok)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %.200s", path, resp.StatusCode, body)
		}
	}

	hold, admitted := adm.Reserve(admission.Fetch, 60<<20)
	if !admitted {
		t.Fatal("an idle node refused work")
	}
	busy(base + "commit/" + head)
	ok(base + "tree/" + head)
	hold()
	ok(base + "commit/" + head)

	req, err := http.NewRequest("GET", "http://"+srv.HTTPAddr+base+"archive/"+head+".tar.gz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	first, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if first.StatusCode != http.StatusOK {
		t.Fatalf("first archive: %d", first.StatusCode)
	}
	// The first archive holds the only slot until its client reads it.
	busy(base + "archive/" + head + ".zip")
	n, err := io.Copy(io.Discard, first.Body)
	first.Body.Close()
	if err != nil || n < 16<<20 {
		t.Fatalf("first archive: %d bytes, %v", n, err)
	}
	ok(base + "archive/" + head + ".zip")
}
