package web

import (
	"html/template"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The markup pickerHTML and refRowsHTML replaced, as the templates had
// it: the hand-written HTML must be what these write.
const (
	pickerTemplate  = `{{range .}}<li{{if .Current}} class="current"{{end}}><a href="{{.Href}}">{{if .Tag}}tag: {{end}}{{.Name}}</a></li>{{else}}<li class="muted">no branches or tags</li>{{end}}`
	refRowsTemplate = `{{range .Rows}}<tr>
<td><a class="refname" href="{{.Href}}">{{.Name}}</a>{{if .Default}} <span class="badge" id="default">default</span>{{end}}
{{with .Tag}}<div class="annotation">{{.Message}}</div>{{end}}</td>
<td>{{with .Commit}}<a class="subject" href="{{.Href}}">{{.Subject}}</a> <span class="muted">{{.Author.Name}}</span>{{end}}</td>
<td class="muted">{{if not .Date.IsZero}}{{when .Date}}{{end}}</td>
{{if $.Branches}}<td class="divergence">{{if .Ahead}}<span title="commits not in the default branch">{{.Ahead}} ahead</span> · <span title="commits of the default branch not here">{{.Behind}} behind</span>{{end}}</td>{{end}}
<td>{{with .Commit}}<a href="{{.Href}}"><code>{{short .OID}}</code></a>{{end}}</td>
</tr>{{else}}<tr><td class="muted">none</td></tr>{{end}}`
	blameRowsTemplate = `{{range .Runs}}<tbody class="run">
<tr class="who"><td colspan="2"><a href="{{.Href}}"><code>{{short .OID}}</code></a> <b class="author">{{.C.Author.Name}}</b> <span class="muted">{{when .C.Author.Time}}</span> <span class="summary">{{.C.Summary}}</span>{{if .C.Path}}{{if ne .C.Path $.Path}} <span class="muted">(as {{.C.Path}})</span>{{end}}{{end}}</td></tr>
{{range .Lines}}<tr><td class="ln"><a id="L{{.N}}" href="#L{{.N}}">{{.N}}</a></td><td class="code">{{.Text}}</td></tr>
{{end}}</tbody>{{end}}`
)

// blameRowsData is what blameRowsTemplate ranged over.
type blameRowsData struct {
	Path string
	Runs []blameRunData
}

type blameRunData struct {
	OID, Href string
	C         BlameCommit
	Lines     []blameLineData
}

type blameLineData struct {
	N    int
	Text string
}

// hostileStrings are what names, messages and links may hold: every
// byte html/template escapes or percent-encodes, schemes it refuses,
// escapes it keeps, bad UTF-8.
var hostileStrings = []string{"", "main", "feature/x/y", hostile, "a+b&c'd\"e<f>g\x00h", "javascript:alert(1)",
	"JavaScript:x", "/o/r/tree/a%2Fb/%zz/%4", "https://x/?a=1&b=2#f", "mailto:a@b", "data:text/html,x", "/a:b/c",
	"ü é \xff\xfe", "%41%", "\t\n\r !#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\x7f"}

// randomString is n bytes, mostly from the ones that matter to escaping.
func randomString(r *rand.Rand, n int) string {
	const interesting = "&+%'\"<>:/#?=@[]!$*,;-._~ aZ09\x00\x7f\xc3\xbc\xff"
	var b strings.Builder
	for range n {
		if r.IntN(4) == 0 {
			b.WriteByte(byte(r.IntN(256)))
		} else {
			b.WriteByte(interesting[r.IntN(len(interesting))])
		}
	}
	return b.String()
}

func mustTemplate(t *testing.T, src string) *template.Template {
	t.Helper()
	return template.Must(template.New("t").Funcs(funcs).Parse(src))
}

func execute(t *testing.T, tmpl *template.Template, data any) string {
	t.Helper()
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestHandHTMLAsTemplate: text and URL attributes escaped as
// html/template escapes them, for hostile and random strings; the
// picker, the ref rows and the blame rows as their templates wrote them.
func TestHandHTMLAsTemplate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	values := append([]string(nil), hostileStrings...)
	for range 2000 {
		values = append(values, randomString(r, r.IntN(24)))
	}
	textT := mustTemplate(t, `<p title="{{.}}">{{.}}</p>`)
	urlT := mustTemplate(t, `<a href="{{.}}">`)
	for _, s := range values {
		b := appendText(append(appendText([]byte(`<p title="`), s), `">`...), s)
		if got, want := string(b)+`</p>`, execute(t, textT, s); got != want {
			t.Errorf("text %q:\n got %q\nwant %q", s, got, want)
		}
		if got, want := string(appendURLAttr([]byte(`<a href="`), s))+`">`, execute(t, urlT, s); got != want {
			t.Errorf("href %q:\n got %q\nwant %q", s, got, want)
		}
	}

	pickerT, rowsT, blameT := mustTemplate(t, pickerTemplate), mustTemplate(t, refRowsTemplate), mustTemplate(t, blameRowsTemplate)
	some := func() string { return values[r.IntN(len(values))] }
	for n := range 40 {
		var picks []pick
		var rows []refRow
		for i := range n % 7 {
			picks = append(picks, pick{Name: some(), Href: some(), Tag: i%2 == 0, Current: i == 1})
			row := refRow{Name: some(), Href: some(), Default: i == 0}
			if i%3 != 2 {
				row.Commit = &commitView{Commit: Commit{OID: some(), Message: some() + "\n\n" + some(), Author: Person{Name: some()}}, Href: some()}
			}
			if i%2 == 1 {
				row.Tag = &tagObject{Message: some()}
				row.Date = When{time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))}
			}
			if i%4 == 1 {
				row.Ahead, row.Behind = some(), some()
			}
			rows = append(rows, row)
		}
		checkBlameRows(t, blameT, r, some, n)
		if got, want := string(pickerHTML(picks)), execute(t, pickerT, picks); got != want {
			t.Errorf("picker %d:\n got %q\nwant %q", n, got, want)
		}
		for _, branches := range []bool{true, false} {
			data := struct {
				Rows     []refRow
				Branches bool
			}{rows, branches}
			if got, want := string(refRowsHTML(rows, branches)), execute(t, rowsT, data); got != want {
				t.Errorf("rows %d (branches %v):\n got %q\nwant %q", n, branches, got, want)
			}
		}
	}
}

