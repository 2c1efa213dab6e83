package web

import (
	"path"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/chroma/v2"
)

// A highlighter for the languages most files are in, in one linear pass.
// chroma's lexers are regexp2 state machines: a 64 KiB Go file took
// more than the 150 ms budget (so it showed plain) where cgit serves the
// page in 16 ms. This one knows only what a reader's eye uses —
// keywords, strings, comments, numbers, operators — and emits chroma's
// token types, so the page's classes and stylesheet are chroma's; every
// other language still goes to chroma under the budget. Each byte is
// looked at a bounded number of times: no backtracking, no per-line
// rescans, so a hostile file (unterminated strings or comments, a
// megabyte line) costs what an ordinary one of its size costs.

// quoteTable is the rule of each byte that opens a string (nil: none),
// looked up at most bytes of a source.
type quoteTable [256]*quoteRule

// quoteRule is how a string opened by one quote byte ends.
type quoteRule struct {
	multiline bool // the string may span lines (else a newline ends it)
	escapes   bool // a backslash escapes the next byte
	char      bool // a character literal: closed within maxCharLit bytes, else the quote is punctuation (Rust's 'a lifetimes)
}

// maxVarBraces bounds a shell ${…} expansion.
const maxVarBraces = 256

// maxCharLit bounds a character literal ('\u{10FFFF}' is the longest).
const maxCharLit = 12

// langSpec is one language family's lexical rules.
type langSpec struct {
	line         []string // line comment openers
	block        [2]string
	nested       bool // block comments nest (Rust)
	hashAfterGap bool // "#" opens a comment only at a word's start (shell, YAML)
	quotes       quoteTable
	triple       bool // """ and ''' strings (Python)
	vars         bool // $name, ${…} are variables (shell)
	keys         bool // a name or string before ":" is a key (JSON, YAML)
	preproc      bool // a line starting with "#" is a preprocessor line (C)
	words        map[string]chroma.TokenType
	// decl is the keyword after which the next name is declared as a
	// function (func, def, fn).
	decl string
}

// words builds a keyword table: each space-separated word in s has type t.
func words(m map[string]chroma.TokenType, t chroma.TokenType, s string) map[string]chroma.TokenType {
	if m == nil {
		m = map[string]chroma.TokenType{}
	}
	for _, w := range strings.Fields(s) {
		m[w] = t
	}
	return m
}

