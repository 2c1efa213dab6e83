package node_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/redistest"
)

// apiFixture is a node with the read API's cache on a real redis-server
// and one public repository alice/site with history worth browsing.
type apiFixture struct {
	srv                 *gitenv.Server
	env                 *gitenv.Env
	redis               *redistest.Server
	alice, bob          string
	repo, wt            string
	first, second, head string
	tag                 string
}

func newAPIFixture(t *testing.T) *apiFixture {
	t.Helper()
	rs := redistest.Start(t, "maxmemory-policy volatile-lru")
	srv := gitenv.StartServer(t, gitenv.FileStore(t), "RGIT_REDIS_URL="+rs.URL())
	f := &apiFixture{srv: srv, env: gitenv.New(t), redis: rs}
	f.alice = srv.AddToken(t, "alice")
	f.bob = srv.AddToken(t, "bob")
	f.repo = "alice/site"
	srv.CreateRepo(t, f.repo)
	f.wt = f.env.Scratch(t)
	f.first = f.env.Commit(t, f.wt, "first", map[string]string{
		"README.md":   "# site\n",
		"src/main.go": "package main\n\nfunc main() {}\n",
	})
	if err := os.WriteFile(filepath.Join(f.wt, "logo.bin"), []byte{0, 1, 2, 3, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/main.go", filepath.Join(f.wt, "link")); err != nil {
		t.Fatal(err)
	}
	f.second = f.env.Commit(t, f.wt, "second: binary and link", map[string]string{"src/main.go": "package main\n\nfunc main() { println(1) }\n"})
	f.head = f.env.Commit(t, f.wt, "third", map[string]string{"docs/a b.txt": "spaces\n"})
	f.env.Run(t, f.wt, "tag", "-a", "-m", "v1", "v1")
	f.tag = strings.TrimSpace(f.env.Run(t, f.wt, "rev-parse", "v1"))
	f.env.Run(t, f.wt, "push", "-q", srv.HTTPURL(f.alice, f.repo), "main", "v1")
	srv.Admin(t, "set-visibility", f.repo, "public")
	return f
}

// get asks the node's read API; token "" is anonymous.
func (f *apiFixture) get(t *testing.T, path, token string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return apiGet(t, f.srv.HTTPAddr, path, token, hdr...)
}

// apiGet sends GET path to the HTTP port at addr with token as Bearer
// ("" is anonymous) and header pairs hdr, and returns the whole answer.
func apiGet(t *testing.T, addr, path, token string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func (f *apiFixture) getJSON(t *testing.T, path, token string, v any) *http.Response {
	t.Helper()
	resp, body := f.get(t, path, token)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	return resp
}

// TestReadAPI browses a pushed repository through every endpoint and
// checks each answer against the real git.
func TestReadAPI(t *testing.T) {
	f := newAPIFixture(t)
	base := "/api/" + f.repo + "/"

	t.Run("refs", func(t *testing.T) {
		var refs []map[string]string
		resp := f.getJSON(t, base+"refs", "", &refs)
		byName := map[string]map[string]string{}
		for _, r := range refs {
			byName[r["name"]] = r
		}
		if r := byName["refs/heads/main"]; r["oid"] != f.head || r["kind"] != "branch" {
			t.Errorf("main: %v", r)
		}
		if r := byName["refs/tags/v1"]; r["oid"] != f.tag || r["kind"] != "tag" || r["peeled"] != f.head {
			t.Errorf("v1: %v", r)
		}
		if r := byName["HEAD"]; r["target"] != "refs/heads/main" || r["oid"] != f.head {
			t.Errorf("HEAD: %v", r)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age=5" {
			t.Errorf("refs Cache-Control %q", cc)
		}
	})

	t.Run("tree", func(t *testing.T) {
		var entries []struct {
			Name, Mode, Kind, OID string
			Size                  *int64
		}
		resp := f.getJSON(t, base+"tree/"+f.head, "", &entries)
		want := f.env.Run(t, f.wt, "ls-tree", "-l", f.head)
		if len(entries) != len(strings.Split(strings.TrimSpace(want), "\n")) {
			t.Fatalf("tree has %d entries, git ls-tree:\n%s", len(entries), want)
		}
		kinds := map[string]string{}
		for _, e := range entries {
			kinds[e.Name] = e.Kind
			line := e.Mode + " "
			if !strings.Contains(want, line) || !strings.Contains(want, e.OID) {
				t.Errorf("entry %+v not in git ls-tree:\n%s", e, want)
			}
			if (e.Kind == "blob") != (e.Size != nil) {
				t.Errorf("entry %+v: size only for blobs", e)
			}
		}
		if kinds["src"] != "tree" || kinds["link"] != "symlink" || kinds["README.md"] != "blob" {
			t.Errorf("kinds %v", kinds)
		}
		if resp.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" || resp.Header.Get("ETag") == "" {
			t.Errorf("headers %v", resp.Header)
		}
		// A tag peels to its commit's tree; a path walks into it.
		var sub []struct{ Name string }
		f.getJSON(t, base+"tree/"+f.tag+"/src", "", &sub)
		if len(sub) != 1 || sub[0].Name != "main.go" {
			t.Errorf("tree of v1/src: %+v", sub)
		}
	})

	t.Run("blob and raw", func(t *testing.T) {
		var b struct {
			OID               string
			Size              int64
			Binary, Truncated bool
			Content           string
		}
		f.getJSON(t, base+"blob/"+f.head+"/src/main.go", "", &b)
		if b.Binary || b.Truncated || b.Content != "package main\n\nfunc main() { println(1) }\n" {
			t.Errorf("blob %+v", b)
		}
		f.getJSON(t, base+"blob/"+f.head+"/logo.bin", "", &b)
		if raw, _ := base64.StdEncoding.DecodeString(b.Content); !b.Binary || !bytes.Equal(raw, []byte{0, 1, 2, 3, 0xff}) {
			t.Errorf("binary blob %+v", b)
		}
		// Escaped once: "a%20b.txt" is the file "a b.txt".
		resp, body := f.get(t, base+"raw/"+f.head+"/docs/a%20b.txt", "")
		if resp.StatusCode != 200 || string(body) != "spaces\n" || resp.Header.Get("Content-Length") != "7" {
			t.Errorf("raw: %d %q %v", resp.StatusCode, body, resp.Header)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Errorf("raw content type %q", ct)
		}
	})

	t.Run("log", func(t *testing.T) {
		var page []struct {
			OID     string
			Parents []string
			Author  struct{ Name, Email, Time string }
			Message string
		}
		resp := f.getJSON(t, base+"log/"+f.head+"?n=2", "", &page)
		if len(page) != 2 || page[0].OID != f.head || page[1].OID != f.second || page[0].Message != "third\n" {
			t.Fatalf("log page 1: %+v", page)
		}
		link := resp.Header.Get("Link")
		if !strings.Contains(link, "log/"+f.first+"?n=2") || !strings.Contains(link, `rel="next"`) {
			t.Fatalf("Link %q", link)
		}
		f.getJSON(t, base+"log/"+f.first+"?n=2", "", &page)
		if len(page) != 1 || page[0].OID != f.first || len(page[0].Parents) != 0 {
			t.Errorf("log page 2: %+v", page)
		}
		f.getJSON(t, base+"log/"+f.head+"?n=999999999999999999999&path=src/main.go", "", &page)
		if len(page) != 2 || page[0].OID != f.second || page[1].OID != f.first {
			t.Errorf("log of src/main.go: %+v", page)
		}
	})

	t.Run("commit", func(t *testing.T) {
		var c struct {
			OID   string
			Files []struct {
				Path, Status         string
				Binary               bool
				Additions, Deletions int
			}
			Diff      string
			Truncated bool
		}
		f.getJSON(t, base+"commit/"+f.second, "", &c)
		got := map[string]string{}
		for _, fc := range c.Files {
			got[fc.Path] = fc.Status
		}
		if got["logo.bin"] != "added" || got["link"] != "added" || got["src/main.go"] != "modified" || len(got) != 3 {
			t.Errorf("files %+v", c.Files)
		}
		want := f.env.Run(t, f.wt, "show", "--format=", "--patch", f.second, "--", "src/main.go")
		if !strings.Contains(c.Diff, "-func main() {}\n+func main() { println(1) }\n") || !strings.Contains(want, "+func main() { println(1) }") {
			t.Errorf("diff:\n%s\ngit show:\n%s", c.Diff, want)
		}
		if !strings.Contains(c.Diff, "Binary files") || strings.Contains(c.Diff, "\x00") {
			t.Errorf("binary file not named:\n%s", c.Diff)
		}
	})

	t.Run("compare", func(t *testing.T) {
		var c struct {
			MergeBase     string `json:"merge_base"`
			Ahead, Behind int
			Commits       []struct{ OID string }
			Diff          string
		}
		f.getJSON(t, base+"compare/"+f.first+"..."+f.head, "", &c)
		if c.MergeBase != f.first || c.Ahead != 2 || c.Behind != 0 || len(c.Commits) != 2 || !strings.Contains(c.Diff, "docs/a b.txt") {
			t.Errorf("compare %+v", c)
		}
	})

	t.Run("archive", func(t *testing.T) {
		resp, body := f.get(t, base+"archive/"+f.head+".tar.gz", "")
		if resp.StatusCode != 200 {
			t.Fatalf("archive: %d %s", resp.StatusCode, body)
		}
		gz, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(gz)
		var names []string
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, h.Name)
		}
		want := "site-" + f.head[:12] + "/docs/a b.txt"
		if !contains2(names, want) || !contains2(names, "site-"+f.head[:12]+"/link") {
			t.Errorf("tar entries %v", names)
		}
		_, again := f.get(t, base+"archive/"+f.head+".tar.gz", "")
		if !bytes.Equal(body, again) {
			t.Error("the same archive request gave different bytes")
		}
		resp, body = f.get(t, base+"archive/"+f.head+".zip", "")
		zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
		if err != nil || resp.Header.Get("Content-Type") != "application/zip" {
			t.Fatalf("zip: %v %v", err, resp.Header)
		}
		var znames []string
		for _, zf := range zr.File {
			znames = append(znames, zf.Name)
		}
		sort.Strings(znames)
		if !contains2(znames, "site-"+f.head[:12]+"/src/main.go") {
			t.Errorf("zip entries %v", znames)
		}
	})

	t.Run("etag", func(t *testing.T) {
		resp, _ := f.get(t, base+"tree/"+f.head, "")
		etag := resp.Header.Get("ETag")
		resp, body := f.get(t, base+"tree/"+f.head, "", "If-None-Match", etag)
		if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
			t.Errorf("If-None-Match: %d %q", resp.StatusCode, body)
		}
	})
}

