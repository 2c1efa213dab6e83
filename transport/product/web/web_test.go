package web

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
)

// newPage is the page as a single node serves it: git on the same port,
// SSH on 2222, no public URLs configured.
func newPage(t *testing.T) *Handler { return newPageWith(t, Config{GitHere: true, SSHPort: "2222"}) }

func newPageWith(t *testing.T, cfg Config) *Handler {
	t.Helper()
	cfg.API = newStubAPI()
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// get fetches path from h as the holder of token ("" anonymous).
func get(t *testing.T, h http.Handler, path, token string) (*http.Response, string) {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	if token != "" {
		r.AddCookie(&http.Cookie{Name: tokenCookie, Value: token})
		r.AddCookie(&http.Cookie{Name: ownerCookie, Value: strings.TrimSuffix(token, "-token")})
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	body, _ := io.ReadAll(w.Result().Body)
	return w.Result(), string(body)
}

// TestViewsEscapeHostileContent renders every view of a repository whose
// names, messages, README and code carry markup, and checks that none
// of it reaches the page unescaped and that every page forbids script.
func TestViewsEscapeHostileContent(t *testing.T) {
	h := newPage(t)
	for _, tc := range []struct {
		path, want string
	}{
		{"/", "alice/demo"},
		{"/alice/demo", `id="readme"`},
		{"/alice/demo/tree/" + oidC2 + "/src", "main.go"},
		{"/alice/demo/blob/" + oidC2 + "/src/main.go", `id="L3"`},
		{"/alice/demo/commits/" + oidC2, "second"},
		{"/alice/demo/commit/" + oidC1, `class="add"`},
		{"/alice/demo/compare?base=v1&head=main", `id="counts"`},
		{"/-/signin", `name="token"`},
		{"/alice/nothing", "not found"},
	} {
		resp, body := get(t, h, tc.path, "")
		if !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d, no %q in:\n%s", tc.path, resp.StatusCode, tc.want, body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
			t.Errorf("%s: Content-Security-Policy %q does not forbid script", tc.path, csp)
		}
		if bad := activeMarkup(body); bad != "" {
			t.Errorf("%s: page carries active markup %q:\n%s", tc.path, bad, body)
		}
	}
}

// activeMarkup finds markup in page that could run or load something:
// script or img elements, event-handler or style attributes, javascript:
// URLs. Escaped text has no raw "<", so every tag matched is real markup;
// quoted attribute values (html/template escapes quotes inside them) are
// checked for javascript: and then blanked, so text in them is not
// mistaken for attributes.
func activeMarkup(page string) string {
	if m := jsURLRE.FindString(page); m != "" {
		return m
	}
	return activeRE.FindString(quotedRE.ReplaceAllString(page, `""`))
}

var (
	quotedRE = regexp.MustCompile(`"[^"]*"`)
	jsURLRE  = regexp.MustCompile(`(?i)=\s*"\s*javascript:`)
	activeRE = regexp.MustCompile(`(?i)<(script|img|iframe|object|embed)\b|<[^>]*\s(on\w+|style)\s*=[^>]*>`)
)

func TestSigninCookie(t *testing.T) {
	h := newPage(t)
	post := func(h *Handler, token string, tlsOn bool, hdr ...string) *http.Response {
		r := httptest.NewRequest("POST", "/-/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		if tlsOn {
			r.TLS = &tls.ConnectionState{}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result()
	}
	// Secure under TLS here, or behind a TLS proxy the configuration
	// names (the page's public URL is https); never because a client's
	// header says the request was https.
	behindProxy := newPageWith(t, Config{GitHere: true, PageURL: "https://git.example.com"})
	plainSite := newPageWith(t, Config{GitHere: true, PageURL: "http://git.internal"})
	for _, tc := range []struct {
		name       string
		h          *Handler
		tlsOn      bool
		hdr        []string
		wantSecure bool
	}{
		{"plain", h, false, nil, false},
		{"tls", h, true, nil, true},
		{"forwarded-proto header", h, false, []string{"X-Forwarded-Proto", "https", "Forwarded", "proto=https"}, false},
		{"https public url", behindProxy, false, nil, true},
		{"http public url", plainSite, false, nil, false},
		{"http public url, tls", plainSite, true, nil, true},
	} {
		resp := post(tc.h, "alice-token", tc.tlsOn, tc.hdr...)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: sign-in: %d", tc.name, resp.StatusCode)
		}
		var tok *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == tokenCookie {
				tok = c
			}
		}
		if tok == nil || tok.Value != "alice-token" || !tok.HttpOnly || tok.SameSite != http.SameSiteStrictMode || tok.Secure != tc.wantSecure {
			t.Errorf("%s: token cookie %+v, want HttpOnly, SameSite=Strict, Secure=%v", tc.name, tok, tc.wantSecure)
		}
	}
	if resp := post(h, "wrong", false); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("bad token: %d with cookies %v, want 401 and none", resp.StatusCode, resp.Cookies())
	}
	// A sign-in posted from another site is refused.
	r := httptest.NewRequest("POST", "/-/signin", strings.NewReader("token=alice-token"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
		t.Errorf("cross-site sign-in: %d, cookies %v; want 403 and none", w.Code, w.Result().Cookies())
	}
}

