package node_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

// TestReadAPIUnreachable: after its branch is deleted, a commit the
// store still holds is refused by git ("not our ref") and, alike, by
// every read-API endpoint and the web page: 404, answered exactly as a
// missing id is.
func TestReadAPIUnreachable(t *testing.T) {
	env := gitenv.New(t)
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/site")
	srv.Admin(t, "set-visibility", "alice/site", "public")
	wt := env.Scratch(t)
	main := env.Commit(t, wt, "first", map[string]string{"README.md": "# site\n"})
	env.Run(t, wt, "checkout", "-q", "-b", "topic")
	topic := env.Commit(t, wt, "topic", map[string]string{"secret.txt": "deleted with its branch\n"})
	url := srv.HTTPURL(tok, "alice/site")
	env.Run(t, wt, "push", "-q", url, "main", "topic")
	if resp, body := apiGet(t, srv.HTTPAddr, "/api/alice/site/commit/"+topic, ""); resp.StatusCode != 200 {
		t.Fatalf("commit of a branch: %d %s", resp.StatusCode, body)
	}
	env.Run(t, wt, "push", "-q", url, "--delete", "topic")

	clone := env.Scratch(t)
	if r := env.Fail(t, clone, "fetch", "-q", url, topic); !strings.Contains(r.String(), "not our ref") {
		t.Fatalf("git fetch of the deleted branch's commit: %s", r)
	}
	missing := strings.Repeat("ab", 20)
	paths := func(id string) []string {
		return []string{"/api/alice/site/commit/" + id, "/api/alice/site/tree/" + id, "/api/alice/site/blob/" + id + "/secret.txt",
			"/api/alice/site/raw/" + id + "/secret.txt", "/api/alice/site/log/" + id, "/api/alice/site/compare/" + main + "..." + id,
			"/api/alice/site/archive/" + id + ".tar.gz", "/alice/site/commit/" + id, "/alice/site/blob/" + id + "/secret.txt"}
	}
	for i, p := range paths(topic) {
		resp, body := apiGet(t, srv.HTTPAddr, p, "")
		mresp, mbody := apiGet(t, srv.HTTPAddr, paths(missing)[i], "")
		if resp.StatusCode != http.StatusNotFound || mresp.StatusCode != http.StatusNotFound ||
			strings.ReplaceAll(string(body), topic, missing) != string(mbody) {
			t.Errorf("%s: %d %.200s\nmissing id: %d %.200s", p, resp.StatusCode, body, mresp.StatusCode, mbody)
		}
		if strings.Contains(string(body), "deleted with its branch") {
			t.Errorf("%s shows the deleted branch's file", p)
		}
	}
	if resp, body := apiGet(t, srv.HTTPAddr, "/api/alice/site/commit/"+main, ""); resp.StatusCode != 200 {
		t.Errorf("commit of main: %d %s", resp.StatusCode, body)
	}
}
