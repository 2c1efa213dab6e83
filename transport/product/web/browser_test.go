package web_test

// Browser tests: a real node (node.Start) with its read API and this
// page, real git pushes, and Debian's chromium driven headless through
// the DevTools protocol (chromedp). Screenshots of every view are kept in
// testdata/out (git-ignored; RGIT_SCREENSHOTS overrides) and their paths
// logged.

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/need"
)

// pwn is what every injection attempt does if it ever runs: set a marker
// on the document and open a dialog.
const pwn = `document.documentElement.dataset.pwned=1;alert(1)`

// hostileFiles is a repository built to attack its own browse page: file
// names, contents and the README all carry markup that would run pwn.
var hostileFiles = map[string]string{
	"README.md": "# Hello <script>" + pwn + "</script>\n\n" +
		"<img src=x onerror=\"" + pwn + "\">\n\n" +
		"[click](javascript:" + pwn + ") <iframe src=\"javascript:" + pwn + "\"></iframe>\n\n" +
		"<svg onload=\"" + pwn + "\"></svg>\n",
	`"><img src=x onerror="` + pwn + `">.txt`: "name attack\n",
	"<script>" + pwn + "<\\script>.js":        "// </script><script>" + pwn + "</script>\n",
	"src/main.go":                             "package main\n\n// <script>" + pwn + "</script>\nfunc main() {\n\tprintln(\"<img src=x onerror=alert(1)>\")\n}\n",
	"src/page.html":                           "<html><body><script>" + pwn + "</script></body></html>\n",
}

type browser struct {
	t        *testing.T
	ctx      context.Context
	base     string
	dialogs  atomic.Int32
	shotsDir string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	need.Tool(t, "chromium")
	path, _ := exec.LookPath("chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1200, 900),
		// Anything outside loopback fails: the page must need no network.
		chromedp.ProxyServer("http://127.0.0.1:9")) // loopback bypasses proxies
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	b := &browser{t: t, ctx: bctx, base: base, shotsDir: os.Getenv("RGIT_SCREENSHOTS")}
	if b.shotsDir == "" {
		b.shotsDir = filepath.Join("testdata", "out")
	}
	if err := os.MkdirAll(b.shotsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dialogs := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.dialogs.Add(1)
			t.Logf("a dialog opened (%q): injected script ran", ev.Message)
			_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return b
}

// stepTimeout bounds one browser step, so a missing element fails fast.
const stepTimeout = 10 * time.Second

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s (at %s): %v", what, b.location(), err)
	}
}

func (b *browser) location() string {
	u, _ := chromedp.Run(b.ctx, chromedp.Location())
	return u
}

// eval evaluates a JavaScript expression in the page (through DevTools,
// which the page's CSP does not govern).
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// open navigates to path and waits for sel.
func (b *browser) open(path, sel string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// text is the text of the first element matching sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// clean asserts that nothing injected ran or exists on the current page:
// no marker, no dialog, no script or frame element, no event-handler
// attribute, no javascript: URL.
func (b *browser) clean(view string) {
	b.t.Helper()
	pwned := eval[bool](b, `document.documentElement.dataset.pwned !== undefined`)
	active := eval[int](b, `[...document.querySelectorAll('*')].filter(e => ['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED'].includes(e.tagName) ||
		[...e.attributes].some(a => a.name.startsWith('on') || a.value.trim().toLowerCase().startsWith('javascript:'))).length`)
	if pwned || active != 0 || b.dialogs.Load() != 0 {
		b.t.Errorf("%s: injected content is live (marker %v, %d active elements, %d dialogs)", view, pwned, active, b.dialogs.Load())
	}
}

// shot keeps a screenshot of the current page as view.png.
func (b *browser) shot(view string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", view, err)
	}
	path := filepath.Join(b.shotsDir, view+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	b.t.Logf("screenshot %s: %s", view, abs)
}

func (b *browser) signIn(token, owner string) {
	b.t.Helper()
	b.open("/-/signin", "#token")
	b.do("sign in", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS("#viewer")))
	if got := b.text("#viewer"); !strings.Contains(got, owner) {
		b.t.Fatalf("signed in as %q, want %s", got, owner)
	}
}

// site is a node holding alice/hostile (public; every kind of content
// attacks the page) and alice/secret (private), with tokens for alice
// and bob.
type site struct {
	srv                  *gitenv.Server
	env                  *gitenv.Env
	aliceToken, bobToken string
	base                 string
}

func newSite(t *testing.T) *site {
	t.Helper()
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	s := &site{srv: srv, env: gitenv.New(t), base: "http://" + srv.HTTPAddr}
	s.aliceToken, s.bobToken = srv.AddToken(t, "alice"), srv.AddToken(t, "bob")
	env := s.env

	srv.CreateRepo(t, "alice/hostile")
	srv.Admin(t, "set-visibility", "alice/hostile", "public")
	wt := env.Scratch(t)
	env.Commit(t, wt, "first <script>"+pwn+"</script>", map[string]string{"src/main.go": "package main\n"})
	env.Commit(t, wt, `second "><img src=x onerror="`+pwn+`">`+"\n\n<svg onload=\""+pwn+"\"></svg> body", hostileFiles)
	env.Run(t, wt, "branch", `x"><svg/onload=`+pwn+`>`)
	env.Run(t, wt, "tag", "-a", "v1", "-m", "<script>"+pwn+"</script>", "HEAD~1")
	env.Run(t, wt, "push", "-q", srv.HTTPURL(s.aliceToken, "alice/hostile"), "--all")
	env.Run(t, wt, "push", "-q", srv.HTTPURL(s.aliceToken, "alice/hostile"), "--tags")

	srv.CreateRepo(t, "alice/secret")
	sec := env.Scratch(t)
	env.Commit(t, sec, "secret", map[string]string{"secret.txt": "nobody else\n"})
	env.Run(t, sec, "push", "-q", srv.HTTPURL(s.aliceToken, "alice/secret"), "HEAD:refs/heads/main")
	return s
}

