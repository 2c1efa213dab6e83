package web_test

// Browser tests of how files and diffs look: a Markdown file rendered
// with its links and images resolved in the repository, line anchors, an
// image, a Git LFS pointer, numbered diffs, a phone-width screen and the
// dark scheme. Same node, browser and screenshots as browser_test.go.

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/rgit/rgit/testkit/need"
)

// logoPNG is a w×h PNG.
func logoPNG(t *testing.T, w, h int) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(x * 255 / w), 120, uint8(y * 255 / h), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// numbered is n lines "line i".
func numbered(n int, change map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if s, ok := change[i]; ok {
			b.WriteString(s + "\n")
			continue
		}
		fmt.Fprintf(&b, "\t// line %d\n", i)
	}
	return b.String()
}

const guideMD = "# Guide\n\n" +
	"See [the program](../src/main.go), [this folder](./), [the README](/README.md) and [elsewhere](https://example.com/).\n\n" +
	"![logo](../img/logo.png)\n\n" +
	"| name | kind |\n|:-----|-----:|\n| logo | image |\n| main | code |\n\n" +
	"[evil](javascript:" + pwn + ") [evil2](&#106;avascript:" + pwn + ") ![x](data:image/svg+xml,<svg onload=alert(1)>) <script>" + pwn + "</script>\n"

// filesRepo pushes alice/files (public): a first commit tagged v0, then
// one that changes a line, renames a file and adds an LFS file. It
// returns the second commit's id and the LFS file's bytes.
func filesRepo(t *testing.T, s *site) (head string, lfsData []byte) {
	t.Helper()
	need.Tool(t, "git-lfs")
	env := s.env
	env.Run(t, "", "lfs", "install", "--skip-repo")
	s.srv.CreateRepo(t, "alice/files")
	s.srv.Admin(t, "set-visibility", "alice/files", "public")
	wt := env.Scratch(t)
	env.Run(t, wt, "lfs", "track", "*.bin")
	env.Commit(t, wt, "first", map[string]string{
		"README.md":                              "# Files\n",
		"docs/guide.md":                          guideMD,
		"docs/old.txt":                           "moved\n",
		"img/logo.png":                           logoPNG(t, 40, 24),
		"src/main.go":                            "package main\n" + numbered(30, nil),
		`"><img src=x onerror="` + pwn + `">.md`: hostileFiles["README.md"],
	})
	env.Run(t, wt, "tag", "v0")
	env.Run(t, wt, "mv", "docs/old.txt", "docs/new.txt")
	lfsData = make([]byte, 50<<10)
	rand.Read(lfsData)
	head = env.Commit(t, wt, "second", map[string]string{
		"src/main.go": "package main\n" + numbered(30, map[int]string{11: "\t// line eleven"}),
		"data.bin":    string(lfsData),
	})
	env.Run(t, wt, "push", "-q", s.srv.HTTPURL(s.aliceToken, "alice/files"), "main", "v0")
	return head, lfsData
}