var (
	cQuotes = quoteTable{'"': {escapes: true}, '\'': {escapes: true, char: true}}
	// Go's and JavaScript's backquoted strings span lines; Go's have no
	// escapes.
	goQuotes = quoteTable{'"': {escapes: true}, '\'': {escapes: true, char: true}, '`': {multiline: true}}
	jsQuotes = quoteTable{'"': {escapes: true}, '\'': {escapes: true}, '`': {multiline: true, escapes: true}}

	goLang = &langSpec{line: []string{"//"}, block: [2]string{"/*", "*/"}, quotes: goQuotes,
		words: words(words(words(words(nil, chroma.Keyword,
			"break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var"),
			chroma.KeywordType, "any bool byte comparable complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune string uint uint8 uint16 uint32 uint64 uintptr"),
			chroma.KeywordConstant, "true false nil iota"),
			chroma.NameBuiltin, "append cap clear close complex copy delete imag len make max min new panic print println real recover"),
		decl: "func"}
	cLang = &langSpec{line: []string{"//"}, block: [2]string{"/*", "*/"}, quotes: cQuotes, preproc: true,
		words: words(words(words(nil, chroma.Keyword,
			"alignas alignof asm auto break case catch class const constexpr consteval constinit const_cast continue co_await co_return co_yield decltype default delete do dynamic_cast else enum explicit export extern final for friend goto if inline mutable namespace new noexcept operator override private protected public register reinterpret_cast requires return sizeof static static_assert static_cast struct switch template this thread_local throw try typedef typeid typename union using virtual volatile while"),
			chroma.KeywordType, "bool char char8_t char16_t char32_t double float int long short signed unsigned void wchar_t size_t ssize_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t uintptr_t"),
			chroma.KeywordConstant, "true false nullptr NULL")}
	javaLang = &langSpec{line: []string{"//"}, block: [2]string{"/*", "*/"}, quotes: cQuotes,
		words: words(words(words(nil, chroma.Keyword,
			"abstract assert break case catch class const continue default do else enum extends final finally for goto if implements import instanceof interface native new package private protected public record return sealed static strictfp super switch synchronized this throw throws transient try var volatile while yield"),
			chroma.KeywordType, "boolean byte char double float int long short void"),
			chroma.KeywordConstant, "true false null")}
	jsLang = &langSpec{line: []string{"//"}, block: [2]string{"/*", "*/"}, quotes: jsQuotes,
		words: words(words(words(nil, chroma.Keyword,
			"as async await break case catch class const continue debugger declare default delete do else enum export extends finally for from function get if implements import in instanceof interface let new of package private protected public readonly return set static super switch this throw try type typeof var void while with yield"),
			chroma.KeywordType, "any bigint boolean never number object string symbol unknown"),
			chroma.KeywordConstant, "true false null undefined NaN Infinity"),
		decl: "function"}
	rustLang = &langSpec{line: []string{"//"}, block: [2]string{"/*", "*/"}, nested: true, quotes: cQuotes,
		words: words(words(words(nil, chroma.Keyword,
			"as async await break const continue crate dyn else enum extern fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait type unsafe use where while"),
			chroma.KeywordType, "bool char f32 f64 i8 i16 i32 i64 i128 isize str u8 u16 u32 u64 u128 usize String Vec Option Result Box"),
			chroma.KeywordConstant, "true false None Some Ok Err"),
		decl: "fn"}
	pyLang = &langSpec{line: []string{"#"}, quotes: quoteTable{'"': {escapes: true}, '\'': {escapes: true}}, triple: true,
		words: words(words(words(nil, chroma.Keyword,
			"and as assert async await break class continue def del elif else except finally for from global if import in is lambda match nonlocal not or pass raise return try while with yield"),
			chroma.KeywordConstant, "True False None"),
			chroma.NameBuiltin, "abs all any bool bytes dict enumerate float int isinstance len list map max min object open print range repr set sorted str sum super tuple type zip self cls"),
		decl: "def"}
	shLang = &langSpec{line: []string{"#"}, hashAfterGap: true, vars: true,
		quotes: quoteTable{'"': {multiline: true, escapes: true}, '\'': {multiline: true}},
		words: words(words(nil, chroma.Keyword,
			"case do done elif else esac fi for function if in return select then until while"),
			chroma.NameBuiltin, "alias break cd continue declare echo eval exec exit export local printf read readonly set shift source test trap unset")}
	jsonLang = &langSpec{quotes: quoteTable{'"': {escapes: true}}, keys: true,
		words: words(nil, chroma.KeywordConstant, "true false null")}
	yamlLang = &langSpec{line: []string{"#"}, hashAfterGap: true, keys: true,
		quotes: quoteTable{'"': {multiline: true, escapes: true}, '\'': {multiline: true}},
		words:  words(nil, chroma.KeywordConstant, "true false null yes no on off True False Null")}
)

// fastLangs maps a file's extension (lower case) to its rules.
var fastLangs = map[string]*langSpec{
	".go": goLang,
	".c":  cLang, ".h": cLang, ".cc": cLang, ".cpp": cLang, ".cxx": cLang, ".hh": cLang, ".hpp": cLang, ".hxx": cLang,
	".java": javaLang,
	".js":   jsLang, ".mjs": jsLang, ".cjs": jsLang, ".jsx": jsLang, ".ts": jsLang, ".tsx": jsLang,
	".rs": rustLang,
	".py": pyLang,
	".sh": shLang, ".bash": shLang, ".zsh": shLang,
	".json": jsonLang,
	".yaml": yamlLang, ".yml": yamlLang,
}

// fastLang is the rules for a file name, nil when chroma should lex it.
func fastLang(name string) *langSpec {
	return fastLangs[strings.ToLower(path.Ext(name))]
}

// tokenSink passes tokens on, joining adjacent ones of one type (as
// chroma.Coalesce does, up to maxRun bytes) so that a run of plain text
// is one span-less token.
type tokenSink struct {
	src   string
	out   func(chroma.TokenType, string)
	typ   chroma.TokenType
	start int // of the pending run; -1: none
	end   int
}

