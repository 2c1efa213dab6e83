package api

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rgit/rgit/storage/object"
)

// SearchQuery is what search/{oid} asks: a pattern over the tree's file
// contents (text) or paths (path), and the page's start.
type SearchQuery struct {
	Pattern    string
	Paths      bool // type=path: match file paths, not contents
	Regexp     bool // mode=regexp: Pattern is RE2 syntax, else a literal
	IgnoreCase bool // case=insensitive
	// Page is where this page starts: the `next` of the page before.
	Page searchCursor
	m    *matcher
}

// searchCursor is a position in the tree's files in git's order: the
// file Path, after its line Line (0: from its start). The zero cursor
// is the first file.
type searchCursor struct {
	Path string
	Line int
}

// String is the cursor as page= carries it: "path:line", "" for the
// start.
func (c searchCursor) String() string {
	if c.Path == "" {
		return ""
	}
	return c.Path + ":" + strconv.Itoa(c.Line)
}

func parseCursor(s string) (searchCursor, error) {
	if s == "" {
		return searchCursor{}, nil
	}
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return searchCursor{}, bad("page=%q is not a search page (path:line)", s)
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 0 {
		return searchCursor{}, bad("page=%q is not a search page (path:line)", s)
	}
	parts, err := splitPath(s[:i])
	if err != nil {
		return searchCursor{}, err
	}
	return searchCursor{Path: strings.Join(parts, "/"), Line: n}, nil
}

// maxPatternBytes bounds a search pattern, and maxPatternInsts the
// program it compiles to: the regexp engine's time is linear in the text
// times the program, so both factors are bounded.
const (
	maxPatternBytes = 1000
	maxPatternInsts = 3000
)

// parseSearch reads search's query: q (required), type=text|path,
// mode=literal|regexp, case=sensitive|insensitive, page. The pattern is
// compiled here, so a bad one is a 400 before anything is read.
func parseSearch(v url.Values) (*SearchQuery, error) {
	s := &SearchQuery{Pattern: v.Get("q")}
	switch {
	case s.Pattern == "":
		return nil, bad("search needs q")
	case len(s.Pattern) > maxPatternBytes:
		return nil, bad("q is longer than %d bytes", maxPatternBytes)
	case !utf8.ValidString(s.Pattern):
		return nil, bad("q is not UTF-8")
	}
	var err error
	if s.Paths, err = choice(v, "type", "text", "path"); err != nil {
		return nil, err
	}
	if s.Regexp, err = choice(v, "mode", "literal", "regexp"); err != nil {
		return nil, err
	}
	if s.IgnoreCase, err = choice(v, "case", "sensitive", "insensitive"); err != nil {
		return nil, err
	}
	if s.Page, err = parseCursor(v.Get("page")); err != nil {
		return nil, err
	}
	if s.m, err = compileMatcher(s.Pattern, s.Regexp, s.IgnoreCase); err != nil {
		return nil, err
	}
	return s, nil
}

// choice reads a two-valued parameter: false for off (or absent), true
// for on, anything else a 400.
func choice(v url.Values, key, off, on string) (bool, error) {
	switch v.Get(key) {
	case "", off:
		return false, nil
	case on:
		return true, nil
	}
	return false, bad("%s=%q: want %s or %s", key, v.Get(key), off, on)
}

// values is the canonical query: every parameter spelled out, so two
// requests share a cache entry exactly when they ask the same thing.
func (s *SearchQuery) values() url.Values {
	v := url.Values{"q": {s.Pattern}, "type": {"text"}, "mode": {"literal"}, "case": {"sensitive"}}
	if s.Paths {
		v.Set("type", "path")
	}
	if s.Regexp {
		v.Set("mode", "regexp")
	}
	if s.IgnoreCase {
		v.Set("case", "insensitive")
	}
	if p := s.Page.String(); p != "" {
		v.Set("page", p)
	}
	return v
}

// matcher finds a pattern in text that never spans a line: a literal
// with bytes.Index (an ASCII one without case in ASCII-lowered text, as
// git grep -i does), anything else with Go's regexp (RE2: linear in the
// text, no backtracking). It is one request's: not safe for concurrent
// use.
type matcher struct {
	lit  []byte
	fold bool // lit is lower case, and the text is lowered into buf
	buf  []byte
	re   *regexp.Regexp
}

