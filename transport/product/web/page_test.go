package web_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// get fetches path from the site's page as the holder of token ("":
// anonymous) without following redirects.
func (s *site) get(t *testing.T, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.AddCookie(&http.Cookie{Name: "rgit_token", Value: token})
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPageOverReadAPI drives the page over the real read API, without a
// browser: empty repositories, path filters, hostile paths and ids.
func TestPageOverReadAPI(t *testing.T) {
	s := newSite(t)
	s.srv.CreateRepo(t, "alice/empty")
	head := strings.TrimSpace(s.env.Run(t, "", "ls-remote", s.srv.HTTPURL(s.aliceToken, "alice/hostile"), "refs/heads/main"))
	head, _, _ = strings.Cut(head, "\t")
	blob := strings.TrimSpace(s.env.Run(t, "", "ls-remote", s.srv.HTTPURL(s.aliceToken, "alice/hostile"), "refs/tags/v1"))
	tag, _, _ := strings.Cut(blob, "\t")

	for _, tc := range []struct {
		path, token string
		status      int
		want        string
	}{
		{"/alice/empty", s.aliceToken, 200, `id="empty"`},
		{"/alice/empty", s.bobToken, 404, "not found"},
		{"/alice/secret", "", 404, "sign in to see private repositories"},
		{"/alice/secret", s.aliceToken, 200, "secret.txt"},
		{"/alice/hostile/commits/" + head + "?path=src/main.go", "", 200, "first &lt;script&gt;"},
		{"/alice/hostile/tree/" + head + "/src", "", 200, `id="history"`},
		{"/alice/hostile/compare?base=v1&head=main", "", 200, "0 behind"},
		{"/alice/hostile/compare?base=nope&head=main", "", 404, "no branch, tag or commit named nope"},
		// Hostile paths and ids: 4xx pages, never a 500.
		{"/alice/hostile/tree/" + head + "/no/such/dir", "", 404, "not found"},
		{"/alice/hostile/tree/" + head + "/src/main.go", "", 404, ""},
		// A directory's blob URL (a Markdown link without the "/")
		// goes to its tree.
		{"/alice/hostile/blob/" + head + "/src", "", 302, ""},
		{"/alice/hostile/tree/" + head + "/%2e%2e/x", "", 0, ""},
		{"/alice/hostile/tree/" + head + "/a%5cb", "", 0, ""},
		{"/alice/hostile/tree/" + strings.Repeat("0", 40), "", 404, ""},
		{"/alice/hostile/commit/" + tag, "", 200, `<li class="current"><a href="/alice/hostile/commit/v1">tag: v1</a>`},
		{"/alice/hostile/raw/" + head + "/src/nothing", "", 404, ""},
		{"/alice/hostile/archive/" + head + ".rar", "", 404, ""},
		{"/alice/hostile/blame/" + head + "/src/main.go", "", 200, "// &lt;script&gt;"},
		{"/alice/hostile/blame/" + head + "/src", "", 404, ""},
		{"/alice/hostile/tree/" + head + "/" + strings.Repeat("a/", 2000), "", 0, ""},
	} {
		status, body := s.get(t, tc.path, tc.token)
		if tc.status == 0 && (status < 400 || status > 499) || tc.status != 0 && status != tc.status {
			t.Errorf("%s: %d, want %d (0: any 4xx)\n%s", tc.path, status, tc.status, body)
		}
		if !strings.Contains(body, tc.want) {
			t.Errorf("%s: no %q in\n%s", tc.path, tc.want, body)
		}
	}
}

// TestLogPagingOverReadAPI: 55 commits page as 50, then 5, following the
// API's Link header.
func TestLogPagingOverReadAPI(t *testing.T) {
	s := newSite(t)
	s.srv.CreateRepo(t, "alice/long")
	wt := s.env.Scratch(t)
	var ids []string
	for i := range 55 {
		ids = append(ids, s.env.Commit(t, wt, fmt.Sprintf("commit %d", i), nil))
	}
	s.env.Run(t, wt, "push", "-q", s.srv.HTTPURL(s.aliceToken, "alice/long"), "HEAD:refs/heads/main")

	// By id and by branch, the next page stays on what was asked.
	for _, at := range []string{ids[54], "main"} {
		_, first := s.get(t, "/alice/long/commits/"+at, s.aliceToken)
		next := "/alice/long/commits/" + at + "?from=" + ids[4]
		if n := strings.Count(first, `class="subject"`); n != 50 || !strings.Contains(first, `href="`+next+`" id="older"`) {
			t.Fatalf("first page from %s: %d commits, link to %s: %v", at, n, next, strings.Contains(first, next))
		}
		_, last := s.get(t, next, s.aliceToken)
		if n := strings.Count(last, `class="subject"`); n != 5 || strings.Contains(last, `id="older"`) || !strings.Contains(last, "commit 0") {
			t.Errorf("last page from %s: %d commits\n%s", at, n, last)
		}
	}
}