// evalAsync evaluates a JavaScript expression that yields a promise.
func evalAsync[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// noSideScroll fails unless the page is no wider than the screen (code
// blocks scroll inside their box).
func noSideScroll(b *browser, view string) {
	b.t.Helper()
	if w := eval[[]int](b, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); w[0] > w[1] {
		b.t.Errorf("%s: the page is %dpx wide on a %dpx screen", view, w[0], w[1])
	}
}

func TestBrowserFiles(t *testing.T) {
	s := newSite(t)
	head, lfsData := filesRepo(t, s)
	b := newBrowser(t, s.base)
	blob := func(oid, path string) string { return "/alice/files/blob/" + oid + "/" + path }

	t.Run("markdown", func(t *testing.T) {
		b.t = t
		b.open(blob(head, "docs/guide.md"), "#markdown")
		hrefs := eval[[]string](b, `[...document.querySelectorAll('#markdown a')].map(a => a.getAttribute('href'))`)
		want := []string{blob(head, "src/main.go"), "/alice/files/tree/" + head + "/docs", blob(head, "README.md"), "https://example.com/"}
		if strings.Join(hrefs, " ") != strings.Join(want, " ") {
			t.Errorf("links %q, want %q", hrefs, want)
		}
		if text := b.text("#markdown"); !strings.Contains(text, "evil") || !strings.Contains(text, "evil2") {
			t.Errorf("a dropped link lost its text: %q", text)
		}
		// The image comes from raw at the same commit, and the CSP lets it load.
		src := eval[string](b, `document.querySelector('#markdown img').getAttribute('src')`)
		if src != "/alice/files/raw/"+head+"/img/logo.png" {
			t.Errorf("image src %q", src)
		}
		if w := evalAsync[int](b, `(async () => { const i = document.querySelector('#markdown img'); await i.decode(); return i.naturalWidth })()`); w != 40 {
			t.Errorf("the image loaded %dpx wide, want 40", w)
		}
		if n := eval[int](b, `document.querySelectorAll('#markdown img').length`); n != 1 {
			t.Errorf("%d images, want the logo only (data: dropped)", n)
		}
		// Tables have borders.
		if bw := eval[string](b, `getComputedStyle(document.querySelector('#markdown td')).borderTopWidth`); bw == "0px" || bw == "" {
			t.Errorf("table cells without borders (%q)", bw)
		}
		b.clean("markdown file")
		b.shot("files-markdown")
		// Source toggle and back; the first link goes to the file.
		b.do("show source", chromedp.Click(chromedp.CSS("#source")), chromedp.WaitVisible(chromedp.CSS("#code #L1")))
		if !strings.HasSuffix(b.location(), "guide.md?plain=1") || !strings.Contains(b.text("#code"), "[evil](javascript:") {
			t.Errorf("source view at %s", b.location())
		}
		b.clean("markdown source")
		b.shot("files-markdown-source")
		b.do("back to rendered", chromedp.Click(chromedp.CSS("#rendered")), chromedp.WaitVisible(chromedp.CSS("#markdown")))
		b.do("follow a relative link", chromedp.Click(chromedp.CSS(`#markdown a[href$="/src/main.go"]`)), chromedp.WaitVisible(chromedp.CSS("#code #L30")))
		if !strings.HasSuffix(b.location(), blob(head, "src/main.go")) {
			t.Errorf("the relative link led to %s", b.location())
		}
		// A Markdown file with a hostile name and content stays inert.
		b.open("/alice/files/tree/"+head, "#tree")
		b.do("open the hostile file", chromedp.Click(chromedp.CSS(`#tree a[href$=".md"][href*="onerror"]`)), chromedp.WaitVisible(chromedp.CSS("#markdown")))
		b.clean("hostile markdown file")
	})

	t.Run("line-anchors", func(t *testing.T) {
		b.t = t
		b.open(blob(head, "src/main.go")+"#L12", "#L12")
		if id := eval[string](b, `document.querySelector(':target')?.id ?? ''`); id != "L12" {
			t.Fatalf(":target is %q, want L12", id)
		}
		bg := eval[[]string](b, `['L11', 'L12'].map(id => getComputedStyle(document.getElementById(id).parentElement).backgroundColor)`)
		if bg[0] == bg[1] {
			t.Errorf("line 12 (#L12) looks like line 11: background %s", bg[1])
		}
		if href := eval[string](b, `document.querySelector('#L12 a').getAttribute('href')`); href != "#L12" {
			t.Errorf("line 12 links to %q", href)
		}
		// Line numbers are not copied with the code.
		if us := eval[string](b, `getComputedStyle(document.getElementById('L12')).userSelect`); us != "none" {
			t.Errorf("line numbers are selectable (%q)", us)
		}
		b.shot("files-line-anchor")
		b.open(blob(head, "src/main.go")+"?lines=3-5#L3", "#lines")
		marked := eval[[]string](b, `[...document.querySelectorAll('.line.hl .ln')].map(e => e.id)`)
		if strings.Join(marked, ",") != "L3,L4,L5" {
			t.Errorf("?lines=3-5 marked %v", marked)
		}
		b.shot("files-line-range")
	})

	t.Run("image", func(t *testing.T) {
		b.t = t
		b.open(blob(head, "img/logo.png"), "#image img")
		if w := evalAsync[int](b, `(async () => { const i = document.querySelector('#image img'); await i.decode(); return i.naturalWidth })()`); w != 40 {
			t.Errorf("the image shows %dpx wide, want 40", w)
		}
		b.clean("image file")
		b.shot("files-image")
	})

	t.Run("lfs-pointer", func(t *testing.T) {
		b.t = t
		b.open(blob(head, "data.bin"), "#lfs")
		if txt := b.text("#lfs"); !strings.Contains(txt, "Stored with Git LFS (50.0 KiB)") {
			t.Errorf("LFS note %q", txt)
		}
		resp, err := http.Get(eval[string](b, `document.querySelector('#download').href`))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(got, lfsData) {
			t.Errorf("download: %d, %d bytes, want the %d pushed", resp.StatusCode, len(got), len(lfsData))
		}
		b.shot("files-lfs")
	})

	t.Run("diff", func(t *testing.T) {
		b.t = t
		for _, page := range []string{"/alice/files/commit/" + head, "/alice/files/compare?base=v0&head=main"} {
			b.open(page, "table.diff")
			heads := eval[[]string](b, `[...document.querySelectorAll('[id^="diff-"] > .head')].map(e => e.textContent.replace(/\s+/g, ' ').trim())`)
			wantHeads := []string{"data.bin added", "docs/new.txt from docs/old.txt renamed", "src/main.go modified"}
			if strings.Join(heads, "|") != strings.Join(wantHeads, "|") {
				t.Errorf("%s: file headers %q, want %q", page, heads, wantHeads)
			}
			rows := eval[[]string](b, `[...document.querySelectorAll('table.diff tr')].map(r => r.className + ' ' + [...r.cells].map(c => c.dataset.n ?? '').slice(0, 2).join(' ') + ' ' + r.cells[r.cells.length-1].textContent)`)
			all := strings.Join(rows, "\n")
			for _, want := range []string{"del 12  -\t// line 11", "add  12 +\t// line eleven", "ctx 13 13  \t// line 12", "ctx 9 9  \t// line 8"} {
				if !strings.Contains(all, want) {
					t.Errorf("%s: no row %q in\n%s", page, want, all)
				}
			}
			for _, r := range rows {
				text := strings.SplitN(r, " ", 4)[3]
				for _, hdr := range []string{"diff --git", "index ", "--- ", "+++ ", "new file mode", "rename from"} {
					if strings.HasPrefix(text, hdr) {
						t.Errorf("%s: a raw header line is shown: %q", page, r)
					}
				}
			}
			b.clean("diff " + page)
		}
		b.shot("files-diff")
	})

	t.Run("phone-width", func(t *testing.T) {
		b.t = t
		b.do("phone screen", chromedp.EmulateViewport(375, 740, chromedp.EmulateMobile, chromedp.EmulatePortrait))
		defer b.do("desktop screen", chromedp.EmulateViewport(1200, 900))
		for _, v := range []struct{ name, path, sel string }{
			{"files-phone-tree", "/alice/files", "#readme"},
			{"files-phone-markdown", blob(head, "docs/guide.md"), "#markdown"},
			{"files-phone-code", blob(head, "src/main.go"), "#code"},
			{"files-phone-diff", "/alice/files/commit/" + head, "table.diff"},
			{"files-phone-hostile", "/alice/hostile", "#readme"},
		} {
			b.open(v.path, v.sel)
			// The viewport meta makes the layout the screen's width.
			if w := eval[int](b, `window.innerWidth`); w != 375 {
				t.Errorf("%s: laid out %dpx wide on a 375px screen", v.name, w)
			}
			noSideScroll(b, v.name)
			b.shot(v.name)
		}
	})

	t.Run("dark", func(t *testing.T) {
		b.t = t
		dark := func(on bool) {
			p := emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}}
			if on {
				p.Features[0].Value = "dark"
			}
			if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, p); err != nil {
				t.Fatal(err)
			}
		}
		dark(true)
		defer dark(false)
		for _, v := range []struct{ name, path, sel string }{
			{"files-dark-tree", "/alice/files", "#readme"},
			{"files-dark-code", blob(head, "src/main.go") + "#L12", "#code"},
			{"files-dark-markdown", blob(head, "docs/guide.md"), "#markdown"},
			{"files-dark-diff", "/alice/files/commit/" + head, "table.diff"},
		} {
			b.open(v.path, v.sel)
			// Dark background, light text, in the page and in its code.
			bg := eval[string](b, `getComputedStyle(document.body).backgroundColor`)
			fg := eval[string](b, `getComputedStyle(document.body).color`)
			if bg != "rgb(13, 17, 23)" || fg != "rgb(230, 237, 243)" {
				t.Errorf("%s: body %s on %s, want the dark scheme", v.name, fg, bg)
			}
			if v.name == "files-dark-code" {
				// Every token is light enough to read on the dark background.
				dim := eval[[]string](b, `[...document.querySelectorAll('.chroma .cl, .chroma .cl span')].map(e => [e.textContent.trim(), getComputedStyle(e).color]).filter(([text, c]) => {
					const [r, g, b] = c.match(/\d+/g).map(Number); return text && 0.2126*r + 0.7152*g + 0.0722*b < 110 }).map(([text, c]) => text + ' ' + c)`)
				if len(dim) != 0 {
					t.Errorf("code too dark to read on the dark background: %q", dim)
				}
			}
			b.shot(v.name)
		}
	})
}