// compileMatcher compiles a search pattern. A regexp is rewritten so it
// cannot match a newline (negated classes, ., \s and literal newlines
// lose it) and its anchors are the line's, as git grep matches line by
// line: a whole file can then be searched at once and every match lies
// in one line.
func compileMatcher(pattern string, isRegexp, ignoreCase bool) (*matcher, error) {
	switch {
	case !isRegexp && !ignoreCase:
		return &matcher{lit: []byte(pattern)}, nil
	case !isRegexp && isASCII(pattern):
		return &matcher{lit: asciiLower(nil, []byte(pattern)), fold: true}, nil
	}
	src := pattern
	if !isRegexp {
		src = regexp.QuoteMeta(pattern)
	}
	flags := syntax.Perl &^ syntax.OneLine &^ syntax.ClassNL
	if ignoreCase {
		flags |= syntax.FoldCase
	}
	re, err := syntax.Parse(src, flags)
	if err != nil {
		return nil, bad("bad regexp: %v", err)
	}
	re = withinLine(re).Simplify()
	prog, err := syntax.Compile(re)
	if err != nil {
		return nil, bad("bad regexp: %v", err)
	}
	if len(prog.Inst) > maxPatternInsts {
		return nil, bad("regexp too complex (limit %d instructions, fixed)", maxPatternInsts)
	}
	c, err := regexp.Compile(re.String())
	if err != nil {
		return nil, bad("bad regexp: %v", err)
	}
	return &matcher{re: c}, nil
}

// withinLine rewrites re in place to match only inside one line.
func withinLine(re *syntax.Regexp) *syntax.Regexp {
	for i, sub := range re.Sub {
		re.Sub[i] = withinLine(sub)
	}
	switch re.Op {
	case syntax.OpAnyChar:
		re.Op = syntax.OpAnyCharNotNL
	case syntax.OpBeginText:
		re.Op = syntax.OpBeginLine
	case syntax.OpEndText:
		re.Op, re.Flags = syntax.OpEndLine, re.Flags&^syntax.WasDollar
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r == '\n' {
				return &syntax.Regexp{Op: syntax.OpNoMatch}
			}
		}
	case syntax.OpCharClass:
		var out []rune
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if lo <= '\n' && '\n' <= hi {
				if lo < '\n' {
					out = append(out, lo, '\n'-1)
				}
				if hi > '\n' {
					out = append(out, '\n'+1, hi)
				}
				continue
			}
			out = append(out, lo, hi)
		}
		if len(out) == 0 {
			return &syntax.Regexp{Op: syntax.OpNoMatch}
		}
		re.Rune = out
	}
	return re
}