func contains2(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestReadAPIAccess: the git rules. A bad token is 401 whatever the path;
// a private repository is 401 to anonymous callers and 404 to other
// owners, byte for byte what a missing one answers; private answers are
// never stored.
func TestReadAPIAccess(t *testing.T) {
	f := newAPIFixture(t)
	f.srv.CreateRepo(t, "alice/secret")
	wt := f.env.Scratch(t)
	oid := f.env.Commit(t, wt, "hidden", map[string]string{"s.txt": "s\n"})
	f.env.Run(t, wt, "push", "-q", f.srv.HTTPURL(f.alice, "alice/secret"), "main")

	for _, path := range []string{"/api/alice/secret/refs", "/api/alice/secret/tree/" + oid} {
		resp, body := f.get(t, path, f.alice)
		if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "private, no-store" {
			t.Errorf("owner %s: %d %v %s", path, resp.StatusCode, resp.Header, body)
		}
		missing := strings.Replace(path, "secret", "nothing", 1)
		for _, who := range []struct {
			token string
			code  int
		}{{"", 401}, {f.bob, 404}} {
			resp, body := f.get(t, path, who.token)
			mresp, mbody := f.get(t, missing, who.token)
			if resp.StatusCode != who.code || mresp.StatusCode != who.code || !bytes.Equal(body, mbody) {
				t.Errorf("%s as %q: %d %s; missing repo: %d %s", path, who.token, resp.StatusCode, body, mresp.StatusCode, mbody)
			}
		}
		// A private answer is not stored: a second owner request is a miss.
		if resp, _ := f.get(t, path, f.alice); resp.Header.Get("X-Cache") == "hit" {
			t.Errorf("%s: private answer served from the cache", path)
		}
	}
	for _, h := range []string{"Bearer rgit_nope", "Basic " + base64.StdEncoding.EncodeToString([]byte("x:rgit_nope"))} {
		resp, body := f.get(t, "/api/"+f.repo+"/refs", "", "Authorization", h)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("bad token %q on a public repository: %d %s", h, resp.StatusCode, body)
		}
	}
}