// checkBlameRows compares blameRowsHTML with blameRowsTemplate on n%7
// runs of random values over a file of random lines, runs reaching past
// its end among them.
func checkBlameRows(t *testing.T, tmpl *template.Template, r *rand.Rand, some func() string, n int) {
	t.Helper()
	var text []string
	for range r.IntN(12) {
		text = append(text, some()+"\n")
	}
	if len(text) > 0 && n%2 == 0 {
		text[len(text)-1] = strings.TrimSuffix(text[len(text)-1], "\n")
	}
	path := some()
	var runs []blameRunView
	data := blameRowsData{Path: path}
	line := 1
	for i := range n % 7 {
		run := blameRunView{OID: some(), Href: some(), Start: line, Count: 1 + r.IntN(4),
			C: BlameCommit{Path: some(), Summary: some(), Author: Person{Name: some(), Time: When{time.Unix(r.Int64N(1<<32), 0)}}}}
		switch i % 3 {
		case 1:
			run.C.Path = ""
		case 2:
			run.C.Path = path
		}
		line += run.Count
		runs = append(runs, run)
		v := blameRunData{OID: run.OID, Href: run.Href, C: run.C}
		for l := run.Start; l < run.Start+run.Count; l++ {
			lt := ""
			if l-1 < len(text) {
				lt = strings.TrimSuffix(text[l-1], "\n")
			}
			v.Lines = append(v.Lines, blameLineData{l, lt})
		}
		data.Runs = append(data.Runs, v)
	}
	if got, want := string(blameRowsHTML(nil, runs, text, path)), execute(t, tmpl, data); got != want {
		t.Errorf("blame rows %d:\n got %q\nwant %q", n, got, want)
	}
}

// TestBulkInItsPlace: a file's numbered source lands where the template
// wrote bulkMark, even when the repository's names and the request spell
// the mark: every value the template escapes writes its NUL as U+FFFD.
func TestBulkInItsPlace(t *testing.T) {
	h := mustNew(t, newStubAPI())
	mark := string(bulkMark)
	p := blobPage{page: page{Title: mark, Repo: &repoHead{Owner: mark, Name: mark, HasCommit: true, Current: mark,
		PickerHTML: pickerHTML([]pick{{Name: mark, Href: "/" + mark}})}},
		Path: mark, Crumbs: []crumb{{Name: mark, Href: "/" + mark}, {Name: mark}}, Raw: "/" + mark,
		File: fileView{Kind: "code", HTML: bulkMark, Code: []byte("<pre>the source</pre>")}}
	w := httptest.NewRecorder()
	h.renderAround(w, httptest.NewRequest("GET", "/", nil), http.StatusOK, "blob", p, p.File.Code)
	body := w.Body.String()
	if w.Code != http.StatusOK || strings.Contains(body, "\x00") || strings.Count(body, "the source") != 1 ||
		!strings.Contains(body, `<div class="code" id="code"><pre>the source</pre></div>`) {
		t.Errorf("%d\n%s", w.Code, body)
	}
	if n := strings.Count(body, "\uFFFDbulk\uFFFD"); n < 5 {
		t.Errorf("the mark in escaped values: %d times, want them all written as U+FFFD", n)
	}
}