// TestStaleTokenSignsOut: a cookie whose token the API refuses is
// dropped and the caller sent to sign in again.
func TestStaleTokenSignsOut(t *testing.T) {
	resp, _ := get(t, newPage(t), "/alice/demo", "revoked-token")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/-/signin?expired=1" {
		t.Fatalf("stale token: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestRawIsSandboxed(t *testing.T) {
	resp, body := get(t, newPage(t), "/alice/demo/raw/"+oidC2+"/page.html", "")
	if resp.StatusCode != 200 || body != hostile {
		t.Fatalf("raw: %d %q", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox") {
		t.Errorf("raw answer's CSP %q is not a sandbox", csp)
	}
	if resp, _ := get(t, newPage(t), "/alice/private/raw/"+oidC2+"/x", ""); resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("raw of a private repository: %d %s, want a 404 page", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestHostilePathsAreNotFound(t *testing.T) {
	h := newPage(t)
	for _, p := range []string{
		"/alice/demo/tree/nope", "/alice/demo/tree/", "/alice/demo/blob/" + strings.ToUpper(oidC2) + "/x",
		"/alice/demo/archive/" + oidC2 + ".rar", "/alice/demo/archive/..zip",
		"/api/alice/demo/unknown", "/alice/demo/nope/x",
	} {
		if resp, _ := get(t, h, p, ""); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
}

func TestLogPaging(t *testing.T) {
	h := newPage(t)
	_, body := get(t, h, "/alice/demo/commits/"+oidC2+"?path=src", "")
	// The older spelling ?path= pages as {ref}/{path}.
	if !strings.Contains(body, `href="/alice/demo/commits/`+oidC2+`/src?from=`+oidC1+`"`) {
		t.Fatalf("no link to the next page:\n%s", body)
	}
	_, body = get(t, h, "/alice/demo/commits/"+oidC1, "")
	if strings.Contains(body, `id="older"`) {
		t.Errorf("last page links further")
	}
}

func TestPickerAndCloneURLs(t *testing.T) {
	_, body := get(t, newPage(t), "/alice/demo/tree/"+oidC1+"/src", "")
	for _, want := range []string{
		`<summary>`, // the current ref is a branch and a tag; the branch wins
		`href="/alice/demo/tree/main/src">main</a>`,
		`href="/alice/demo/tree/v1/src">tag: v1</a>`,
		`value="http://example.com/alice/demo.git"`,
		`value="ssh://git@example.com:2222/alice/demo.git"`,
		`href="/alice/demo/archive/` + oidC1 + `.tar.gz"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in:\n%s", want, body)
		}
	}
}

// TestConfiguredCloneURLs: the public git URLs the operator configured
// are the clone URLs; a page that does not share its address with git
// (api-serve) and has none configured shows no clone URL rather than its
// own address, which serves no git.
func TestConfiguredCloneURLs(t *testing.T) {
	const path = "/alice/demo/tree/" + oidC1 + "/src"
	_, body := get(t, newPageWith(t, Config{CloneURL: "https://git.example.com", SSHURL: "ssh://git@git.example.com:2222"}), path, "")
	for _, want := range []string{`value="https://git.example.com/alice/demo.git"`, `value="ssh://git@git.example.com:2222/alice/demo.git"`} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in:\n%s", want, body)
		}
	}
	// A single node with public URLs: those, not the browser's address.
	_, body = get(t, newPageWith(t, Config{GitHere: true, SSHPort: "2222", CloneURL: "https://git.example.com", SSHURL: "ssh://git@git.example.com"}), path, "")
	if strings.Contains(body, "example.com:2222") || strings.Contains(body, "http://example.com") || !strings.Contains(body, `value="ssh://git@git.example.com/alice/demo.git"`) {
		t.Errorf("configured URLs not used:\n%s", body)
	}
	_, body = get(t, newPageWith(t, Config{}), path, "")
	if strings.Contains(body, "alice/demo.git") || strings.Contains(body, `class="clone"`) {
		t.Errorf("api-serve without public URLs shows a clone URL:\n%s", body)
	}
}

// TestCoalesceAsChroma: lexTokens's own coalescing gives the HTML
// chroma.Coalesce gives, for code, plain text, runs longer than maxRun
// (20,000 one-character tokens of one type), a long comment and empty
// input.
func TestCoalesceAsChroma(t *testing.T) {
	goSrc := "package p\n\n// " + strings.Repeat("a long comment ", 1200) + "\nfunc f() string { return \"<b>\" }\n"
	for _, tc := range []struct{ name, src string }{
		{"f.go", goSrc},
		{"parens.go", "package p\n\nvar x = " + strings.Repeat("(", 20000) + "1" + strings.Repeat(")", 20000) + "\n"},
		{"notes.unknown", strings.Repeat("a line of text & <tags>\n", 2000)},
		{"x.py", "def f():\n    return 1  # one\n" + strings.Repeat("\n", 9000)},
		{"empty.go", ""},
	} {
		lexer := lexers.Match(tc.name)
		if lexer == nil {
			lexer = lexers.Fallback
		}
		it, err := chroma.Coalesce(lexer).Tokenise(nil, tc.src)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := codeFormatter.Format(&want, codeStyle, it); err != nil {
			t.Fatal(err)
		}
		tokens, err := lexTokens(lexer, tc.src, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := codeFormatter.Format(&got, codeStyle, chroma.Literator(tokens...)); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: highlight differs from chroma.Coalesce's (%d bytes, want %d)", tc.name, got.Len(), want.Len())
		}
	}
}

func TestReadmeOf(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"a.go", "readme.txt", "README", "README.md"}, "README.md"},
		{[]string{"Readme.rst"}, "Readme.rst"},
		{[]string{"READMEFIRST.go"}, ""},
	} {
		var es []Entry
		for _, n := range tc.names {
			es = append(es, Entry{Name: n, Kind: "blob"})
		}
		if got := readmeOf(es); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.names, got, tc.want)
		}
	}
}

func TestActiveMarkupCatches(t *testing.T) {
	for _, page := range []string{`<img src=x onerror=alert(1)>`, `<a href="x" onclick="y">`, `<a href="javascript:x">`, `<p style="x">`, `<SCRIPT>`} {
		if activeMarkup(page) == "" {
			t.Errorf("missed %s", page)
		}
	}
	if m := activeMarkup(`<p title="a onclick=b">&lt;script&gt;</p>`); m != "" {
		t.Errorf("escaped text flagged: %s", m)
	}
}

// TestUpstreamAPI: the page works the same over an API tier reached by
// HTTP, the caller's token travelling with each request.
func TestUpstreamAPI(t *testing.T) {
	tier := httptest.NewServer(newStubAPI())
	defer tier.Close()
	u, _ := url.Parse(tier.URL)
	h, err := New(Config{API: Upstream(u)})
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, h, "/alice/private", "alice-token"); resp.StatusCode != 200 || !strings.Contains(body, `id="readme"`) {
		t.Errorf("alice/private as alice over the tier: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := get(t, h, "/alice/private", "bob-token"); resp.StatusCode != 404 {
		t.Errorf("alice/private as bob over the tier: %d", resp.StatusCode)
	}
	if resp, body := get(t, h, "/alice/demo/raw/"+oidC2+"/x.html", ""); resp.StatusCode != 200 || body != hostile {
		t.Errorf("raw over the tier: %d %q", resp.StatusCode, body)
	}
}

func TestCurrentRef(t *testing.T) {
	refs := []Ref{
		{Name: "HEAD", OID: "c2", Target: "refs/heads/main"},
		{Name: "refs/heads/a", OID: "c2", Kind: "branch"},
		{Name: "refs/heads/main", OID: "c2", Kind: "branch"},
		{Name: "refs/tags/t0", OID: "x", Peeled: "c1", Kind: "tag"},
		{Name: "refs/heads/b", OID: "c1", Kind: "branch"},
		{Name: "refs/tags/t1", OID: "c3", Kind: "tag"},
	}
	q := &repoReq{refs: refs}
	for oid, want := range map[string]string{
		"c2": "refs/heads/main", // HEAD's branch before an earlier one
		"c1": "refs/heads/b",    // a branch before a tag
		"c3": "refs/tags/t1",
		"c9": "",
	} {
		if got := q.currentRef(oid); got != want {
			t.Errorf("%s: %q, want %q", oid, got, want)
		}
	}
}

// TestElsewhere: a cluster node's public port sends browsers to the
// configured page, or says how to clone when none is configured.
func TestElsewhere(t *testing.T) {
	h := Elsewhere("https://code.example.com", "https://git.example.com")
	for path, want := range map[string]string{
		"/":                "https://code.example.com/",
		"/alice/demo":      "https://code.example.com/alice/demo",
		"/alice/demo.git":  "https://code.example.com/alice/demo",
		"/alice/d%20e.git": "https://code.example.com/alice/d%20e",
	} {
		resp, _ := get(t, h, path, "")
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
			t.Errorf("%s: %d to %q, want a redirect to %q", path, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	if resp, _ := get(t, h, "/alice/demo/tree/x", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("other paths: %d, want 404", resp.StatusCode)
	}
	resp, body := get(t, Elsewhere("", "https://git.example.com"), "/", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "git clone https://git.example.com/OWNER/NAME.git") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("/ without a web URL: %d %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if _, body := get(t, Elsewhere("", ""), "/", ""); !strings.Contains(body, "git clone http://example.com/OWNER/NAME.git") {
		t.Errorf("/ without any URL:\n%s", body)
	}
}

// TestHighlightOutOfTime: a file whose chroma lexing is past its
// deadline shows as the plain lexer shows it (numbered, no token
// classes), and one in time is highlighted.
func TestHighlightOutOfTime(t *testing.T) {
	src := "#!/usr/bin/perl\n" + strings.Repeat("sub f { return 1; }\n", 2000)
	plain, err := highlight("", src, lineRange{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	late, err := highlight("f.pl", src, lineRange{}, time.Now().Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(late, plain) {
		t.Errorf("out of time: got %d bytes of HTML, want the plain rendering (%d bytes)", len(late), len(plain))
	}
	lit, err := highlight("f.pl", src, lineRange{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(lit, plain) {
		t.Error("in time: Perl source was not highlighted")
	}
}

// TestBlobOfDirectoryRedirects: a blob URL naming a directory (as a
// Markdown link without its trailing "/" resolves) is sent to the tree;
// one naming nothing stays a 404.
func TestBlobOfDirectoryRedirects(t *testing.T) {
	h := newPage(t)
	resp, _ := get(t, h, "/alice/demo/blob/"+oidC2+"/src", "")
	if want := "/alice/demo/tree/" + oidC2 + "/src"; resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
		t.Errorf("blob of a directory: %d to %q, want 302 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	if resp, _ := get(t, h, "/alice/demo/blob/"+oidC2+"/nothing", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("blob of a missing path: %d, want 404", resp.StatusCode)
	}
}
