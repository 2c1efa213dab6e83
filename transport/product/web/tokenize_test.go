package web

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/alecthomas/chroma/v2"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
)

// tokenString renders tokens as "class:text|…" for comparison (text
// only for typed tokens).
func tokenString(ts []chroma.Token) string {
	var b strings.Builder
	for _, t := range ts {
		if t.Type == chroma.Text {
			continue
		}
		b.WriteString(chroma.StandardTypes[t.Type])
		b.WriteByte(':')
		b.WriteString(t.Value)
		b.WriteByte('|')
	}
	return b.String()
}

// TestFastTokens: what the linear lexer makes of each language's usual
// text and of the inputs that trip naive lexers: unterminated strings
// and comments, nested comments, lifetimes that look like characters,
// escaped quotes, keys. Every answer covers its source exactly.
func TestFastTokens(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"a.go", "package p\n\n// c\nfunc F(s string) int { return len(s) + 0x1F } /* b */\n",
			"k:package|c:// c|k:func|nf:F|p:(|kt:string|p:)|kt:int|p:{|k:return|nb:len|p:(|p:)|o:+|m:0x1F|p:}|c:/* b */|"},
		{"a.go", "var s = `raw\n\\` + \"a\\\"b\" + 'x' + '\\''\n",
			"k:var|o:=|s:`raw\n\\`|o:+|s:\"a\\\"b\"|o:+|sc:'x'|o:+|sc:'\\''|"},
		{"open.go", "x := \"never closed\ny := 1\n", "o::=|s:\"never closed|o::=|m:1|"},
		{"open.go", "/* never closed\nfunc f() {}\n", "c:/* never closed\nfunc f() {}\n|"},
		{"a.c", "#include <stdio.h>\n#define X \\\n  1\nint main(void) { return 1.5e-3f; }\n",
			"cp:#include <stdio.h>|cp:#define X \\\n  1|kt:int|p:(|kt:void|p:)|p:{|k:return|m:1.5e-3f|p:;|p:}|"},
		{"a.rs", "/* a /* b */ still */ fn f<'a>(x: &'a str) -> char { 'z' }\n",
			"c:/* a /* b */ still */|k:fn|nf:f|o:<|p:'|o:>|p:(|o::|o:&|p:'|kt:str|p:)|o:->|kt:char|p:{|sc:'z'|p:}|"},
		{"a.rs", "/* a /* b */ never", "c:/* a /* b */ never|"},
		{"a.py", "def f(x):\n    '''doc\n    more''' # c\n    return x if True else \"#no\"\n",
			"k:def|nf:f|p:(|p:)|o::|sd:'''doc\n    more'''|c:# c|k:return|k:if|kc:True|k:else|s:\"#no\"|"},
		{"a.py", "s = \"\"\"never closed\n", "o:=|sd:\"\"\"never closed\n|"},
		{"a.sh", "echo \"$HOME ${X:-1}\" a#b # c\nfor f in $@; do ${unclosed\n",
			"nb:echo|s:\"$HOME ${X:-1}\"|c:# c|k:for|k:in|nv:$@|p:;|k:do|p:{|"},
		{"a.json", "{\"key\": \"v\", \"n\": -1.5e+3, \"t\": [true, null]}",
			"p:{|nt:\"key\"|o::|s:\"v\"|p:,|nt:\"n\"|o::|o:-|m:1.5e+3|p:,|nt:\"t\"|o::|p:[|kc:true|p:,|kc:null|p:]}|"},
		{"a.yaml", "# top\nname: x # c\nlist:\n  - key-a.b: 'q'\n    url: a#b\nv: true\n",
			"c:# top|nt:name|o::|c:# c|nt:list|o::|o:-|nt:key-a.b|o::|s:'q'|nt:url|o::|nt:v|o::|kc:true|"},
		{"x.ts", "const s = `a ${b}\n` // c\n", "k:const|o:=|s:`a ${b}\n`|c:// c|"},
		{"ü.go", "é := \"ü\" // ß\n", "o::=|s:\"ü\"|c:// ß|"},
	} {
		ts := lexed(fastLang(tc.name), tc.src)
		if got := tokenString(ts); got != tc.want {
			t.Errorf("%s %q:\n got %s\nwant %s", tc.name, tc.src, got, tc.want)
		}
		var all strings.Builder
		for _, tok := range ts {
			if !utf8.ValidString(tok.Value) {
				t.Errorf("%s %q: token %q splits a character", tc.name, tc.src, tok.Value)
			}
			all.WriteString(tok.Value)
		}
		if all.String() != tc.src {
			t.Errorf("%s: tokens spell %q, want the source %q", tc.name, all.String(), tc.src)
		}
	}
}

