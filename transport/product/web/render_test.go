package web

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

var testBase = linkBase{Blob: "/o/n/blob/c/", Tree: "/o/n/tree/c/", Raw: "/o/n/raw/c/", Dir: "docs/guide"}

func TestResolveLink(t *testing.T) {
	for _, tc := range []struct {
		dest  string
		image bool
		want  string // "" for dropped
	}{
		{"intro.md", false, "/o/n/blob/c/docs/guide/intro.md"},
		{"./intro.md#setup", false, "/o/n/blob/c/docs/guide/intro.md#setup"},
		{"../api.md?plain=1", false, "/o/n/blob/c/docs/api.md?plain=1"},
		{"../../README.md", false, "/o/n/blob/c/README.md"},
		{"../../../x.md", false, ""},          // above the root
		{"../../../../etc/passwd", false, ""}, // far above
		{"/src/main.go", false, "/o/n/blob/c/src/main.go"},
		{"/../x", false, ""},
		{"sub/", false, "/o/n/tree/c/docs/guide/sub"},
		{"../../", false, "/o/n/tree/c"},
		{"/", false, "/o/n/tree/c"},
		{"a b%20c.md", false, "/o/n/blob/c/docs/guide/a%20b%20c.md"},
		{"img/logo.png", true, "/o/n/raw/c/docs/guide/img/logo.png"},
		{"/img/", true, "/o/n/raw/c/img"},
		{"../../../logo.png", true, ""},
		{"https://example.com/x", false, "https://example.com/x"},
		{"HTTP://example.com/x", false, "HTTP://example.com/x"},
		{"https://example.com/i.png", true, "https://example.com/i.png"},
		{"//example.com/x", false, "//example.com/x"},
		{"mailto:a@example.com", false, "mailto:a@example.com"},
		{"#top", false, "#top"},
		{"javascript:alert(1)", false, ""},
		{"JavaScript:alert(1)", false, ""},
		{"data:text/html,<script>x</script>", false, ""},
		{"data:image/png;base64,AAAA", true, ""},
		{"vbscript:x", false, ""},
		{"file:///etc/passwd", false, ""},
		{"%zz", false, ""},
	} {
		got, keep := resolveLink(testBase, tc.dest, tc.image)
		if keep != (tc.want != "") || got != tc.want {
			t.Errorf("resolveLink(%q, image %v) = %q, %v; want %q", tc.dest, tc.image, got, keep, tc.want)
		}
	}
}

// TestMarkdownLinks: links and images in rendered Markdown point where
// resolveLink says, and a dropped one keeps its text.
func TestMarkdownLinks(t *testing.T) {
	out, err := renderMarkdown("[a](intro.md) [up](../../x.md) ![logo](img/l.png) [bad](javascript:alert(1)) ![pix](data:image/png;base64,AA) [gone](../../../y) [ent](&#106;avascript&colon;x)\n", testBase)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{`href="/o/n/blob/c/docs/guide/intro.md"`, `href="/o/n/blob/c/x.md"`, `src="/o/n/raw/c/docs/guide/img/l.png"`, "bad", "pix", "gone", "ent"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %s in %s", want, s)
		}
	}
	for _, bad := range []string{"avascript", "data:", `href=""`, `"../../../y"`} {
		if strings.Contains(s, bad) {
			t.Errorf("%s in %s", bad, s)
		}
	}
}

// TestMarkdownIsInert: raw HTML and every way Markdown has to carry a
// script come out as text or not at all.
func TestMarkdownIsInert(t *testing.T) {
	for _, src := range []string{
		"<script>x()</script>",
		"<b onclick=x>b</b>",
		"<img src=x onerror=alert(1)>",
		"<iframe src=\"javascript:x\"></iframe>",
		"[l](javascript:x)",
		"[l](  javascript:x  )",
		"[l](java\tscript:x)",
		"[l](&#106;avascript:x)",
		"[l](&#x6A;avascript&colon;x)",
		"[l](\\javascript:x)",
		"[l]: javascript:x\n\n[ref][l]",
		"<javascript:alert(1)>",
		"![i](data:text/html,x)",
		"![i](x\" onerror=\"alert(1))",
		"[x](y \"t\\\" onmouseover=alert(1)\")",
		"| a |\n|---|\n| <script>x</script> |",
		"```html\n<script>x()</script>\n```",
	} {
		out, err := renderMarkdown(src+"\n", testBase)
		if err != nil {
			t.Fatal(err)
		}
		if m := activeMarkup(string(out)); m != "" {
			t.Errorf("%q renders active markup %q: %s", src, m, out)
		}
	}
}

// TestMarkdownTables: GFM tables render as tables, aligned by attribute
// (the CSP refuses inline style).
func TestMarkdownTables(t *testing.T) {
	out, err := renderMarkdown("| a | b |\n|:--|--:|\n| 1 | 2 |\n", testBase)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<table>", `<th align="left">a</th>`, `<td align="right">2</td>`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %s in %s", want, out)
		}
	}
	if strings.Contains(string(out), "style=") {
		t.Errorf("inline style in %s", out)
	}
}

