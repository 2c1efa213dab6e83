package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/alecthomas/chroma/v2"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/style.css
var baseCSS []byte

// views are the page templates by name, each parsed with the layout.
var views = mustParseViews()

var funcs = template.FuncMap{
	"short": shortOID,
	"when":  func(w When) string { return w.UTC().Format("2006-01-02 15:04 MST") },
	"ago":   func(w When) string { return w.UTC().Format(time.DateOnly) },
	"size":  humanSize,
}

func mustParseViews() map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	pages, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, p := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		out[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, p))
	}
	return out
}

func shortOID(s string) string {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}

func humanSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// Highlighting. Classes, not inline styles, so the stylesheet carries
// the colours and the CSP can refuse inline style.
var (
	codeStyle     = styles.Get("github")
	codeFormatter = chromahtml.New(chromahtml.WithClasses(true), chromahtml.WithLineNumbers(true),
		chromahtml.LineNumbersInTable(true), chromahtml.WithLinkableLineNumbers(true, "L"), chromahtml.TabWidth(4))
	// styleCSS is the page's one stylesheet: ours and the highlighter's.
	styleCSS = mustStyleCSS()
)

// maxHighlight is the largest file highlighted; larger ones are shown
// plain (still with line numbers): lexing time grows with the input.
const maxHighlight = 256 << 10

func mustStyleCSS() []byte {
	var b bytes.Buffer
	b.Write(baseCSS)
	if err := codeFormatter.WriteCSS(&b, codeStyle); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// highlight renders src as escaped, classed HTML with line numbers,
// choosing the lexer by file name.
func highlight(name, src string) (template.HTML, error) {
	lexer := lexers.Match(name)
	if lexer == nil || len(src) > maxHighlight {
		lexer = lexers.Fallback
	}
	it, err := lexer.Tokenise(nil, src)
	if err != nil {
		return "", fmt.Errorf("highlight %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := codeFormatter.Format(&b, codeStyle, chroma.Literator(coalesce(it)...)); err != nil {
		return "", fmt.Errorf("highlight %s: %w", name, err)
	}
	return template.HTML(b.String()), nil // chroma escapes every token
}

// maxRun is the longest run of one token type that coalesce joins
// before it starts another, as chroma.Coalesce does.
const maxRun = 8192

// coalesce joins runs of tokens of one type into one token, exactly as
// chroma.Coalesce does, in linear time: chroma's joins with +, copying
// the run so far for every token it adds (most of the time of a plain
// text file, a token a line, went there).
func coalesce(it chroma.Iterator) []chroma.Token {
	var out []chroma.Token
	var run strings.Builder
	var typ chroma.TokenType
	for t := it(); t != chroma.EOF; t = it() {
		if t.Value == "" {
			continue
		}
		if run.Len() > 0 && (t.Type != typ || run.Len() >= maxRun) {
			out = append(out, chroma.Token{Type: typ, Value: run.String()})
			run = strings.Builder{}
		}
		if run.Len() == 0 {
			typ = t.Type
		}
		run.WriteString(t.Value)
	}
	if run.Len() > 0 {
		out = append(out, chroma.Token{Type: typ, Value: run.String()})
	}
	return out
}

// markdown renders a README. goldmark without WithUnsafe drops raw HTML
// and refuses javascript:, vbscript:, file: and data: (but images) links.
var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(relativeLinks{}, 999))))

// readmeBase is where a README's relative links point: the file view
// (links) and raw bytes (images) of the tree, as URL prefixes ending in
// "/", and the README's directory in it ("" at the root).
type readmeBase struct{ Blob, Raw, Dir string }

var readmeBaseKey = parser.NewContextKey()

// renderMarkdown renders src; relative links resolve against base.
func renderMarkdown(src string, base readmeBase) (template.HTML, error) {
	ctx := parser.NewContext()
	ctx.Set(readmeBaseKey, base)
	var b bytes.Buffer
	if err := markdown.Convert([]byte(src), &b, parser.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("render markdown: %w", err)
	}
	return template.HTML(b.String()), nil // escaped by goldmark; no raw HTML
}

// relativeLinks points a README's relative links at the repository's
// file view and its relative images at raw bytes (this origin, which the
// CSP allows), instead of paths relative to the page's own URL.
type relativeLinks struct{}

func (relativeLinks) Transform(doc *ast.Document, _ text.Reader, pc parser.Context) {
	base, ok := pc.Get(readmeBaseKey).(readmeBase)
	if !ok {
		return
	}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			n.Destination = resolveRelative(base.Blob, base.Dir, n.Destination)
		case *ast.Image:
			n.Destination = resolveRelative(base.Raw, base.Dir, n.Destination)
		}
		return ast.WalkContinue, nil
	})
}

// resolveRelative resolves a relative URL (no scheme, host, absolute path
// or fragment-only form) against dir and prefixes it with prefix; others
// are returned unchanged.
func resolveRelative(prefix, dir string, dest []byte) []byte {
	u, err := url.Parse(string(dest))
	if err != nil || u.Scheme != "" || u.Host != "" || u.Path == "" || strings.HasPrefix(u.Path, "/") {
		return dest
	}
	p := path.Join(dir, u.Path)
	if p == ".." || strings.HasPrefix(p, "../") {
		return dest // above the repository root: leave it, not elsewhere
	}
	u.Path = ""
	return []byte(prefix + escapePath(p) + u.String())
}

// isMarkdown says whether a README is rendered as markdown.
func isMarkdown(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".md") || strings.HasSuffix(n, ".markdown")
}

// readmeOf picks the README among a tree's entries ("" if none):
// README.md before README before other spellings.
func readmeOf(entries []Entry) string {
	best, rank := "", 99
	for _, e := range entries {
		if e.Kind != "blob" {
			continue
		}
		n := strings.ToLower(e.Name)
		r := 99
		switch {
		case n == "readme.md":
			r = 0
		case n == "readme.markdown":
			r = 1
		case n == "readme":
			r = 2
		case strings.HasPrefix(n, "readme."):
			r = 3
		}
		if r < rank {
			best, rank = e.Name, r
		}
	}
	return best
}

// diffFile is one file of a unified diff, split into classed lines.
type diffFile struct {
	Name  string
	Lines []diffLine
}

type diffLine struct {
	Class string // "meta", "hunk", "add", "del" or "ctx"
	Text  string
}

// splitDiff splits a unified diff (git's format) into files and classes
// each line by its role.
func splitDiff(diff string) []diffFile {
	var files []diffFile
	inHunk := false
	for line := range strings.Lines(diff) {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, "diff --git ") || len(files) == 0 {
			files = append(files, diffFile{Name: diffName(line)})
			inHunk = false
		}
		f := &files[len(files)-1]
		class := "ctx"
		switch {
		case strings.HasPrefix(line, "@@"):
			class, inHunk = "hunk", true
		case !inHunk:
			class = "meta"
		case strings.HasPrefix(line, "+"):
			class = "add"
		case strings.HasPrefix(line, "-"):
			class = "del"
		case strings.HasPrefix(line, `\`):
			class = "meta"
		}
		f.Lines = append(f.Lines, diffLine{Class: class, Text: line})
	}
	return files
}

// diffName is the b/ path of a "diff --git a/x b/x" line, else the line.
func diffName(line string) string {
	rest, ok := strings.CutPrefix(line, "diff --git ")
	if !ok {
		return ""
	}
	if i := strings.LastIndex(rest, " b/"); i >= 0 {
		return rest[i+3:]
	}
	return rest
}