// TestFastTokensLinear: inputs built to make a lexer rescan (a megabyte
// line of unclosed strings, comments, character quotes, ${ and keys)
// cost about what ordinary code of the same size costs. A rescan per
// token would be a million times slower on these; the bound is loose
// (20x) because the machine may be loaded.
func TestFastTokensLinear(t *testing.T) {
	const size = 1 << 20
	fill := func(unit string) string { return strings.Repeat(unit, size/len(unit)) }
	base := fill("x := f(a, \"s\") // c\n")
	cost := func(l *langSpec, src string) time.Duration {
		best := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			l.lex(src, func(chroma.TokenType, string) {})
			best = min(best, time.Since(start))
		}
		return best
	}
	ref := cost(goLang, base)
	for _, tc := range []struct {
		name string
		l    *langSpec
		src  string
	}{
		{"unclosed strings on one line", goLang, fill("\"")},
		{"unclosed char quotes", rustLang, fill("'a ")},
		{"comment openers", rustLang, fill("/*")},
		{"unclosed triple quotes", pyLang, "'''" + fill("''")},
		{"unclosed ${", shLang, fill("${")},
		{"keys without colons", yamlLang, fill("- a ")},
		{"dashes before a name", yamlLang, fill("-") + "a:"},
		{"one long number", goLang, fill("1")},
	} {
		if d := cost(tc.l, tc.src); d > 20*ref+10*time.Millisecond {
			t.Errorf("%s: %v for %d bytes, ordinary code %v", tc.name, d, len(tc.src), ref)
		}
	}
}

// BenchmarkHighlightGo: the file view's highlighting of 64 KiB of Go
// (the bench's file view): ours (linear lexer, formatCode), and chroma's
// two halves (its Go lexer; its formatter on our tokens).
func BenchmarkHighlightGo(b *testing.B) {
	// This package's own source: real Go, the size of the bench's file.
	names, err := filepath.Glob("*.go")
	if err != nil {
		b.Fatal(err)
	}
	var all strings.Builder
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			b.Fatal(err)
		}
		all.Write(data)
	}
	src := all.String()[:64<<10]
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := highlight("f.go", src, lineRange{}, time.Time{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chroma-lex", func(b *testing.B) {
		for b.Loop() {
			if _, err := lexTokens(lexers.Get("go"), src, time.Time{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chroma-format", func(b *testing.B) {
		tokens := lexed(goLang, src)
		for b.Loop() {
			var out bytes.Buffer
			if err := codeFormatter.Format(&out, codeStyle, chroma.Literator(tokens...)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestFormatCodeAsChroma: formatCode (and highlight, lexing as it
// writes) writes what chroma's formatter writes for the same tokens,
// with and without highlighted lines: text with and without a last
// newline, tokens spanning lines, characters to escape, a thousand lines
// (padded numbers), chroma's own tokens and the linear lexer's.
func TestFormatCodeAsChroma(t *testing.T) {
	goSrc := "package p\n\n/* a\n   <b> & 'c' \"d\"\n*/\nfunc f() string { return `x\ny` }\n" + strings.Repeat("// filler\n", 1000) + "var last = 1"
	var cases [][]chroma.Token
	for _, src := range []string{goSrc, goSrc + "\n", "", "\n\n\n", "one line"} {
		cases = append(cases, lexed(goLang, src))
		tokens, err := lexTokens(lexers.Get("go"), src, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tokens)
	}
	for i, tokens := range cases {
		for _, hl := range []lineRange{{}, {1, 1}, {3, 5}, {1000, 2000}} {
			f := codeFormatter
			if hl.From > 0 {
				f = chromahtml.New(append(slices.Clip(codeOptions), chromahtml.HighlightLines([][2]int{{hl.From, hl.To}}))...)
			}
			var want bytes.Buffer
			if err := f.Format(&want, codeStyle, chroma.Literator(tokens...)); err != nil {
				t.Fatal(err)
			}
			if got := string(formatCode(tokens, hl)); got != want.String() {
				t.Errorf("case %d, lines %v: formatCode differs from chroma's formatter:\n got %.300q\nwant %.300q", i, hl, got, want.String())
			}
			if i%2 == 0 {
				// The linear lexer's tokens: highlight writes them as it lexes.
				var src strings.Builder
				for _, tok := range tokens {
					src.WriteString(tok.Value)
				}
				if got, err := highlight("f.go", src.String(), hl, time.Time{}); err != nil || string(got) != want.String() {
					t.Errorf("case %d, lines %v: highlight differs from chroma's formatter (%v):\n got %.300q\nwant %.300q", i, hl, err, got, want.String())
				}
			}
		}
	}
}

// lexed is the tokens l lexes src into.
func lexed(l *langSpec, src string) []chroma.Token {
	var ts []chroma.Token
	l.lex(src, func(t chroma.TokenType, v string) { ts = append(ts, chroma.Token{Type: t, Value: v}) })
	return ts
}