// TestMarkdownFits: the inputs that make goldmark slow (deep nesting,
// many brackets on a long line, size) are shown as source, ordinary
// documents render.
func TestMarkdownFits(t *testing.T) {
	links := strings.Repeat("- [a link](docs/a.md) and [another](https://example.com/)\n", 500)
	for _, tc := range []struct {
		name string
		src  string
		want bool
	}{
		{"links in a list", links, true},
		{"quotes 16 deep", strings.Repeat(">", 16) + " a\n", true},
		{"quotes 17 deep", strings.Repeat(">", 17) + " a\n", false},
		{"quotes on one line", strings.Repeat(">", 60<<10), false},
		{"lists in quotes", strings.Repeat("> - ", 9) + "a\n", false},
		{"ordered lists", strings.Repeat("1. ", 17) + "a\n", false},
		{"indented 60 columns", strings.Repeat(" ", 60) + "- a\n", true},
		{"indented 64 columns", strings.Repeat(" ", 64) + "- a\n", false},
		{"unclosed links on a long line", strings.Repeat("[a](", 100) + strings.Repeat("a", 50<<10), false},
		{"unclosed links on short lines", strings.Repeat(strings.Repeat("[a](", 20)+"\n", 500), true},
		{"too large", strings.Repeat("a\n", maxMarkdown/2+1), false},
	} {
		if got := markdownFits(tc.src); got != tc.want {
			t.Errorf("%s: markdownFits %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := renderMarkdown(strings.Repeat(">", 100), testBase); err == nil {
		t.Error("renderMarkdown rendered what does not fit")
	}
}

func TestSplitDiff(t *testing.T) {
	d := "diff --git a/x b/y\nsimilarity index 80%\nrename from x\nrename to y\nindex 1..2 100644\n--- a/x\n+++ b/y\n" +
		"@@ -10,3 +12,3 @@ func f() {\n ctx\n-old\n+new\n+more\n\\ No newline at end of file\n" +
		"@@ -20 +23 @@\n-a\n+b\n" +
		"diff --git a/z z b/z z\nindex 1..2\nBinary files a/z z and b/z z differ\n" +
		"diff --git a/n b/n\nnew file mode 100644\nindex 0..1\n--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+1\n+2\n" +
		"diff --git a/d b/d\ndeleted file mode 100644\nindex 1..0\n--- a/d\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n" +
		"diff --git a/m b/m\nold mode 100644\nnew mode 100755\n"
	files := splitDiff(d)
	var got []string
	for _, f := range files {
		got = append(got, fmt.Sprintf("%s<%s %s bin=%v", f.Name, f.OldName, f.Change, f.Binary))
	}
	want := []string{"y<x renamed bin=false", "z z< modified bin=true", "n< added bin=false", "d< deleted bin=false", "m< mode changed bin=false"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("files\n%v\nwant\n%v", got, want)
	}
	// Old and new numbers per line; no header line is shown.
	for i, wantLines := range [][]string{
		{"hunk 0 0 @@ -10,3 +12,3 @@ func f() {", "ctx 10 12  ctx", "del 11 0 -old", "add 0 13 +new", "add 0 14 +more",
			`meta 0 0 \ No newline at end of file`, "hunk 0 0 @@ -20 +23 @@", "del 20 0 -a", "add 0 23 +b"},
		nil,
		{"hunk 0 0 @@ -0,0 +1,2 @@", "add 0 1 +1", "add 0 2 +2"},
		{"hunk 0 0 @@ -1 +0,0 @@", "del 1 0 -gone"},
		nil,
	} {
		var lines []string
		for _, l := range files[i].Lines {
			lines = append(lines, fmt.Sprintf("%s %d %d %s", l.Class, l.Old, l.New, l.Text))
		}
		if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
			t.Errorf("file %d lines:\n%s\nwant\n%s", i, strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
		}
	}
}

// TestSplitDiffCutShort: a diff the API cut short (mid-file, mid-line,
// or before any header) still splits without losing what it has.
func TestSplitDiffCutShort(t *testing.T) {
	files := splitDiff("@@ -1 +1 @@\n-a\n+b")
	if len(files) != 1 || len(files[0].Lines) != 3 || files[0].Lines[2].New != 1 {
		t.Errorf("headerless diff: %+v", files)
	}
	files = splitDiff("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -5,")
	if len(files) != 1 || files[0].Name != "x" || len(files[0].Lines) != 1 || files[0].Lines[0].Class != "hunk" {
		t.Errorf("cut in a hunk header: %+v", files)
	}
}

func TestGitHeaderName(t *testing.T) {
	for rest, want := range map[string]string{
		"a/x b/x":                 "x",
		"a/a b/c b/a b/c":         "a b/c",
		"a/sp ace.go b/sp ace.go": "sp ace.go",
		"a/old b/new":             "new",
		"garbage":                 "garbage",
	} {
		if got := gitHeaderName(rest); got != want {
			t.Errorf("gitHeaderName(%q) = %q, want %q", rest, got, want)
		}
	}
}

func TestParseLines(t *testing.T) {
	for s, want := range map[string]lineRange{"": {}, "7": {7, 7}, "10-20": {10, 20}, "L10-L20": {10, 20}, "3-3": {3, 3}} {
		if got, err := parseLines(s); err != nil || got != want {
			t.Errorf("parseLines(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"0", "-3", "5-2", "x", "1-", "1-2-3", "99999999999999999999"} {
		if got, err := parseLines(s); err == nil {
			t.Errorf("parseLines(%q) = %v, want an error", s, got)
		}
	}
}

func TestFileKind(t *testing.T) {
	lfs := Blob{Content: "version https://git-lfs.github.com/spec/v1\n"}
	lfs.LFS = &struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	}{OID: "ab", Size: 5}
	for _, tc := range []struct {
		name  string
		b     Blob
		plain bool
		want  string
	}{
		{"a.png", lfs, false, "lfs"},
		{"a.bin", lfs, false, "lfs"},
		{"logo.PNG", Blob{Binary: true}, false, "image"},
		{"p.jpeg", Blob{Binary: true}, false, "image"},
		{"p.webp", Blob{Binary: true}, false, "image"},
		{"not-really.png", Blob{Content: "text"}, false, "code"},
		{"pic.svg", Blob{Content: "<svg/>"}, false, "code"},
		{"a.exe", Blob{Binary: true}, false, "binary"},
		{"doc.md", Blob{Content: "# x"}, false, "markdown"},
		{"doc.Markdown", Blob{Content: "# x"}, false, "markdown"},
		{"doc.md", Blob{Content: "# x"}, true, "code"},
		{"big.md", Blob{Content: strings.Repeat("x", maxMarkdown+1)}, false, "code"},
		{"main.go", Blob{Content: "package x"}, false, "code"},
	} {
		if got := fileKind(tc.name, tc.b, tc.plain); got != tc.want {
			t.Errorf("fileKind(%s, plain %v) = %s, want %s", tc.name, tc.plain, got, tc.want)
		}
	}
}

// TestBlobViews: a Markdown file renders, ?plain=1 shows its numbered
// source with a way back, ?lines= marks lines (and a bad one is a 400).
func TestBlobViews(t *testing.T) {
	h := newPage(t)
	md := "/alice/demo/blob/" + oidC2 + "/README.md"
	for _, tc := range []struct {
		path    string
		status  int
		want    []string
		notWant []string
	}{
		{md, 200, []string{`id="markdown"`, "<h1>Hello", `href="./README.md?plain=1" id="source"`}, []string{`id="L1"`, "javascript:"}},
		{md + "?plain=1", 200, []string{`id="code"`, `id="L1"`, `href="#L3"`, `href="./README.md" id="rendered"`}, []string{`id="markdown"`}},
		{"/alice/demo/blob/" + oidC2 + "/src/main.go?lines=2-3", 200, []string{`id="lines"`, `class="line hl"><span class="ln" id="L2"`, `class="line hl"><span class="ln" id="L3"`, `class="line"><span class="ln" id="L4"`}, nil},
		{"/alice/demo/blob/" + oidC2 + "/src/main.go?lines=3-1", 400, []string{"lines="}, nil},
		{md + "?lines=3", 200, []string{`class="line hl"><span class="ln" id="L3"`, `id="rendered"`}, []string{`id="markdown"`}},
		{"/alice/demo/blob/" + oidC2 + "/src/main.go", 200, []string{`id="L4"`}, []string{`id="lines"`, "line hl", `id="source"`, `id="rendered"`}},
	} {
		resp, body := get(t, h, tc.path, "")
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: no %s in\n%s", tc.path, w, body)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(body, w) {
				t.Errorf("%s: %s in\n%s", tc.path, w, body)
			}
		}
		if bad := activeMarkup(body); bad != "" {
			t.Errorf("%s: active markup %q", tc.path, bad)
		}
	}
}

// TestStyleHasDarkScheme: the stylesheet colours the page and its code
// for readers who prefer a dark scheme.
func TestStyleHasDarkScheme(t *testing.T) {
	h := newPage(t)
	resp, css := get(t, h, "/-/static/style.css", "")
	if resp.StatusCode != http.StatusOK || strings.Count(css, "@media (prefers-color-scheme: dark)") < 2 {
		t.Errorf("style.css: %d, %d dark blocks", resp.StatusCode, strings.Count(css, "@media (prefers-color-scheme: dark)"))
	}
}