func TestBrowser(t *testing.T) {
	start := time.Now()
	s := newSite(t)
	aliceToken, bobToken := s.aliceToken, s.bobToken
	b := newBrowser(t, s.base)
	b.open("/-/signin", "#token")
	b.shot("signin")

	t.Run("sign-in", func(t *testing.T) {
		b.t = t
		b.signIn(aliceToken, "alice")
		if cookies := eval[string](b, `document.cookie`); cookies != "" {
			t.Errorf("the token cookie is readable by script: %q", cookies)
		}
		if mine := b.text("#mine"); !strings.Contains(mine, "alice/secret") || !strings.Contains(mine, "alice/hostile") {
			t.Errorf("alice's list: %q", mine)
		}
		b.shot("repositories")
	})

	t.Run("browse-to-file", func(t *testing.T) {
		b.t = t
		b.do("follow the list", chromedp.Click(chromedp.CSS(`#mine a[href="/alice/hostile"]`)), chromedp.WaitVisible(chromedp.CSS("#readme")))
		// goldmark drops raw HTML: the heading keeps only the text.
		if h := b.text("#readme h1"); !strings.HasPrefix(h, "Hello") || strings.Contains(h, "<script>") {
			t.Errorf("README heading %q", h)
		}
		b.clean("front page")
		b.shot("tree")
		b.do("open src", chromedp.Click(chromedp.CSS(`#tree a[href$="/src"]`)), chromedp.WaitVisible(chromedp.CSS(`#tree a[href$="/src/main.go"]`)))
		b.do("open main.go", chromedp.Click(chromedp.CSS(`#tree a[href$="/src/main.go"]`)), chromedp.WaitVisible(chromedp.CSS("#file .chroma")))
		if crumbs := b.text("#crumbs"); !strings.Contains(crumbs, "hostile / src / main.go") {
			t.Errorf("breadcrumbs %q", crumbs)
		}
		if code := b.text("#file .chroma"); !strings.Contains(code, "<script>") {
			t.Errorf("file view %q does not show the markup as text", code)
		}
		if lines := eval[int](b, `document.querySelectorAll('#file a[href^="#L"]').length`); lines < 6 {
			t.Errorf("%d line-number anchors, want one per line", lines)
		}
		b.clean("file view")
		b.shot("file")
		// Raw bytes of an HTML file open sandboxed: its script does not run.
		raw := eval[string](b, `document.querySelector('#raw').href`)
		b.do("open raw html", chromedp.Navigate(strings.TrimSuffix(raw, "main.go")+"page.html"))
		if src := eval[string](b, `document.body.innerText`); !strings.Contains(src, "<script>") {
			t.Errorf("raw page.html shows %q, want its source as text", src)
		}
		b.clean("raw html")
		// The archive link downloads the tree.
		b.open("/alice/hostile", "#readme")
		tgz := eval[string](b, `document.querySelector('a[href$=".tar.gz"]').href`)
		resp, err := http.Get(tgz)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "gzip") {
			t.Errorf("archive %s: %d %s", tgz, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})

	t.Run("commit-diff", func(t *testing.T) {
		b.t = t
		b.open("/alice/hostile", "#commits-link")
		b.do("open the log", chromedp.Click(chromedp.CSS("#commits-link")), chromedp.WaitVisible(chromedp.CSS("#log a.subject")))
		b.clean("commit log")
		b.shot("log")
		b.do("open the commit", chromedp.Click(chromedp.CSS("#log a.subject")), chromedp.WaitVisible(chromedp.CSS("#commit")))
		if s := b.text("#subject"); !strings.Contains(s, `onerror=`) {
			t.Errorf("commit subject %q", s)
		}
		added := eval[string](b, `[...document.querySelectorAll('.diff .add')].map(e => e.textContent).join('\n')`)
		if !strings.Contains(added, "+# Hello <script>") {
			t.Errorf("diff additions lack the README line:\n%s", added)
		}
		b.clean("commit view")
		b.shot("commit")
		b.open("/alice/hostile/compare?base=v1&head=main", "#counts")
		if counts := b.text("#counts"); !strings.Contains(counts, "1 commit(s) ahead of and 0 behind") {
			t.Errorf("compare counts %q", counts)
		}
		b.clean("compare view")
		b.shot("compare")
		b.do("open the picker", chromedp.Click(chromedp.CSS("#picker summary")), chromedp.WaitVisible(chromedp.CSS("#picker ul")))
		b.clean("branch picker")
	})

	t.Run("private-invisible-to-another-owner", func(t *testing.T) {
		b.t = t
		b.open("/", "#viewer")
		b.do("sign out", chromedp.Click(chromedp.CSS(`form[action="/-/signout"] button`)), chromedp.WaitVisible(chromedp.CSS("#signin")))
		b.signIn(bobToken, "bob")
		if all := b.text("main"); strings.Contains(all, "alice/secret") || !strings.Contains(all, "alice/hostile") {
			t.Errorf("bob's list:\n%s", all)
		}
		b.open("/alice/secret", "#error")
		secret := b.text("#error")
		b.open("/alice/no-such-repo", "#error")
		if missing := b.text("#error"); secret != missing || !strings.Contains(secret, "404") {
			t.Errorf("alice/secret reads %q to bob, a missing repository %q", secret, missing)
		}
		b.shot("not-found")
	})
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}
