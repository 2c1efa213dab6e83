package web

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
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
	"go.uber.org/zap"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/style.css
var baseCSS []byte

// views are the page templates by name, each parsed with the layout.
var views = mustParseViews()

var funcs = template.FuncMap{
	"short": shortOID,
	"when":  formatWhen,
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

func formatWhen(w When) string { return w.UTC().Format("2006-01-02 15:04 MST") }

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
// the colours and the CSP can refuse inline style. Line numbers are
// inline, each line a span holding its number (id L{n}, a link to #L{n}),
// so that the stylesheet can highlight the line a #L{n} URL targets.
var (
	codeOptions = []chromahtml.Option{chromahtml.WithClasses(true), chromahtml.WithLineNumbers(true),
		chromahtml.WithLinkableLineNumbers(true, "L"), chromahtml.TabWidth(4)}
	codeFormatter = chromahtml.New(codeOptions...)
	codeStyle     = styles.Get("github")
	// codeStyleDark colours code when the reader prefers a dark scheme.
	codeStyleDark = styles.Get("github-dark")
	// styleCSS is the page's one stylesheet: the highlighter's, then ours
	// (which wins where both style an element).
	styleCSS = mustStyleCSS()
)

// maxHighlight is the largest file highlighted; larger ones are shown
// plain (still with line numbers): lexing time grows with the input.
const maxHighlight = 256 << 10

// highlightBudget bounds the time one file's highlighting may take; past
// it the file shows plain (coalesce).
const highlightBudget = 150 * time.Millisecond

func mustStyleCSS() []byte {
	// Each scheme's colours apply under its own media query: a class one
	// style colours and the other leaves alone must not keep the colour
	// of the wrong background.
	var b bytes.Buffer
	for _, s := range []struct {
		media string
		style *chroma.Style
	}{{"not all and (prefers-color-scheme: dark)", codeStyle}, {"(prefers-color-scheme: dark)", codeStyleDark}} {
		b.WriteString("@media " + s.media + " {\n")
		if err := codeFormatter.WriteCSS(&b, s.style); err != nil {
			panic(err)
		}
		b.WriteString("}\n")
	}
	b.Write(baseCSS)
	return b.Bytes()
}

// lineRange is the lines a file view highlights (?lines=); zero for none.
type lineRange struct{ From, To int }

// parseLines reads ?lines=: "" (none), "N" or "N-M" (an L before each
// number is allowed, as in the #L10-L20 GitHub writes).
func parseLines(s string) (lineRange, error) {
	if s == "" {
		return lineRange{}, nil
	}
	a, b, isRange := strings.Cut(s, "-")
	from, errA := strconv.Atoi(strings.TrimPrefix(a, "L"))
	to := from
	var errB error
	if isRange {
		to, errB = strconv.Atoi(strings.TrimPrefix(b, "L"))
	}
	if errA != nil || errB != nil || from < 1 || to < from {
		return lineRange{}, fmt.Errorf("bad lines=%q: want N or N-M, 1 <= N <= M", s)
	}
	return lineRange{from, to}, nil
}

// highlight renders src as escaped, classed HTML with numbered, linkable
// lines, choosing the lexer by file name and marking the lines of hl.
func highlight(name, src string, hl lineRange, deadline time.Time) ([]byte, error) {
	if l := fastLang(name); l != nil && len(src) <= maxHighlight {
		// Lexed straight into the HTML, no tokens kept: the concatenated
		// tokens are src, so its lines are theirs.
		lines := strings.Count(src, "\n")
		if src != "" && !strings.HasSuffix(src, "\n") {
			lines++
		}
		w := newCodeWriter(lines, len(src), hl)
		l.lex(src, w.token)
		return w.done(), nil
	}
	tokens, err := codeTokens(name, src, deadline)
	if err != nil {
		return nil, fmt.Errorf("highlight %s: %w", name, err)
	}
	return formatCode(tokens, hl), nil
}

// formatCode writes tokens as codeFormatter (with the lines of hl
// highlighted) writes them, byte for byte (TestFormatCodeAsChroma), at a
// fraction of its cost: chroma formats every line and token with
// fmt.Sprintf and copies each token to escape it, most of the file
// view's time once lexing is linear. Every token is escaped.
func formatCode(tokens []chroma.Token, hl lineRange) []byte {
	lines := 0
	size := 0
	for _, t := range tokens {
		lines += strings.Count(t.Value, "\n")
		size += len(t.Value)
	}
	if n := len(tokens); n > 0 && !strings.HasSuffix(tokens[n-1].Value, "\n") {
		lines++
	}
	w := newCodeWriter(lines, size, hl)
	for _, t := range tokens {
		w.token(t.Type, t.Value)
	}
	return w.done()
}

// codeWriter is formatCode's writer, token by token.
type codeWriter struct {
	b      []byte
	hl     lineRange
	digits int // of the last line's number: every number is padded to it
	line   int
	inLine bool // a line is started
	// The span opening each token type seen, "" for none: a source has
	// a dozen types, and a look along these beats a map's hashing.
	types []chroma.TokenType
	opens []string
}

// maxTypes bounds the token types a codeWriter keeps the spans of.
const maxTypes = 32

// open is the span opening a token of type t ("" for plain text).
func (w *codeWriter) open(t chroma.TokenType) string {
	for i, have := range w.types {
		if have == t {
			return w.opens[i]
		}
	}
	open := ""
	if cls := tokenClass(t); cls != "" {
		open = `<span class="` + cls + `">`
	}
	if len(w.types) < maxTypes {
		w.types, w.opens = append(w.types, t), append(w.opens, open)
	}
	return open
}

// codeBufs keeps code writers' buffers (and the blame table's) from one
// view to the next (releaseCode): a 64 KiB file's HTML is half a
// megabyte, most of the garbage the view made.
var codeBufs sync.Pool

// maxPooledCode is the largest buffer codeBufs keeps.
const maxPooledCode = 4 << 20

// releaseCode gives code, a highlight's HTML no longer used, back to
// codeBufs.
func releaseCode(code []byte) {
	if cap(code) <= maxPooledCode {
		codeBufs.Put(&code)
	}
}

// newCodeWriter starts the HTML of size bytes of source in lines lines.
func newCodeWriter(lines, size int, hl lineRange) *codeWriter {
	w := &codeWriter{hl: hl, digits: len(strconv.Itoa(lines))}
	// About what a line's markup and a token's span take (a 64 KiB Go
	// file is 550 KiB of HTML), so the buffer grows once at most.
	w.b = append(codeBuf(4*size+lines*(128+3*w.digits)+64), `<pre class="chroma"><code>`...)
	return w
}

// codeBuf is an empty buffer of capacity want or more, from codeBufs
// when it has one that large.
func codeBuf(want int) []byte {
	if b, ok := codeBufs.Get().(*[]byte); ok && cap(*b) >= want {
		return (*b)[:0]
	}
	return make([]byte, 0, want)
}

// startLine appends the opening of the next line to b, w.b's contents.
func (w *codeWriter) startLine(b []byte) []byte {
	w.line++
	if w.hl.From > 0 && w.line >= w.hl.From && w.line <= w.hl.To {
		b = append(b, `<span class="line hl">`...)
	} else {
		b = append(b, `<span class="line">`...)
	}
	var buf [20]byte
	num := strconv.AppendInt(buf[:0], int64(w.line), 10)
	b = append(b, `<span class="ln" id="L`...)
	b = append(b, num...)
	b = append(b, `"><a class="lnlinks" href="#L`...)
	b = append(b, num...)
	b = append(b, `">`...)
	for range w.digits - len(num) {
		b = append(b, ' ')
	}
	b = append(b, num...)
	return append(b, `</a></span><span class="cl">`...)
}

// token writes one token of type t, starting and ending lines at its
// newlines. The HTML grows in a local slice, stored back once: every
// store of w.b would be a write barrier while the GC marks.
func (w *codeWriter) token(t chroma.TokenType, v string) {
	open := w.open(t)
	b := w.b
	for v != "" {
		part := v
		if i := strings.IndexByte(v, '\n'); i >= 0 {
			part = v[:i+1]
		}
		v = v[len(part):]
		if !w.inLine {
			b = w.startLine(b)
			w.inLine = true
		}
		b = append(b, open...)
		b = chromaEscapes.append(b, part)
		if open != "" {
			b = append(b, `</span>`...)
		}
		if part[len(part)-1] == '\n' {
			b = append(b, `</span></span>`...)
			w.inLine = false
		}
	}
	w.b = b
}

// done ends the HTML and returns it.
func (w *codeWriter) done() []byte {
	if w.inLine {
		w.b = append(w.b, `</span></span>`...)
	}
	w.b = append(w.b, `</code></pre>`...)
	return w.b
}

// tokenClass is the class chroma's formatter gives a token type: its
// own, else its nearest ancestor's ("" for plain text).
func tokenClass(t chroma.TokenType) string {
	for t != 0 {
		if cls, ok := chroma.StandardTypes[t]; ok {
			return cls
		}
		t = t.Parent()
	}
	return chroma.StandardTypes[t]
}

// codeTokens lexes src for a language fastLang does not know (highlight
// lexes those in one linear pass, no budget needed): with chroma's lexer
// for the name under the deadline, anything larger than maxHighlight
// plain.
func codeTokens(name, src string, deadline time.Time) ([]chroma.Token, error) {
	if len(src) > maxHighlight {
		return lexTokens(lexers.Fallback, src, time.Time{})
	}
	lexer := lexers.Match(name)
	if lexer == nil {
		lexer = lexers.Fallback
	}
	return lexTokens(lexer, src, deadline)
}

// lexTokens lexes src with a chroma lexer; past deadline (zero: none) it
// gives the plain lexer's tokens instead.
func lexTokens(lexer chroma.Lexer, src string, deadline time.Time) ([]chroma.Token, error) {
	it, err := lexer.Tokenise(nil, src)
	if err != nil {
		return nil, err
	}
	tokens, done := coalesce(it, deadline)
	if !done {
		// Out of time: the plain lexer's one token costs nothing.
		if it, err = lexers.Fallback.Tokenise(nil, src); err != nil {
			return nil, err
		}
		tokens, _ = coalesce(it, time.Time{})
	}
	return tokens, nil
}

// maxRun is the longest run of one token type that coalesce joins
// before it starts another, as chroma.Coalesce does.
const maxRun = 8192

// coalesce joins runs of tokens of one type into one token, exactly as
// chroma.Coalesce does, in linear time: chroma's joins with +, copying
// the run so far for every token it adds (most of the time of a plain
// text file, a token a line, went there).
//
// chroma's lexers work as the iterator is read, a few milliseconds per
// kilobyte of source for the regexp-heavy ones: past deadline (zero:
// none) coalesce stops and done is false, so a large file cannot cost a
// stranger's request seconds of CPU.
func coalesce(it chroma.Iterator, deadline time.Time) (out []chroma.Token, done bool) {
	var run strings.Builder
	var typ chroma.TokenType
	n := 0
	for t := it(); t != chroma.EOF; t = it() {
		if n++; n%256 == 0 && !deadline.IsZero() && time.Now().After(deadline) {
			return nil, false
		}
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
	return out, true
}

// fileView is how the blob page shows a file.
type fileView struct {
	Kind     string        // see fileKind
	HTML     template.HTML // the rendered Markdown, or bulkMark standing for Code
	Code     []byte        // the numbered source's HTML, written in the page around the template (renderAround)
	Source   string        // on rendered Markdown, a link to its source
	Rendered string        // on a Markdown file's source, a link to its rendering
	Lines    lineRange     // the lines highlighted
}

// fileKind decides how a file is shown:
//
//	a Git LFS pointer                      "lfs": its size and a download link
//	binary, named as a png/jpeg/gif/webp   "image": <img> of its raw bytes
//	other binary                           "binary": a download link
//	Markdown that fits (markdownFits), !plain  "markdown": rendered
//	anything else                          "code": numbered source
//
// SVG is text: raw serves it as text/plain, so it shows as source.
func fileKind(name string, b Blob, plain bool) string {
	switch {
	case b.LFS != nil:
		return "lfs"
	case b.Binary && isImage(name):
		return "image"
	case b.Binary:
		return "binary"
	case isMarkdown(name) && !plain && markdownFits(b.Content):
		return "markdown"
	}
	return "code"
}

// isImage says whether a file's name is that of an image browsers show
// and raw serves with an image type.
func isImage(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".png", ".jpg", ".jpeg", ".gif", ".webp":
		return true
	}
	return false
}

// fileView renders file p at commit oid from the API's answer b and the
// request's query (plain=1: source, not rendering; lines=N-M: source with
// those lines marked). A bad lines= is the caller's error.
func (h *Handler) fileView(q *repoReq, p string, b Blob, query url.Values) (fileView, error) {
	lines, err := parseLines(query.Get("lines"))
	if err != nil {
		return fileView{}, err
	}
	// Lines are lines of the source: asking for some shows it.
	plain := query.Get("plain") == "1" || lines.From > 0
	v := fileView{Kind: fileKind(p, b, plain)}
	self := "./" + url.PathEscape(path.Base(p))
	if v.Kind == "markdown" {
		dir := path.Dir(p)
		if dir == "." {
			dir = ""
		}
		if v.HTML, err = renderMarkdown(b.Content, q.linkBase(dir)); err == nil {
			v.Source = self + "?plain=1"
			return v, nil
		}
		h.log.Warn("web: markdown failed; shown as source", zap.String("path", p), zap.Error(err))
		v.Kind = "code"
	}
	if v.Kind != "code" {
		return v, nil
	}
	if plain && isMarkdown(p) {
		v.Rendered = self
	}
	v.Lines = lines
	if v.Code, err = highlight(p, b.Content, lines, time.Now().Add(highlightBudget)); err != nil {
		h.log.Warn("web: highlighting failed; shown plain", zap.String("path", p), zap.Error(err))
		v.Code, _ = highlight("", b.Content, lines, time.Time{})
	}
	v.HTML = bulkMark
	return v, nil
}

// markdown renders Markdown files, the README among them, as GitHub
// does: GFM (tables, strikethrough, task lists, bare links). Without
// WithUnsafe goldmark drops raw HTML. Table cells align with the align
// attribute: the CSP refuses inline style.
var markdown = goldmark.New(
	goldmark.WithExtensions(extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute)),
		extension.Strikethrough, extension.TaskList, extension.Linkify),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(relativeLinks{}, 999))))

