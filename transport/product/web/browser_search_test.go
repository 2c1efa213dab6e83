package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rgit/rgit/testkit/gitenv"
)

// searchFileBudget is the node's RGIT_API_SEARCH_MAX_FILES in
// TestBrowserSearch: alice/find fits in one page, alice/many does not.
const searchFileBudget = 4

// TestBrowserSearch: the search box of a repository page finds lines,
// grouped by file with the matches marked (hostile lines stay text), each
// linking to its line in the file view; a bad regexp says what is wrong;
// a search the node's budget stops says so, and goes on from there.
func TestBrowserSearch(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t), fmt.Sprintf("RGIT_API_SEARCH_MAX_FILES=%d", searchFileBudget))
	env := gitenv.New(t)
	tok := srv.AddToken(t, "alice")
	push := func(repo string, files map[string]string) {
		srv.CreateRepo(t, repo)
		srv.Admin(t, "set-visibility", repo, "public")
		wt := env.Scratch(t)
		env.Commit(t, wt, "files", files)
		env.Run(t, wt, "push", "-q", srv.HTTPURL(tok, repo), "main")
	}
	push("alice/find", map[string]string{
		"README.md":   "# find\n\nA needle in a haystack.\n",
		"src/main.go": "package main\n\nfunc main() {\n\tneedle := `<script>" + pwn + "</script>`\n\tprintln(needle)\n}\n",
		"src/<b>x.go": "// needle \"><img src=x onerror=\"" + pwn + "\">\n",
	})
	many := map[string]string{}
	for i := range 3 * searchFileBudget {
		many[fmt.Sprintf("f%02d.txt", i)] = fmt.Sprintf("line one\nneedle %d\n", i)
	}
	push("alice/many", many)

	b := newBrowser(t, "http://"+srv.HTTPAddr)
	t.Run("hits", func(t *testing.T) {
		b.t = t
		b.open("/alice/find", "#tree-search")
		b.do("search", chromedp.SendKeys(chromedp.CSS(`#tree-search input[name=q]`), "needle"),
			chromedp.Submit(chromedp.CSS(`#tree-search`)), chromedp.WaitVisible(chromedp.CSS("#search-results")))
		files := eval[[]string](b, `[...document.querySelectorAll('.search-file .head code')].map(e => e.textContent)`)
		if want := []string{"README.md", "src/<b>x.go", "src/main.go"}; strings.Join(files, "|") != strings.Join(want, "|") {
			t.Errorf("files %q, want %q", files, want)
		}
		marks := eval[[]string](b, `[...document.querySelectorAll('#search-results mark')].map(e => e.textContent)`)
		if len(marks) != 4 || strings.ReplaceAll(strings.Join(marks, ""), "needle", "") != "" {
			t.Errorf("marked %q, want needle four times", marks)
		}
		if all := b.text("#search-results"); !strings.Contains(all, "<script>"+pwn+"</script>") {
			t.Errorf("the hostile line is not shown as text:\n%s", all)
		}
		b.clean("search")
		b.shot("search")
		// A line's link opens the file at that line.
		href := eval[string](b, `[...document.querySelectorAll('.search-lines a')].map(a => a.href).find(h => h.includes('/src/main.go#L'))`)
		if !strings.Contains(href, "/alice/find/blob/") || !strings.HasSuffix(href, "/src/main.go#L4") {
			t.Fatalf("line link %q", href)
		}
		b.do("open the hit", chromedp.Navigate(href), chromedp.WaitVisible(chromedp.CSS("#file .chroma")))
		if line := eval[string](b, `document.getElementById(location.hash.slice(1))?.textContent.trim() ?? 'no such anchor'`); line != "4" {
			t.Errorf("the anchor %s is not line 4's number: %q", href, line)
		}
		// File names, and a bad regexp.
		b.open("/alice/find/search?type=path&q=main", "#search-results")
		if paths := b.text(".search-paths"); strings.TrimSpace(paths) != "src/main.go" {
			t.Errorf("path search: %q", paths)
		}
		b.open("/alice/find/search?mode=regexp&q=%28needle", "#search-error")
		if msg := b.text("#search-error"); !strings.Contains(msg, "missing closing )") {
			t.Errorf("bad regexp: %q", msg)
		}
		b.clean("search error")
		// HEAD asks the API's HEAD: the status without a search.
		for q, want := range map[string]int{"needle": http.StatusOK, "%28needle&mode=regexp": http.StatusBadRequest} {
			resp, err := http.Head("http://" + srv.HTTPAddr + "/alice/find/search?q=" + q)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("HEAD search?q=%s: %d, want %d", q, resp.StatusCode, want)
			}
		}
	})
	t.Run("stops-on-budget", func(t *testing.T) {
		b.t = t
		b.open("/alice/many/search?q=needle", "#search-partial")
		partial := b.text("#search-partial")
		if !strings.Contains(partial, "RGIT_API_SEARCH_MAX_FILES") || !strings.Contains(partial, fmt.Sprintf("f%02d.txt", searchFileBudget)) {
			t.Errorf("partial notice %q", partial)
		}
		first := eval[int](b, `document.querySelectorAll('.search-lines tr').length`)
		if first != searchFileBudget {
			t.Errorf("%d hits before the budget, want %d", first, searchFileBudget)
		}
		b.shot("search-partial")
		// Going on from there finds the rest, page by page.
		seen := first
		for range 3 * searchFileBudget {
			next := eval[string](b, `document.querySelector('#search-next')?.href ?? ''`)
			if next == "" {
				break
			}
			b.do("go on", chromedp.Navigate(next), chromedp.WaitVisible(chromedp.CSS("#search-summary")))
			seen += eval[int](b, `document.querySelectorAll('.search-lines tr').length`)
		}
		if seen != 3*searchFileBudget {
			t.Errorf("%d hits over every page, want %d", seen, 3*searchFileBudget)
		}
	})
}