// text is b as the literal is looked for in it.
func (m *matcher) text(b []byte) []byte {
	if !m.fold {
		return b
	}
	m.buf = asciiLower(m.buf[:0], b)
	return m.buf
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// asciiLower appends b with ASCII letters lowered to dst: the same
// length, so offsets into it are offsets into b.
func asciiLower(dst, b []byte) []byte {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// index is the first match in b: its start and end, or -1, -1.
func (m *matcher) index(b []byte) (int, int) {
	if m.re == nil {
		b = m.text(b)
		i := bytes.Index(b, m.lit)
		if i < 0 {
			return -1, -1
		}
		return i, i + len(m.lit)
	}
	loc := m.re.FindIndex(b)
	if loc == nil {
		return -1, -1
	}
	return loc[0], loc[1]
}

// all is up to n non-empty matches in line, in order.
func (m *matcher) all(line []byte, n int) [][2]int {
	var out [][2]int
	if m.re == nil {
		line = m.text(line)
		for at := 0; len(out) < n; {
			i := bytes.Index(line[at:], m.lit)
			if i < 0 {
				break
			}
			out = append(out, [2]int{at + i, at + i + len(m.lit)})
			at += i + len(m.lit)
		}
		return out
	}
	for _, loc := range m.re.FindAllIndex(line, n) {
		if loc[1] > loc[0] {
			out = append(out, [2]int{loc[0], loc[1]})
		}
	}
	return out
}

// Search limits: a page holds at most searchPageHits hits, a hit's text
// is a window of at most maxHitText bytes of its line (around its first
// match) with at most maxHitRanges ranges marked; a file is scanned in
// chunks of searchChunk bytes (cut at a line's end), and the budgets are
// checked between chunks, so one check is never more than a chunk's
// work (the program's size times the chunk) away.
const (
	searchPageHits = 100
	maxHitText     = 400
	maxHitRanges   = 32
	searchChunk    = 16 << 10
	// maxSearchDepth is git's core.maxTreeDepth default.
	maxSearchDepth = 2048
)

// searchHit is one hit: a line of a file (text search) or a path.
type searchHit struct {
	Path string `json:"path"`
	// Line is the line number, from 1 (text search only).
	Line int `json:"line,omitempty"`
	// Text is the line, or a window of it (Clipped) around its first
	// match; invalid UTF-8 shows as U+FFFD.
	Text    string `json:"text,omitempty"`
	Clipped bool   `json:"clipped,omitempty"`
	// Ranges are the matches as byte offsets into Text (or Path, for a
	// path search), [start, end).
	Ranges [][2]int `json:"ranges"`
}

// searchAnswer is search's JSON.
type searchAnswer struct {
	Hits []searchHit `json:"hits"`
	// What this page looked at: files (paths), blobs read and their
	// bytes, and the files skipped as binary or too large.
	Files         int   `json:"files"`
	BlobsRead     int   `json:"blobs_read"`
	BytesScanned  int64 `json:"bytes_scanned"`
	SkippedBinary int   `json:"skipped_binary"`
	SkippedLarge  int   `json:"skipped_large"`
	// SkippedDeep counts directories nested deeper than git allows
	// (core.maxTreeDepth), not searched.
	SkippedDeep int `json:"skipped_deep,omitempty"`
	// Partial: a budget ended the page before the tree did;
	// StoppedReason names it (and the setting that raises it), StoppedAt
	// is the file it stopped in or before.
	Partial       bool   `json:"partial"`
	StoppedReason string `json:"stopped_reason,omitempty"`
	StoppedAt     string `json:"stopped_at,omitempty"`
	// Next is the next page's page= value, "" at the end of the tree.
	Next string `json:"next,omitempty"`
	// timedOut: the time budget stopped it (another try may get further,
	// so nobody stores it).
	timedOut bool
	limit    string // the setting of the budget that stopped it
}

// errStop ends a walk: the answer says where and why.
var errStop = errors.New("search stopped")

// searcher is one search answer being computed.
type searcher struct {
	rd       reader
	s        *SearchQuery
	deadline time.Time
	now      func() time.Time
	// noHit holds blobs already found to have no hit (or to be skipped
	// as binary), so a tree naming one file many times reads it once.
	noHit map[object.ID]bool // true: binary
	a     searchAnswer
}

// search answers q's search over the tree of id. now is the clock the
// time budget is read from.
func (rd reader) search(id object.ID, s *SearchQuery, now func() time.Time) (searchAnswer, error) {
	tree, _, err := rd.peelTo(id, object.Tree)
	if err != nil {
		return searchAnswer{}, err
	}
	sr := &searcher{rd: rd, s: s, now: now, deadline: now().Add(rd.w.lim.SearchTimeout), noHit: map[object.ID]bool{}}
	sr.a.Hits = []searchHit{}
	err = sr.walk(tree, "", 0)
	if err != nil && !errors.Is(err, errStop) {
		return searchAnswer{}, err
	}
	return sr.a, nil
}

// stop ends the page at cursor at. A limit (a budget) makes it partial.
func (sr *searcher) stop(at searchCursor, limit error) error {
	sr.a.Next = at.String()
	if limit != nil {
		sr.a.Partial, sr.a.StoppedReason, sr.a.StoppedAt = true, limit.Error(), at.Path
		if le, ok := asLimit(limit); ok {
			sr.a.limit = le.Setting
			sr.a.timedOut = le.Setting == SettingSearchTimeout
		}
	}
	return errStop
}

// budget is the limit the work done so far is over, nil if none.
func (sr *searcher) budget() error {
	lim := sr.rd.w.lim
	switch {
	case sr.a.BytesScanned >= lim.MaxSearchBytes:
		return limitErr("search read too many bytes", lim.MaxSearchBytes, "bytes", SettingMaxSearchBytes)
	case sr.a.Files >= lim.MaxSearchFiles:
		return limitErr("search looked at too many files", int64(lim.MaxSearchFiles), "", SettingMaxSearchFiles)
	case sr.a.BlobsRead >= lim.MaxSearchBlobs:
		return limitErr("search read too many files", int64(lim.MaxSearchBlobs), "", SettingMaxSearchBlobs)
	case !sr.now().Before(sr.deadline):
		return limitErr("search took too long", lim.SearchTimeout.Milliseconds(), "ms", SettingSearchTimeout)
	}
	return sr.rd.w.ctx.Err()
}

// walk searches the files of tree (at prefix, depth deep) in git's order,
// from the page's cursor on. Entries before the cursor are passed over
// uncounted, and the entry budget stops a page only at an entry after
// it, so every page ends past where it started.
func (sr *searcher) walk(tree object.ID, prefix string, depth int) error {
	_, data, err := sr.rd.peelTo(tree, object.Tree)
	if err != nil {
		return err
	}
	it := object.NewTreeIter(data)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		full := prefix + string(e.Name)
		dir := e.Mode&0o170000 == object.ModeTree
		pos := sr.place(full, dir)
		if pos == beforePage {
			continue
		}
		if err := sr.rd.w.visit(1); err != nil {
			if _, over := asLimit(err); !over {
				return err
			} else if pos == afterPage {
				return sr.stop(searchCursor{Path: full}, err)
			}
		}
		switch {
		case e.Mode&0o170000 == object.ModeGitlink:
		case dir && depth == maxSearchDepth:
			sr.a.SkippedDeep++
		case dir:
			if err := sr.walk(e.ID, full+"/", depth+1); err != nil {
				return err
			}
		default:
			if err := sr.file(full, e.ID); err != nil {
				return err
			}
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("tree %s: %w", tree, err)
	}
	return nil
}

// Where an entry is relative to the page's cursor.
const (
	beforePage = iota // every path at or under it comes before the cursor
	onPage            // the cursor's file or directory, or one holding it
	afterPage
)

// place is where path (a directory when dir) is relative to the page's
// cursor, in git's order (a directory sorts as its name and "/").
func (sr *searcher) place(path string, dir bool) int {
	c := sr.s.Page.Path
	switch {
	case c == "":
		return afterPage
	case path == c, dir && strings.HasPrefix(c, path+"/"):
		return onPage
	case dir && path+"/" < c, !dir && path < c:
		return beforePage
	}
	return afterPage
}

// file searches one file (its path, or its content) at path.
func (sr *searcher) file(path string, id object.ID) error {
	// Each file starts with a look at the budgets, except the page's
	// first, so every page gets somewhere.
	if sr.a.Files > 0 {
		if err := sr.budget(); err != nil {
			return sr.stopAt(searchCursor{Path: path}, err)
		}
	}
	// A page that starts after a line of its first file starts after
	// that file's path hit, and does not know the file's first lines.
	resumed := path == sr.s.Page.Path && sr.s.Page.Line > 0
	sr.a.Files++
	if sr.s.Paths {
		if resumed {
			return nil
		}
		if sr.s.m.matchPath(path) {
			return sr.hit(searchHit{Path: path, Ranges: nonNil(sr.s.m.all([]byte(path), maxHitRanges))}, searchCursor{Path: path, Line: 1})
		}
		return nil
	}
	if binary, seen := sr.noHit[id]; seen {
		if binary {
			sr.a.SkippedBinary++
		}
		return nil
	}
	_, size, err := sr.rd.objs.ReadHeader(id)
	if errors.Is(err, object.ErrNotFound) {
		return notFound("no object %s", id)
	}
	if err != nil {
		return fmt.Errorf("object %s: %w", id, err)
	}
	if size > sr.rd.w.lim.MaxSearchFileBytes {
		sr.a.SkippedLarge++
		return nil
	}
	_, data, err := sr.rd.read(id)
	if err != nil {
		return err
	}
	sr.a.BlobsRead++
	if hasNUL(data) {
		sr.a.SkippedBinary++
		sr.noHit[id] = true
		return nil
	}
	found, err := sr.scan(path, data)
	if err == nil && !found && !resumed {
		sr.noHit[id] = false
	}
	return err
}

// stopAt stops at a budget, or returns the context's error.
func (sr *searcher) stopAt(at searchCursor, err error) error {
	if _, over := asLimit(err); over {
		return sr.stop(at, err)
	}
	return err
}

// scan searches a text file's content a chunk at a time, from the
// cursor's line when path is the cursor's file. found: it had a hit.
func (sr *searcher) scan(path string, data []byte) (found bool, err error) {
	pos, line := 0, 0 // pos starts line+1
	if path == sr.s.Page.Path {
		for line < sr.s.Page.Line && pos < len(data) {
			i := bytes.IndexByte(data[pos:], '\n')
			if i < 0 {
				pos = len(data)
				break
			}
			pos += i + 1
			line++
		}
	}
	for first := true; pos < len(data); first = false {
		if !first {
			if err := sr.budget(); err != nil {
				return found, sr.stopAt(searchCursor{Path: path, Line: line}, err)
			}
		}
		end := min(pos+searchChunk, len(data))
		if i := bytes.IndexByte(data[end:], '\n'); i >= 0 {
			end += i + 1
		} else {
			end = len(data)
		}
		sr.a.BytesScanned += int64(end - pos)
		for pos < end {
			i, _ := sr.s.m.index(data[pos:end])
			if i < 0 || pos+i == end && data[end-1] == '\n' { // (?m)^ matches after the last newline: no line there
				line += bytes.Count(data[pos:end], []byte{'\n'})
				pos = end
				break
			}
			ls := pos + bytes.LastIndexByte(data[pos:pos+i], '\n') + 1 // the hit line's start
			line += bytes.Count(data[pos:ls], []byte{'\n'}) + 1
			le := end
			if j := bytes.IndexByte(data[ls:end], '\n'); j >= 0 {
				le = ls + j
			}
			found = true
			if err := sr.hit(sr.lineHit(path, line, data[ls:le]), searchCursor{Path: path, Line: line}); err != nil {
				return found, err
			}
			pos = min(le+1, end)
		}
	}
	return found, nil
}

// hit adds h; a full page stops at after.
func (sr *searcher) hit(h searchHit, after searchCursor) error {
	sr.a.Hits = append(sr.a.Hits, h)
	if len(sr.a.Hits) == searchPageHits {
		return sr.stop(after, nil)
	}
	return nil
}

// lineHit is the hit for line n (its bytes, without the newline): a
// window of at most maxHitText bytes around its first match, the
// matches in it marked.
func (sr *searcher) lineHit(path string, n int, line []byte) searchHit {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	text := []byte(strings.ToValidUTF8(string(line), "\uFFFD"))
	h := searchHit{Path: path, Line: n}
	ranges := sr.s.m.all(text, maxHitRanges)
	from, to := hitWindow(text, ranges, maxHitText)
	h.Clipped = from > 0 || to < len(text)
	h.Text = string(text[from:to])
	h.Ranges = [][2]int{}
	for _, r := range ranges {
		if r[0] >= from && r[1] <= to {
			h.Ranges = append(h.Ranges, [2]int{r[0] - from, r[1] - from})
		}
	}
	return h
}

// hitWindow is the part of text shown: all of it when it fits in limit
// bytes, else limit bytes from a little before the first match (its
// end in view when it fits, its start always), cut at rune boundaries.
func hitWindow(text []byte, ranges [][2]int, limit int) (from, to int) {
	if len(text) <= limit {
		return 0, len(text)
	}
	if len(ranges) > 0 {
		s, e := ranges[0][0], ranges[0][1]
		from = max(min(max(s-limit/4, e-limit), s, len(text)-limit), 0)
	}
	to = min(from+limit, len(text))
	for from > 0 && !utf8.RuneStart(text[from]) {
		from++
	}
	for to < len(text) && !utf8.RuneStart(text[to]) {
		to--
	}
	return from, to
}

// matchPath reports whether path matches.
func (m *matcher) matchPath(path string) bool {
	i, _ := m.index([]byte(path))
	return i >= 0
}

func nonNil(r [][2]int) [][2]int {
	if r == nil {
		return [][2]int{}
	}
	return r
}
