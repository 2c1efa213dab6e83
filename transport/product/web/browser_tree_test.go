package web_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rgit/rgit/testkit/gitenv"
)

// treeRepo pushes alice/meta (public) to srv: directories and files
// changed by different commits a minute apart, one of them on a branch
// merged back. It returns the work tree.
func treeRepo(t *testing.T, srv *gitenv.Server, env *gitenv.Env) string {
	t.Helper()
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/meta")
	srv.Admin(t, "set-visibility", "alice/meta", "public")
	wt := env.Scratch(t)
	at := 1700000000
	commit := func(msg string, files map[string]string) {
		at += 60
		for name, content := range files {
			p := filepath.Join(wt, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		date := fmt.Sprintf("GIT_AUTHOR_DATE=%d +0000", at)
		env.Run(t, wt, "add", "-A")
		env.RunEnv(t, wt, []string{date, "GIT_COMMITTER_DATE" + strings.TrimPrefix(date, "GIT_AUTHOR_DATE")}, "commit", "-q", "-m", msg)
	}
	commit("start the project", map[string]string{"README.md": "# meta\n", "zz.txt": "z\n", "docs/guide.md": "g\n", "src/main.go": "package main\n"})
	commit("write the guide", map[string]string{"docs/guide.md": "guide\n"})
	env.Run(t, wt, "checkout", "-q", "-b", "feature")
	commit("feature: a library", map[string]string{"lib/lib.go": "package lib\n"})
	env.Run(t, wt, "checkout", "-q", "main")
	commit("tidy zz", map[string]string{"zz.txt": "zz\n"})
	at += 60
	env.RunEnv(t, wt, []string{fmt.Sprintf("GIT_AUTHOR_DATE=%d +0000", at), fmt.Sprintf("GIT_COMMITTER_DATE=%d +0000", at)},
		"merge", "-q", "--no-ff", "-m", "merge the feature", "feature")
	commit("readme: say more", map[string]string{"README.md": "# meta\n\nmore\n"})
	env.Run(t, wt, "push", "-q", srv.HTTPURL(tok, "alice/meta"), "main")
	return wt
}

// TestBrowserTreeLastCommits: the tree page lists directories first, and
// each entry with the subject, link and date of the commit `git log -1`
// names for it; a node whose budget finds none shows the listing without
// the column and says why.
func TestBrowserTreeLastCommits(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := gitenv.New(t)
	wt := treeRepo(t, srv, env)
	b := newBrowser(t, "http://"+srv.HTTPAddr)
	b.open("/alice/meta", "#tree td.last a")
	b.shot("tree-last-commits")

	rows := eval[[]map[string]string](b, `[...document.querySelectorAll('#tree tr')].map(tr => ({
		name: tr.querySelector('td.name').innerText.replace(/\/$/, ''), kind: tr.className,
		subject: tr.querySelector('td.last').innerText, href: tr.querySelector('td.last a')?.getAttribute('href') ?? '',
		when: tr.querySelector('td.when time')?.getAttribute('datetime') ?? ''}))`)
	var order []string
	for _, r := range rows {
		order = append(order, r["name"])
		want := strings.Fields(env.Run(t, wt, "log", "-1", "--format=%H %cI", "--", r["name"]))
		wantSubject := env.Run(t, wt, "log", "-1", "--format=%s", "--", r["name"])
		if r["subject"] != wantSubject || r["href"] != "/alice/meta/commit/"+want[0] || !strings.HasPrefix(want[1], strings.TrimSuffix(r["when"], "Z")) {
			t.Errorf("%s: %q %s %s; git log -1: %q %s %s", r["name"], r["subject"], r["href"], r["when"], wantSubject, want[0], want[1])
		}
	}
	if got := strings.Join(order, " "); got != "docs lib src README.md zz.txt" {
		t.Errorf("listing order %q, want directories first", got)
	}
	b.clean("tree with last commits")

	b.do("open lib's commit", chromedp.Click(chromedp.CSS(`#tree tr.tree td.last a`)), chromedp.WaitVisible(chromedp.CSS("#commit")))
	if s := b.text("#subject"); !strings.Contains(s, "write the guide") {
		t.Errorf("docs' last commit opens %q", s)
	}

	// One commit examined: the newest changed only README.md, so in docs/
	// nothing is found and the page shows the listing alone.
	short := gitenv.StartServer(t, gitenv.FileStore(t), "RGIT_API_LAST_COMMIT_SCAN=1")
	wt2 := treeRepo(t, short, env)
	sb := newBrowser(t, "http://"+short.HTTPAddr)
	head := env.Run(t, wt2, "rev-parse", "HEAD")
	sb.open("/alice/meta/tree/"+head+"/docs", "#last-note")
	if n := eval[int](sb, `document.querySelectorAll('#tree td.last').length`); n != 0 {
		t.Errorf("%d last-commit cells where the budget found none", n)
	}
	if note := sb.text("#last-note"); !strings.Contains(note, "0 of 1 entries") || !strings.Contains(note, "RGIT_API_LAST_COMMIT_SCAN") {
		t.Errorf("note %q", note)
	}
	if got := sb.text("#tree"); !strings.Contains(got, "guide.md") {
		t.Errorf("listing %q", got)
	}
	sb.shot("tree-last-commits-cut")
	resp, err := http.Get("http://" + short.HTTPAddr + "/alice/meta")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("front page with a short budget: %d", resp.StatusCode)
	}
}