// TestReadAPIHostile: hostile paths and ids are 4xx with a JSON error,
// never 500.
func TestReadAPIHostile(t *testing.T) {
	f := newAPIFixture(t)
	base := "/api/" + f.repo + "/"
	var blobID string
	f.getJSON(t, base+"blob/"+f.head+"/README.md", "", &struct{ OID *string }{&blobID})
	cases := []string{
		base + "tree/" + f.head + "/../../../etc/passwd",
		base + "tree/" + f.head + "/src/%2e%2e/x",
		base + "tree/" + f.head + "/src%2Fmain.go",
		base + "tree/" + f.head + "/src%5Cmain.go",
		base + "tree/" + f.head + "/src%00",
		base + "tree/" + f.head + "//src",
		base + "tree/" + f.head + "/./src",
		base + "tree/" + f.head + "/nope",
		base + "tree/" + f.head + "/README.md", // a file where a tree is expected
		base + "tree/" + blobID,                // a blob id where a tree is expected
		base + "blob/" + f.head + "/src",       // a tree where a file is expected
		base + "tree/" + strings.Repeat("0", 40),
		base + "tree/" + strings.ToUpper(f.head),
		base + "tree/" + f.head[:20],
		base + "tree/zz",
		base + "tree",
		base + "commit/" + blobID,
		base + "log/" + blobID,
		base + "log/" + f.head + "?n=-5&path=../x",
		base + "log/" + f.head + "?n=abc",
		base + "compare/" + f.head,
		base + "compare/" + f.head + "..." + blobID,
		base + "archive/" + f.head + ".rar",
		base + "archive/" + blobID + ".zip",
		base + "nothing",
		"/api/alice",
		"/api/alice/..%2f..%2fsite/refs",
		"/api/api/x/refs",
		"/api/" + strings.Repeat("a", 300) + "/site/refs",
	}
	for _, path := range cases {
		resp, body := f.get(t, path, "")
		var e struct{ Error string }
		if resp.StatusCode < 400 || resp.StatusCode >= 500 || json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	// Huge n is clamped, not refused.
	var page []struct{ OID string }
	f.getJSON(t, base+"log/"+f.head+"?n=100000000", "", &page)
	if len(page) != 3 {
		t.Errorf("n clamped: %d commits", len(page))
	}
}

// TestReadAPICache: answers of public repositories come from Redis the
// second time; a push drops the refs answer at once; a visibility flip
// bumps the generation, so a repository made private is not served from
// the cache; with Redis killed requests keep working and a flip fails
// loudly, naming purge-cache, while the flip itself stays done.
func TestReadAPICache(t *testing.T) {
	f := newAPIFixture(t)
	base := "/api/" + f.repo + "/"
	xcache := func(path, token string) (string, int) {
		resp, _ := f.get(t, path, token)
		return resp.Header.Get("X-Cache"), resp.StatusCode
	}

	t.Run("hit", func(t *testing.T) {
		for _, p := range []string{"tree/" + f.head, "blob/" + f.head + "/README.md", "commit/" + f.second, "log/" + f.head, "refs"} {
			xcache(base+p, "")
			if x, code := xcache(base+p, f.bob); x != "hit" || code != 200 {
				t.Errorf("%s: second request %q %d", p, x, code)
			}
		}
	})

	t.Run("push drops refs", func(t *testing.T) {
		xcache(base+"refs", "")
		if x, _ := xcache(base+"refs", ""); x != "hit" {
			t.Fatalf("refs not cached: %q", x)
		}
		next := f.env.Commit(t, f.wt, "fourth", map[string]string{"new.txt": "n\n"})
		f.env.Run(t, f.wt, "push", "-q", f.srv.HTTPURL(f.alice, f.repo), "main")
		var refs []map[string]string
		resp := f.getJSON(t, base+"refs", "", &refs)
		if resp.Header.Get("X-Cache") == "hit" {
			t.Error("refs served from the cache after a push")
		}
		for _, r := range refs {
			if r["name"] == "refs/heads/main" && r["oid"] != next {
				t.Errorf("main is %s after the push of %s", r["oid"], next)
			}
		}
	})

	t.Run("flip bumps generation", func(t *testing.T) {
		p := base + "tree/" + f.first
		xcache(p, "")
		if x, _ := xcache(p, ""); x != "hit" {
			t.Fatalf("not cached: %q", x)
		}
		out := f.srv.Admin(t, "set-visibility", f.repo, "private")
		if !strings.Contains(out, "purged") {
			t.Errorf("flip output %q", out)
		}
		if x, code := xcache(p, ""); code != http.StatusUnauthorized || x == "hit" {
			t.Errorf("private repository after the flip: %d %q", code, x)
		}
		if _, code := xcache(p, f.bob); code != http.StatusNotFound {
			t.Errorf("private repository to bob: %d", code)
		}
		f.srv.Admin(t, "set-visibility", f.repo, "public")
		out = f.srv.Admin(t, "purge-cache", f.repo)
		if !strings.Contains(out, "purged") {
			t.Errorf("purge-cache output %q", out)
		}
	})

	t.Run("redis killed", func(t *testing.T) {
		p := base + "tree/" + f.second
		xcache(p, "")
		f.redis.Kill()
		for _, q := range []string{p, base + "refs", base + "commit/" + f.head} {
			if x, code := xcache(q, ""); code != 200 || x == "hit" {
				t.Errorf("%s with Redis down: %d %q", q, code, x)
			}
		}
		out, err := f.srv.AdminTry("set-visibility", f.repo, "private")
		if err == nil || !strings.Contains(err.Error(), "purge-cache") || !strings.Contains(err.Error(), "is private") {
			t.Errorf("flip with Redis down: %q, %v", out, err)
		}
		if _, code := xcache(p, ""); code != http.StatusUnauthorized {
			t.Errorf("the flip did not stay done: anonymous read answers %d", code)
		}
		// A push still succeeds: dropping refs is best effort.
		f.env.Commit(t, f.wt, "fifth", map[string]string{"five.txt": "5\n"})
		f.env.Run(t, f.wt, "push", "-q", f.srv.HTTPURL(f.alice, f.repo), "main")
	})
}

// TestReadAPIRawLarge: raw answers stream whole files past the blob cap,
// byte for byte with their Content-Length, typed from their head: 3 MB of
// random bytes is binary; a 1.2 MB UTF-8 text whose multi-byte runes
// straddle the sniffing bound is text.
func TestReadAPIRawLarge(t *testing.T) {
	env := gitenv.New(t)
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	srv.CreateRepo(t, "alice/big")
	tok := srv.AddToken(t, "alice")
	work := env.Scratch(t)
	bin := incompressible(3<<20, 7)
	text := strings.Repeat("héllo wörld, ☃ ", 1200<<10/17)
	head := env.Commit(t, work, "big", map[string]string{"blob.bin": bin, "text.txt": text})
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/big"), "main")
	for _, c := range []struct {
		path, want, ctype string
	}{
		{"blob.bin", bin, "application/octet-stream"},
		{"text.txt", text, "text/plain; charset=utf-8"},
	} {
		resp, body := apiGet(t, srv.HTTPAddr, "/api/alice/big/raw/"+head+"/"+c.path, tok)
		if resp.StatusCode != 200 || string(body) != c.want || resp.Header.Get("Content-Length") != strconv.Itoa(len(c.want)) {
			t.Fatalf("raw %s: %d, %d bytes (want %d), Content-Length %q", c.path, resp.StatusCode, len(body), len(c.want), resp.Header.Get("Content-Length"))
		}
		if ct := resp.Header.Get("Content-Type"); ct != c.ctype {
			t.Errorf("raw %s: Content-Type %q, want %q", c.path, ct, c.ctype)
		}
	}
}
