package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/gitrun"
)

// TestBrowserBlame: a file that ten authors wrote is blamed as git blame
// --first-parent blames it, each run under its commit's link, author and
// summary, reached from the file view; hostile lines stay text; a blame
// over its commit budget says it stopped early.
func TestBrowserBlame(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t), "RGIT_API_MAX_BLAME_COMMITS=12")
	env := gitenv.New(t)
	token := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/blame")
	srv.Admin(t, "set-visibility", "alice/blame", "public")
	wt := env.Scratch(t)
	work := &gitrun.Repo{T: t, Dir: wt}
	var team []string
	write := func(author, msg, file string, lines []string) string {
		t.Helper()
		work.Write(file, strings.Join(lines, "\n")+"\n")
		env.Run(t, wt, "add", "-A")
		env.RunEnv(t, wt, []string{"GIT_AUTHOR_NAME=" + author, "GIT_AUTHOR_EMAIL=" + author + "@example.com"}, "commit", "-q", "-m", msg)
		return env.Run(t, wt, "rev-parse", "HEAD")
	}
	var teamHead string
	for i := range 10 {
		author := fmt.Sprintf("author%d", i)
		switch {
		case i == 0:
			for j := range 12 {
				team = append(team, fmt.Sprintf("line %d by %s", j, author))
			}
			team = append(team, "// <script>"+pwn+"</script>")
		case i%3 == 0: // rewrite some lines
			team[i] = fmt.Sprintf("line %d rewritten by %s", i, author)
		case i%3 == 1: // insert
			team = append(team[:i+2], append([]string{"added by " + author}, team[i+2:]...)...)
		default: // move a line to the end
			moved := team[1]
			team = append(append(team[:1], team[2:]...), moved)
		}
		teamHead = write(author, fmt.Sprintf("%s edits team.txt", author), "team.txt", team)
	}
	var long []string
	for i := range 20 {
		long = append(long, fmt.Sprintf("long line %d", i))
		write("late", fmt.Sprintf("long %d", i), "long.txt", long)
	}
	env.Run(t, wt, "push", "-q", srv.HTTPURL(token, "alice/blame"), "HEAD:refs/heads/main")
	// git blame's commit of each line (-s -l: "{full id} {n}) {text}").
	var gitLines []string
	for line := range strings.Lines(env.Run(t, wt, "blame", "--first-parent", "--root", "-s", "-l", teamHead, "--", "team.txt")) {
		gitLines = append(gitLines, strings.Fields(line)[0])
	}

	b := newBrowser(t, "http://"+srv.HTTPAddr)
	b.open("/alice/blame/blob/"+teamHead+"/team.txt", "#blame-link")
	b.do("open blame", chromedp.Click(chromedp.CSS("#blame-link")), chromedp.WaitVisible(chromedp.CSS("#blame tbody.run")))
	// Each code line with the commit of the run it is under.
	rows := eval[[]string](b, `[...document.querySelectorAll('#blame tbody.run')].flatMap(run => {
		const oid = run.querySelector('tr.who a').getAttribute('href').split('/').pop();
		return [...run.querySelectorAll('td.ln a')].map(a => a.textContent + ' ' + oid);
	})`)
	if len(rows) != len(team) || len(gitLines) != len(team) {
		t.Fatalf("%d lines on the page, git blames %d, the file has %d", len(rows), len(gitLines), len(team))
	}
	for i, row := range rows {
		if want := fmt.Sprintf("%d %s", i+1, gitLines[i]); row != want {
			t.Errorf("line %d: page %q, git blame %q", i+1, row, want)
		}
	}
	authors := map[string]bool{}
	for _, a := range eval[[]string](b, `[...document.querySelectorAll('#blame .author')].map(e => e.textContent)`) {
		authors[a] = true
	}
	if len(authors) < 8 {
		t.Errorf("authors shown: %v", authors)
	}
	if code := eval[string](b, `document.querySelector('#blame').textContent`); !strings.Contains(code, "<script>") {
		t.Errorf("the hostile line is not shown as text")
	}
	if b.text("#blame tr.who .summary") == "" {
		t.Error("a run shows no summary")
	}
	b.clean("blame")
	b.shot("blame")
	b.do("open a run's commit", chromedp.Click(chromedp.CSS("#blame tr.who a")), chromedp.WaitVisible(chromedp.CSS("#commit")))

	b.open("/alice/blame/blame/"+env.Run(t, wt, "rev-parse", "HEAD")+"/long.txt", "#truncated")
	if msg := b.text("#truncated"); !strings.Contains(msg, "RGIT_API_MAX_BLAME_COMMITS") {
		t.Errorf("truncated notice %q", msg)
	}
	b.clean("blame cut short")
	b.shot("blame-truncated")
}