// Markdown rendering time grows with the input, and faster than linearly
// with the nesting of containers (quotes, lists) and with the brackets on
// a long line (an unclosed link is looked for to the line's end): a file
// past any of these limits shows as source (markdownFits).
const (
	// maxMarkdown is the largest Markdown file rendered.
	maxMarkdown = 64 << 10
	// maxMarkdownDepth bounds the containers one line opens: quote
	// markers, list markers, and every 4 columns of indentation.
	maxMarkdownDepth = 16
	// maxMarkdownLinkScan bounds the sum over lines of the line's "["
	// times its length (an ordinary document: thousands).
	maxMarkdownLinkScan = 4 << 20
)

// markdownFits says whether src is within the limits above, in one pass.
func markdownFits(src string) bool {
	if len(src) > maxMarkdown {
		return false
	}
	scan := 0
	for line := range strings.Lines(src) {
		scan += strings.Count(line, "[") * len(line)
		if scan > maxMarkdownLinkScan || prefixDepth(line) > maxMarkdownDepth {
			return false
		}
	}
	return true
}

// prefixDepth counts the containers a line's prefix can open: each ">",
// each list marker ("-", "*", "+", "1." or "1)" before a space) and each
// 4 columns of spaces or tabs.
func prefixDepth(line string) int {
	depth, cols := 0, 0
	for i := 0; i < len(line); {
		switch c := line[i]; {
		case c == ' ':
			cols++
			i++
		case c == '\t':
			cols += 4
			i++
		case c == '>':
			depth++
			i++
		case (c == '-' || c == '*' || c == '+') && i+1 < len(line) && line[i+1] == ' ':
			depth++
			i += 2
		case '0' <= c && c <= '9':
			j := i
			for j < len(line) && '0' <= line[j] && line[j] <= '9' {
				j++
			}
			if j+1 >= len(line) || (line[j] != '.' && line[j] != ')') || line[j+1] != ' ' {
				return depth + cols/4
			}
			depth++
			i = j + 2
		default:
			return depth + cols/4
		}
	}
	return depth + cols/4
}