func (s *tokenSink) emit(t chroma.TokenType, from, to int) {
	if from >= to {
		return
	}
	if s.start >= 0 && s.typ == t && s.end == from && to-s.start <= maxRun {
		s.end = to
		return
	}
	s.flush()
	s.typ, s.start, s.end = t, from, to
}

func (s *tokenSink) flush() {
	if s.start >= 0 {
		s.out(s.typ, s.src[s.start:s.end])
	}
	s.start = -1
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// lineEnd is the index of the newline ending the line at i (len(src) if none).
func lineEnd(src string, i int) int {
	if j := strings.IndexByte(src[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(src)
}

// lex lexes src by l's rules, passing each token to out in order: they
// spell src.
func (l *langSpec) lex(src string, out func(chroma.TokenType, string)) {
	s := &tokenSink{src: src, out: out, start: -1}
	lineStart := true // only spaces since the last newline
	declNext := false
	n := len(src)
	for i := 0; i < n; {
		c := src[i]
		switch {
		case c == '\n':
			s.emit(chroma.Text, i, i+1)
			i++
			lineStart = true
			continue
		case isSpace(c):
			j := i + 1
			for j < n && isSpace(src[j]) && src[j] != '\n' {
				j++
			}
			s.emit(chroma.Text, i, j)
			i = j
			continue
		}
		wasLineStart := lineStart
		lineStart = false
		if l.preproc && c == '#' && wasLineStart {
			j := lineEnd(src, i)
			// A backslash-continued directive goes on.
			for j < n && j > i && src[j-1] == '\\' {
				j = lineEnd(src, j+1)
			}
			s.emit(chroma.CommentPreproc, i, j)
			i = j
			continue
		}
		if j, ok := l.comment(src, i); ok {
			s.emit(chroma.Comment, i, j)
			i = j
			continue
		}
		if l.triple && i+2 < n && (c == '"' || c == '\'') && src[i+1] == c && src[i+2] == c {
			j := n
			if k := strings.Index(src[i+3:], src[i:i+3]); k >= 0 {
				j = i + 3 + k + 3
			}
			s.emit(chroma.LiteralStringDoc, i, j)
			i = j
			continue
		}
		if q := l.quotes[c]; q != nil {
			if j, ok := quoted(src, i, *q); ok {
				t := chroma.LiteralString
				if q.char {
					t = chroma.LiteralStringChar
				} else if l.keys && isKey(src, j) {
					t = chroma.NameTag
				}
				s.emit(t, i, j)
				i = j
				continue
			}
			s.emit(chroma.Punctuation, i, i+1)
			i++
			continue
		}
		if l.vars && c == '$' && i+1 < n {
			j := i + 1
			if src[j] == '{' {
				// Bounded: a line of unclosed "${" must not be
				// rescanned to its end at each.
				if k := strings.IndexAny(src[j:min(n, j+maxVarBraces)], "}\n"); k >= 0 && src[j+k] == '}' {
					j += k + 1
				}
			} else if strings.IndexByte("@#?*!$-0123456789", src[j]) >= 0 {
				j++ // a special parameter: $@, $1
			} else {
				for j < n && isIdentByte(src[j]) {
					j++
				}
			}
			if j > i+1 {
				s.emit(chroma.NameVariable, i, j)
				i = j
				continue
			}
		}
		if isDigit(c) || c == '.' && i+1 < n && isDigit(src[i+1]) {
			j := number(src, i)
			s.emit(chroma.LiteralNumber, i, j)
			i = j
			declNext = false
			continue
		}
		if isIdentByte(c) {
			j := i + 1
			for j < n && isIdentByte(src[j]) {
				j++
			}
			// YAML keys may hold - and . (a-key.name:).
			for l.keys && j < n && (src[j] == '-' || src[j] == '.') && j+1 < n && isIdentByte(src[j+1]) {
				for j++; j < n && isIdentByte(src[j]); j++ {
				}
			}
			w := src[i:j]
			t, kw := l.words[w]
			switch {
			case l.keys && wasLineStartOrItem(src, i) && isKey(src, j):
				t = chroma.NameTag
			case declNext && !kw:
				t = chroma.NameFunction
			case !kw:
				t = chroma.Text
			}
			s.emit(t, i, j)
			declNext = kw && w == l.decl
			i = j
			continue
		}
		// Everything else is one byte of punctuation or an operator.
		t := chroma.Text
		switch {
		case strings.IndexByte("+-*/%&|^!<>=~?:@", c) >= 0:
			t = chroma.Operator
		case strings.IndexByte("()[]{},;.", c) >= 0:
			t = chroma.Punctuation
		}
		s.emit(t, i, i+1)
		i++
		declNext = false
	}
	s.flush()
}

// comment is the end of a comment starting at i, if one does.
func (l *langSpec) comment(src string, i int) (int, bool) {
	rest := src[i:]
	for _, p := range l.line {
		if rest[0] == p[0] && strings.HasPrefix(rest, p) {
			if l.hashAfterGap && i > 0 && !isSpace(src[i-1]) {
				return 0, false
			}
			return lineEnd(src, i), true
		}
	}
	if l.block[0] == "" || rest[0] != l.block[0][0] || !strings.HasPrefix(rest, l.block[0]) {
		return 0, false
	}
	open, closing := l.block[0], l.block[1]
	if !l.nested {
		if k := strings.Index(rest[len(open):], closing); k >= 0 {
			return i + len(open) + k + len(closing), true
		}
		return len(src), true
	}
	depth := 0
	for j := i; j < len(src); {
		switch {
		case strings.HasPrefix(src[j:], open):
			depth++
			j += len(open)
		case strings.HasPrefix(src[j:], closing):
			depth--
			j += len(closing)
			if depth == 0 {
				return j, true
			}
		default:
			j++
		}
	}
	return len(src), true
}

// quoted is the end of the string opened at i by rule q: past its
// closing quote, or at its line's end (its text's end for a multiline
// one) when it is not closed. A character literal not closed within
// maxCharLit is no literal (ok false).
func quoted(src string, i int, q quoteRule) (int, bool) {
	quote := src[i]
	limit := len(src)
	if q.char {
		// One character, or one escape sequence.
		if i+1 < len(src) && src[i+1] != '\\' {
			_, size := utf8.DecodeRuneInString(src[i+1:])
			if end := i + 1 + size; end < len(src) && src[end] == quote {
				return end + 1, true
			}
			return 0, false
		}
		limit = min(limit, i+maxCharLit)
	}
	for j := i + 1; j < limit; j++ {
		switch c := src[j]; {
		case c == quote:
			return j + 1, true
		case c == '\\' && q.escapes:
			j++ // an escaped newline continues the line too
		case c == '\n' && !q.multiline:
			return j, !q.char
		}
	}
	if q.char {
		return 0, false
	}
	return limit, true
}

// number is the end of the number literal at i: digits, letters
// (0x1F, 1e9, 10u), underscores, dots, and a sign after an exponent.
func number(src string, i int) int {
	hex := strings.HasPrefix(src[i:], "0x") || strings.HasPrefix(src[i:], "0X")
	j := i + 1
	for j < len(src) {
		c := src[j]
		if isIdentByte(c) && c < 0x80 || c == '.' && j+1 < len(src) && isDigit(src[j+1]) {
			j++
			continue
		}
		if (c == '+' || c == '-') && !hex && (src[j-1] == 'e' || src[j-1] == 'E') {
			j++
			continue
		}
		break
	}
	return j
}

// isKey says whether the text at j (past a name or string) is a key's
// colon: optional spaces, then ":" not followed by another ":" (C++'s
// and Rust's paths).
func isKey(src string, j int) bool {
	for j < len(src) && (src[j] == ' ' || src[j] == '\t') {
		j++
	}
	return j < len(src) && src[j] == ':' && (j+1 == len(src) || src[j+1] != ':')
}

// wasLineStartOrItem says whether only indentation and list markers
// ("- ") come before i on its line: where a YAML key may stand. JSON's
// keys are strings, so this only concerns bare names.
func wasLineStartOrItem(src string, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch src[j] {
		case '\n':
			return true
		case ' ', '\t', '-':
		default:
			return false
		}
	}
	return true
}