// linkBase is where a Markdown file's links point: URL prefixes ending
// in "/" of the file view (Blob), directory view (Tree) and raw bytes
// (Raw, for images) of one commit, and the file's directory in it (""
// at the root).
type linkBase struct{ Blob, Tree, Raw, Dir string }

// linkBase is the link base of a Markdown file in dir at commit oid.
func (q *repoReq) linkBase(dir string) linkBase {
	return linkBase{Blob: q.link("blob", "") + "/", Tree: q.link("tree", "") + "/", Raw: q.link("raw", "") + "/", Dir: dir}
}

var linkBaseKey = parser.NewContextKey()

// errMarkdownTooLarge refuses a Markdown file past markdownFits' limits.
var errMarkdownTooLarge = errors.New("markdown too large or too deeply nested to render")

// renderMarkdown renders src; its links resolve against base.
func renderMarkdown(src string, base linkBase) (template.HTML, error) {
	if !markdownFits(src) {
		return "", errMarkdownTooLarge
	}
	ctx := parser.NewContext()
	ctx.Set(linkBaseKey, base)
	var b bytes.Buffer
	if err := markdown.Convert([]byte(src), &b, parser.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("render markdown: %w", err)
	}
	return template.HTML(b.String()), nil // escaped by goldmark; no raw HTML
}

// relativeLinks points a Markdown file's links into the repository at the
// same commit (resolveLink), and unwraps those that lead nowhere safe: a
// dropped link keeps its text, a dropped image its description.
type relativeLinks struct{}

func (relativeLinks) Transform(doc *ast.Document, _ text.Reader, pc parser.Context) {
	base, ok := pc.Get(linkBaseKey).(linkBase)
	if !ok {
		return
	}
	var drop []ast.Node
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		var dest *[]byte
		image := false
		switch n := n.(type) {
		case *ast.Link:
			dest = &n.Destination
		case *ast.Image:
			dest, image = &n.Destination, true
		default:
			return ast.WalkContinue, nil
		}
		// Decided on the URL the renderer writes: with backslash
		// escapes and character references resolved.
		out, keep := resolveLink(base, string(util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(*dest)))), image)
		if !keep {
			drop = append(drop, n)
		}
		*dest = []byte(out)
		return ast.WalkContinue, nil
	})
	for _, n := range drop { // after the walk: unwrapping changes the tree
		parent := n.Parent()
		for c := n.FirstChild(); c != nil; c = n.FirstChild() {
			parent.InsertBefore(parent, n, c)
		}
		parent.RemoveChild(parent, n)
	}
}

// resolveLink decides where a Markdown link (or, with image, an image)
// to dest points, and whether it is kept:
//
//	dest                          kept  points at
//	http:, https:, mailto:, //h   yes   dest, unchanged (another site)
//	#frag, "" or ?query only      yes   dest, unchanged (this page)
//	other scheme (javascript:…)   no    -
//	a/b.md, ./b.md, ../b.md       yes   Blob (image: Raw) + path from Dir
//	/a/b.md                       yes   the same from the repository root
//	a/, / (a trailing slash)      yes   Tree + path (image: Raw)
//	../ above the root            no    -
//	unparsable                    no    -
//
// A resolved link keeps its query and fragment.
func resolveLink(base linkBase, dest string, image bool) (string, bool) {
	u, err := url.Parse(dest)
	switch {
	case err != nil:
		return "", false
	case u.Scheme != "":
		switch strings.ToLower(u.Scheme) {
		case "http", "https", "mailto":
			return dest, true
		}
		return "", false
	case u.Host != "" || u.Path == "":
		return dest, true
	}
	p := path.Join(base.Dir, u.Path)
	if root, ok := strings.CutPrefix(u.Path, "/"); ok {
		p = path.Clean(root)
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", false
	}
	dir := strings.HasSuffix(u.Path, "/") || p == "."
	if p == "." {
		p = ""
	}
	prefix := base.Blob
	switch {
	case image:
		prefix = base.Raw
	case dir || p == "":
		prefix = base.Tree
	}
	u.Path = ""
	if p == "" {
		prefix = strings.TrimSuffix(prefix, "/")
	}
	return prefix + escapePath(p) + u.String(), true
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

// diffFile is one file of a unified diff: its header, read from git's
// extended header lines (which are not shown), and its lines.
type diffFile struct {
	Name    string // the path (the new one of a rename)
	OldName string // the old path of a rename, else ""
	Change  string // "added", "deleted", "renamed", "mode changed" or "modified"
	Binary  bool   // a binary file: no lines
	Lines   []diffLine
}

// diffLine is one line of a diff with its numbers in the old and the new
// file (0 where it is not in that file).
type diffLine struct {
	Class    string // "hunk", "add", "del", "ctx" or "meta"
	Old, New int
	Text     string
}

// splitDiff splits a unified diff (git's format, as the API writes it)
// into files. A file's header lines (diff --git, index, ---, +++, mode,
// rename) become its Name, OldName, Change and Binary; hunk lines are
// numbered from their @@ header. A diff cut short ends where it stops.
func splitDiff(diff string) []diffFile {
	var files []diffFile
	inHunk := false
	oldN, newN := 0, 0
	for line := range strings.Lines(diff) {
		line = strings.TrimSuffix(line, "\n")
		if rest, ok := strings.CutPrefix(line, "diff --git "); ok || len(files) == 0 {
			files = append(files, diffFile{Name: gitHeaderName(rest), Change: "modified"})
			inHunk = false
			if ok {
				continue
			}
		}
		f := &files[len(files)-1]
		if strings.HasPrefix(line, "@@") {
			oldN, newN, _ = parseHunk(line)
			inHunk = true
			f.Lines = append(f.Lines, diffLine{Class: "hunk", Text: line})
			continue
		}
		if !inHunk {
			if !f.header(line) {
				f.Lines = append(f.Lines, diffLine{Class: "meta", Text: line})
			}
			continue
		}
		l := diffLine{Class: "ctx", Text: line}
		switch {
		case strings.HasPrefix(line, "+"):
			l.Class, l.New = "add", newN
			newN++
		case strings.HasPrefix(line, "-"):
			l.Class, l.Old = "del", oldN
			oldN++
		case strings.HasPrefix(line, `\`):
			l.Class = "meta"
		default:
			l.Old, l.New = oldN, newN
			oldN++
			newN++
		}
		f.Lines = append(f.Lines, l)
	}
	return files
}

// header takes in one of git's extended header lines, reporting whether
// it was one.
func (f *diffFile) header(line string) bool {
	key, val, _ := strings.Cut(line, " ")
	switch key {
	case "index", "similarity", "dissimilarity", "copy", "---":
	case "new":
		if strings.HasPrefix(val, "file mode ") {
			f.Change = "added"
		}
	case "deleted":
		f.Change = "deleted"
	case "old":
		if f.Change == "modified" {
			f.Change = "mode changed"
		}
	case "rename":
		if from, ok := strings.CutPrefix(val, "from "); ok {
			f.OldName, f.Change = from, "renamed"
		} else if to, ok := strings.CutPrefix(val, "to "); ok {
			f.Name = to
		}
	case "+++":
		if name, ok := strings.CutPrefix(val, "b/"); ok {
			f.Name = name
		}
	case "Binary":
		f.Binary = true
	default:
		return false
	}
	return true
}

// gitHeaderName is the path a "diff --git a/x b/x" line names (the rest
// after "diff --git "). Unquoted paths may hold spaces, so the line is
// split where a/ and b/ name the same path, as they do unless the file
// was renamed (then rename lines name both).
func gitHeaderName(rest string) string {
	if n := len(rest); n%2 == 1 && strings.HasPrefix(rest, "a/") {
		a, b := rest[:n/2], rest[n/2+1:]
		if rest[n/2] == ' ' && strings.HasPrefix(b, "b/") && a[2:] == b[2:] {
			return b[2:]
		}
	}
	if i := strings.LastIndex(rest, " b/"); i >= 0 {
		return rest[i+3:]
	}
	return rest
}

// parseHunk reads the first old and new line numbers of a hunk header
// ("@@ -12,5 +14,6 @@ context").
func parseHunk(line string) (oldStart, newStart int, ok bool) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "@@" {
		return 0, 0, false
	}
	o, okO := hunkStart(f[1], "-")
	n, okN := hunkStart(f[2], "+")
	return o, n, okO && okN
}

func hunkStart(field, sign string) (int, bool) {
	s, ok := strings.CutPrefix(field, sign)
	if !ok {
		return 0, false
	}
	s, _, _ = strings.Cut(s, ",")
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
