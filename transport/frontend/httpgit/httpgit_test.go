package httpgit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/service/gitserve/gitservetest"
	"github.com/rgit/rgit/transport/wire/clientlimit"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

type observation struct {
	op, status string
	in, out    int64
}

type recMetrics struct {
	mu  sync.Mutex
	obs []observation
}

func (m *recMetrics) Observe(op, status string, _ time.Duration, in, out int64) {
	m.mu.Lock()
	m.obs = append(m.obs, observation{op, status, in, out})
	m.mu.Unlock()
}

func (m *recMetrics) all() []observation {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]observation(nil), m.obs...)
}

type fixture struct {
	t   *testing.T
	env *gitservetest.Env
	res *gitservetest.Resolver
	eng *gitservetest.ExecProtocol
	met *recMetrics
	srv *httptest.Server
	pub string // bare dir of alice/pub
	prv string // bare dir of alice/priv
}

const (
	aliceTok = "tok-alice"
	bobTok   = "tok-bob"
	maxBody  = 1 << 20
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, env: gitservetest.NewEnv(t), res: gitservetest.NewResolver(), eng: &gitservetest.ExecProtocol{}, met: &recMetrics{}}
	f.pub = f.env.BareRepo(2)
	f.prv = f.env.BareRepo(1)
	f.res.Add(auth.RepoInfo{Repo: names.MustParse("alice/pub"), Public: true}, f.pub)
	f.res.Add(auth.RepoInfo{Repo: names.MustParse("alice/priv")}, f.prv)
	s, err := New(Config{
		Resolver: f.res,
		Auth:     gitservetest.Tokens{aliceTok: "alice", bobTok: "bob"},
		Protocol: f.eng,
		MaxBody:  maxBody,
		Metrics:  f.met,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(s)
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() {
		if n := f.res.Open.Load(); n != 0 {
			t.Errorf("%d sessions not released", n)
		}
	})
	return f
}

// url returns the repository URL with token as password ("" = anonymous).
func (f *fixture) url(token, path string) string {
	host := strings.TrimPrefix(f.srv.URL, "http://")
	if token == "" {
		return "http://" + host + path
	}
	return "http://x:" + token + "@" + host + path
}

func TestCloneFetchPushProtocols(t *testing.T) {
	f := newFixture(t)
	for _, proto := range []string{"0", "1", "2"} {
		t.Run("v"+proto, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "c")
			f.env.Git("", "-c", "protocol.version="+proto, "clone", "-q", f.url("", "/alice/pub.git"), dir)
			if got, want := f.env.RevParse(dir, "HEAD"), f.env.RevParse(f.pub, "main"); got != want {
				t.Fatalf("cloned HEAD %s, want %s", got, want)
			}
			// Private repo, owner token, name without .git.
			dir2 := filepath.Join(t.TempDir(), "p")
			f.env.Git("", "-c", "protocol.version="+proto, "clone", "-q", f.url(aliceTok, "/alice/priv"), dir2)

			// Push a new commit as the owner, then fetch it elsewhere.
			if err := os.WriteFile(filepath.Join(dir2, "new.txt"), []byte("v"+proto), 0o644); err != nil {
				t.Fatal(err)
			}
			f.env.Git(dir2, "add", "new.txt")
			f.env.Git(dir2, "commit", "-q", "-m", "push v"+proto)
			f.env.Git(dir2, "-c", "protocol.version="+proto, "push", "-q", "origin", "main")
			if got, want := f.env.RevParse(f.prv, "main"), f.env.RevParse(dir2, "HEAD"); got != want {
				t.Fatalf("server main %s after push, want %s", got, want)
			}
			dir3 := filepath.Join(t.TempDir(), "q")
			f.env.Git("", "clone", "-q", f.url(aliceTok, "/alice/priv.git"), dir3)
			f.env.Git(dir3, "-c", "protocol.version="+proto, "fetch", "-q", "origin")
		})
	}
	var sawV2, sawV0 bool
	for _, o := range f.eng.Calls() {
		if !o.StatelessRPC {
			t.Errorf("HTTP call without StatelessRPC: %+v", o)
		}
		sawV2 = sawV2 || o.Protocol == 2
		sawV0 = sawV0 || o.Protocol == 0
	}
	if !sawV2 || !sawV0 {
		t.Errorf("protocols not passed through: %+v", f.eng.Calls())
	}
	var sawRecv bool
	for _, o := range f.met.all() {
		if o.op == "receive-pack" && o.status == "200" && o.in > 0 && o.out > 0 {
			sawRecv = true
		}
	}
	if !sawRecv {
		t.Errorf("no receive-pack metric with bytes: %+v", f.met.all())
	}
}

func TestGitClientDenials(t *testing.T) {
	f := newFixture(t)
	// Anonymous clone of a private repo: git is asked for credentials
	// (and cannot prompt).
	out, err := f.env.TryGit("", "clone", "-q", f.url("", "/alice/priv.git"), filepath.Join(t.TempDir(), "a"))
	if err == nil || !strings.Contains(out, "could not read Username") {
		t.Errorf("anonymous private clone: err=%v out=%s", err, out)
	}
	// Other user: not found, same as a missing repo.
	out, err = f.env.TryGit("", "clone", "-q", f.url(bobTok, "/alice/priv.git"), filepath.Join(t.TempDir(), "b"))
	if err == nil || !strings.Contains(out, "not found") {
		t.Errorf("bob private clone: err=%v out=%s", err, out)
	}
	// Other user pushing to a public repo: 403.
	dir := filepath.Join(t.TempDir(), "c")
	f.env.Git("", "clone", "-q", f.url(bobTok, "/alice/pub.git"), dir)
	f.env.Git(dir, "commit", "-q", "--allow-empty", "-m", "x")
	out, err = f.env.TryGit(dir, "push", "-q", "origin", "main")
	if err == nil || !strings.Contains(out, "403") {
		t.Errorf("bob push to public: err=%v out=%s", err, out)
	}
	before := f.env.RevParse(f.pub, "main")
	// Anonymous push to a public repo: 401, git would prompt.
	out, err = f.env.TryGit(dir, "push", "-q", f.url("", "/alice/pub.git"), "main")
	if err == nil || !strings.Contains(out, "could not read Username") {
		t.Errorf("anonymous push to public: err=%v out=%s", err, out)
	}
	if after := f.env.RevParse(f.pub, "main"); after != before {
		t.Errorf("denied pushes changed the repo")
	}
}

// TestAuthMatrix checks status codes and WWW-Authenticate for every caller
// × repository × service over the advertisement endpoint.
func TestAuthMatrix(t *testing.T) {
	f := newFixture(t)
	type row struct {
		caller, repo, svc string
		want              int
	}
	const up, rp = "git-upload-pack", "git-receive-pack"
	rows := []row{
		{"anon", "pub", up, 200}, {"anon", "pub", rp, 401},
		{"anon", "priv", up, 401}, {"anon", "priv", rp, 401},
		{"anon", "missing", up, 401}, {"anon", "missing", rp, 401},
		{"bob", "pub", up, 200}, {"bob", "pub", rp, 403},
		{"bob", "priv", up, 404}, {"bob", "priv", rp, 404},
		{"bob", "missing", up, 404}, {"bob", "missing", rp, 404},
		{"alice", "pub", up, 200}, {"alice", "pub", rp, 200},
		{"alice", "priv", up, 200}, {"alice", "priv", rp, 200},
		{"alice", "missing", up, 404}, {"alice", "missing", rp, 404},
		// A bad token is refused even where anonymous would do.
		{"badtoken", "pub", up, 401}, {"badtoken", "priv", up, 401},
		{"notbasic", "pub", up, 401},
		// Bearer carries a token like Basic (auth.FromRequest, the rule
		// of the read API too).
		{"bearer", "priv", up, 200}, {"bearer", "priv", rp, 200},
	}
	for _, r := range rows {
		t.Run(fmt.Sprintf("%s/%s/%s", r.caller, r.repo, r.svc), func(t *testing.T) {
			req, _ := http.NewRequest("GET", f.srv.URL+"/alice/"+r.repo+".git/info/refs?service="+r.svc, nil)
			switch r.caller {
			case "alice":
				req.SetBasicAuth("u", aliceTok)
			case "bob":
				req.SetBasicAuth("", bobTok)
			case "badtoken":
				req.SetBasicAuth("u", "nope")
			case "notbasic":
				req.Header.Set("Authorization", "Digest username=alice")
			case "bearer":
				req.Header.Set("Authorization", "Bearer "+aliceTok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != r.want {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, r.want, body)
			}
			wa := resp.Header.Get("WWW-Authenticate")
			if (r.want == 401) != (wa == `Basic realm="rgit"`) {
				t.Errorf("WWW-Authenticate %q with status %d", wa, r.want)
			}
			if r.want != 200 {
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/x-"+r.svc+"-advertisement" {
				t.Errorf("Content-Type %q", ct)
			}
			if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "no-cache") || resp.Header.Get("Pragma") != "no-cache" || resp.Header.Get("Expires") == "" {
				t.Errorf("cache headers: %v", resp.Header)
			}
			want := fmt.Sprintf("%04x# service=%s\n0000", len("# service="+r.svc+"\n")+4, r.svc)
			if !strings.HasPrefix(string(body), want) {
				t.Errorf("body does not start with the service preamble: %q", body[:min(len(body), 60)])
			}
		})
	}
	// The private and the missing repository must be indistinguishable
	// for every caller who cannot read the private one.
	for _, tok := range []string{"", bobTok} {
		a := get(t, f, "/alice/priv.git/info/refs?service=git-upload-pack", tok, nil)
		b := get(t, f, "/alice/missing/info/refs?service=git-upload-pack", tok, nil)
		if a.status != b.status || a.body != b.body {
			t.Errorf("token %q: private %d %q vs missing %d %q", tok, a.status, a.body, b.status, b.body)
		}
	}
}

type result struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, f *fixture, path, token string, hdr map[string]string) result {
	t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
	if token != "" {
		req.SetBasicAuth("x", token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) result {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{resp.StatusCode, resp.Header, string(b)}
}

func TestProtocolV2Advertisement(t *testing.T) {
	f := newFixture(t)
	r := get(t, f, "/alice/pub.git/info/refs?service=git-upload-pack", "", map[string]string{"Git-Protocol": "version=2"})
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if strings.Contains(r.body, "# service=") || !strings.HasPrefix(r.body, "000eversion 2\n") {
		t.Errorf("v2 advertisement must not carry the preamble: %q", r.body[:min(len(r.body), 60)])
	}
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name, method, path, ctype string
		want                      int
	}{
		{"dumb http", "GET", "/alice/pub.git/info/refs", "", 403},
		{"unknown service", "GET", "/alice/pub.git/info/refs?service=git-upload-archive", "", 403},
		{"dumb object", "GET", "/alice/pub.git/objects/info/packs", "", 404},
		{"wrong content type", "POST", "/alice/pub.git/git-upload-pack", "text/plain", 415},
		{"swapped content type", "POST", "/alice/pub.git/git-upload-pack", "application/x-git-receive-pack-request", 415},
		{"reserved owner", "GET", "/api/pub/info/refs?service=git-upload-pack", "", 404},
		{"dot name", "GET", "/alice/../info/refs?service=git-upload-pack", "", 404},
		{"bad char", "GET", "/alice/p%20b/info/refs?service=git-upload-pack", "", 404},
		{"wrong method", "PUT", "/alice/pub.git/git-upload-pack", "application/x-git-upload-pack-request", 405},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, f.srv.URL+c.path, strings.NewReader("0000"))
			req.SetBasicAuth("x", aliceTok) // authenticated, so 404 is not turned into 401
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			r := do(t, req)
			if r.status != c.want {
				t.Fatalf("status %d, want %d: %s", r.status, c.want, r.body)
			}
		})
	}
}

// lsRefsV2 is a protocol v2 ls-refs request.
const lsRefsV2 = "0014command=ls-refs\n0001" + "0000"

func postUpload(t *testing.T, f *fixture, body io.Reader, length int64, hdr map[string]string) result {
	t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+"/alice/pub.git/git-upload-pack", body)
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	req.Header.Set("Git-Protocol", "version=2")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

func TestRequestBodies(t *testing.T) {
	f := newFixture(t)
	head := f.env.RevParse(f.pub, "main")
	check := func(t *testing.T, r result) {
		t.Helper()
		if r.status != 200 || !strings.Contains(r.body, head+" refs/heads/main") {
			t.Fatalf("status %d body %q", r.status, r.body)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/x-git-upload-pack-result" {
			t.Errorf("Content-Type %q", ct)
		}
	}
	t.Run("plain", func(t *testing.T) {
		check(t, postUpload(t, f, strings.NewReader(lsRefsV2), int64(len(lsRefsV2)), nil))
	})
	t.Run("chunked", func(t *testing.T) {
		// An unknown length makes the client send chunked encoding.
		check(t, postUpload(t, f, io.MultiReader(strings.NewReader(lsRefsV2)), -1, nil))
	})
	t.Run("gzip", func(t *testing.T) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		io.WriteString(zw, lsRefsV2)
		zw.Close()
		check(t, postUpload(t, f, &buf, int64(buf.Len()), map[string]string{"Content-Encoding": "gzip"}))
	})
	t.Run("bad gzip", func(t *testing.T) {
		r := postUpload(t, f, strings.NewReader(lsRefsV2), int64(len(lsRefsV2)), map[string]string{"Content-Encoding": "gzip"})
		if r.status != 400 {
			t.Fatalf("status %d, want 400: %s", r.status, r.body)
		}
	})
	t.Run("unknown encoding", func(t *testing.T) {
		r := postUpload(t, f, strings.NewReader(lsRefsV2), int64(len(lsRefsV2)), map[string]string{"Content-Encoding": "br"})
		if r.status != 415 {
			t.Fatalf("status %d, want 415", r.status)
		}
	})
}

// drainEngine reads the whole request, as a real engine does with a pack,
// and reports how much it got.
type drainEngine struct{}

func (drainEngine) UploadPack(_ context.Context, _ gitproto.Backend, in io.Reader, out io.Writer, _ gitproto.Options) error {
	n, err := io.Copy(io.Discard, in)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	_, err = fmt.Fprintf(out, "read %d", n)
	return err
}

func (e drainEngine) ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, o gitproto.Options) error {
	return e.UploadPack(ctx, b, in, out, o)
}

func TestBodyLimit(t *testing.T) {
	f := newFixture(t)
	s, err := New(Config{Resolver: f.res, Auth: gitservetest.Tokens{}, Protocol: drainEngine{}, MaxBody: maxBody})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(path string, body io.Reader, length int64, gz bool) result {
		req, _ := http.NewRequest("POST", srv.URL+path, body)
		req.ContentLength = length
		req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
		if gz {
			req.Header.Set("Content-Encoding", "gzip")
		}
		return do(t, req)
	}
	gzipped := func(b []byte) *bytes.Buffer {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return &buf
	}
	atLimit := bytes.Repeat([]byte("x"), maxBody)
	big := append(atLimit, 'x')

	t.Run("content-length before auth", func(t *testing.T) {
		lookups := f.res.Lookups.Load()
		// Anonymous, private repo: without the size check first this would
		// be a 401. The server answers from the headers alone.
		r := post("/alice/priv.git/git-upload-pack", bytes.NewReader(big), int64(len(big)), false)
		if r.status != 413 {
			t.Fatalf("status %d, want 413", r.status)
		}
		if n := f.res.Lookups.Load() - lookups; n != 0 {
			t.Errorf("resolver consulted %d times for an oversized body", n)
		}
	})
	t.Run("exactly at limit", func(t *testing.T) {
		r := post("/alice/pub.git/git-upload-pack", bytes.NewReader(atLimit), int64(len(atLimit)), false)
		if r.status != 200 || r.body != fmt.Sprintf("read %d", maxBody) {
			t.Fatalf("status %d body %q", r.status, r.body)
		}
	})
	t.Run("chunked", func(t *testing.T) {
		r := post("/alice/pub.git/git-upload-pack", io.MultiReader(bytes.NewReader(big)), -1, false)
		if r.status != 413 {
			t.Fatalf("status %d, want 413: %q", r.status, r.body)
		}
	})
	t.Run("gzip at limit", func(t *testing.T) {
		buf := gzipped(atLimit)
		r := post("/alice/pub.git/git-upload-pack", buf, int64(buf.Len()), true)
		if r.status != 200 || r.body != fmt.Sprintf("read %d", maxBody) {
			t.Fatalf("status %d body %q", r.status, r.body)
		}
	})
	t.Run("gzip expands past limit", func(t *testing.T) {
		buf := gzipped(big)
		if buf.Len() >= maxBody {
			t.Fatalf("compressed body %d not below limit", buf.Len())
		}
		r := post("/alice/pub.git/git-upload-pack", buf, int64(buf.Len()), true)
		if r.status != 413 {
			t.Fatalf("status %d, want 413: %q", r.status, r.body)
		}
	})
}

// TestExpectContinue speaks HTTP/1.1 by hand: a denied request is answered
// without "100 Continue" (the body is never requested), an allowed one gets
// "100 Continue" and then the result.
func TestExpectContinue(t *testing.T) {
	f := newFixture(t)
	addr := strings.TrimPrefix(f.srv.URL, "http://")
	send := func(path, authz string) (*bufio.Reader, net.Conn) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\n"+
			"Git-Protocol: version=2\r\nContent-Length: %d\r\nExpect: 100-continue\r\n%s\r\n", path, len(lsRefsV2), authz)
		return bufio.NewReader(c), c
	}
	br, _ := send("/alice/priv.git/git-upload-pack", "")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 401 {
		t.Fatalf("anonymous: status %d, want 401 without 100 Continue", resp.StatusCode)
	}

	br, c := send("/alice/priv.git/git-upload-pack", "Authorization: Basic "+basic("x", aliceTok)+"\r\n")
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("owner: first line %q, %v; want 100 Continue", line, err)
	}
	if _, err := br.ReadString('\n'); err != nil { // blank line after 100
		t.Fatal(err)
	}
	io.WriteString(c, lsRefsV2)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "refs/heads/main") {
		t.Fatalf("owner: status %d body %q", resp.StatusCode, body)
	}
}

func basic(user, pass string) string {
	req, _ := http.NewRequest("GET", "/", nil)
	req.SetBasicAuth(user, pass)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

func TestStripsReservedHeaders(t *testing.T) {
	f := newFixture(t)
	s, err := New(Config{Resolver: f.res, Auth: gitservetest.Tokens{}, Protocol: f.eng})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/alice/pub.git/info/refs?service=git-upload-pack", nil)
	req.Header.Set("X-Rgit-Peer-Identity", "alice")
	req.Header.Set("X-Other", "kept")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	if req.Header.Get("X-Rgit-Peer-Identity") != "" || req.Header.Get("X-Other") != "kept" {
		t.Errorf("headers after request: %v", req.Header)
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := New(Config{Auth: gitservetest.Tokens{}}); err == nil {
		t.Error("nil Resolver accepted")
	}
	if _, err := New(Config{Resolver: gitservetest.NewResolver()}); err == nil {
		t.Error("nil Auth accepted")
	}
	rec := httptest.NewRecorder()
	Handler(Config{}).ServeHTTP(rec, httptest.NewRequest("GET", "/a/b/info/refs?service=git-upload-pack", nil))
	if rec.Code != 500 {
		t.Errorf("misconfigured handler answered %d", rec.Code)
	}
}

// failEngine fails, optionally after writing some output.
type failEngine struct {
	err   error
	wrote string
}

func (e failEngine) UploadPack(_ context.Context, _ gitproto.Backend, in io.Reader, out io.Writer, _ gitproto.Options) error {
	if e.wrote != "" {
		io.WriteString(out, e.wrote)
	}
	return e.err
}

func (e failEngine) ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, o gitproto.Options) error {
	return e.UploadPack(ctx, b, in, out, o)
}

func TestEngineErrors(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name   string
		eng    failEngine
		status int
		body   string
	}{
		{"protocol error before output", failEngine{err: fmt.Errorf("bad pkt: %w", gitproto.ErrProtocol)}, 400, "malformed git protocol request\n"},
		{"internal error before output", failEngine{err: errors.New("object store: secret-bucket unreachable")}, 500, "internal server error\n"},
		{"error after output", failEngine{err: errors.New("boom"), wrote: "0008NAK\n"}, 200, "0008NAK\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			met := &recMetrics{}
			s, err := New(Config{Resolver: f.res, Auth: gitservetest.Tokens{}, Protocol: c.eng, Metrics: met})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(s)
			defer srv.Close()
			req, _ := http.NewRequest("POST", srv.URL+"/alice/pub/git-upload-pack", strings.NewReader("0000"))
			req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
			r := do(t, req)
			if r.status != c.status || r.body != c.body {
				t.Fatalf("got %d %q, want %d %q", r.status, r.body, c.status, c.body)
			}
			obs := met.all()
			if len(obs) != 1 || obs[0].status != fmt.Sprint(c.status) || obs[0].op != "upload-pack" {
				t.Errorf("metrics %+v", obs)
			}
		})
	}
}

// The credential store is the production token source.
var _ auth.TokenSource = (*auth.Store)(nil)

// TestWithCredentialStore runs the git client against tokens issued by the
// real credential store.
func TestWithCredentialStore(t *testing.T) {
	f := newFixture(t)
	st := auth.NewStore(memstore.New())
	tok, err := st.CreateToken(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Resolver: f.res, Auth: st, Protocol: f.eng})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := filepath.Join(t.TempDir(), "c")
	f.env.Git("", "clone", "-q", "http://x:"+tok+"@"+host+"/alice/priv.git", dir)
	out, err := f.env.TryGit("", "clone", "-q", "http://x:"+tok+"x@"+host+"/alice/priv.git", filepath.Join(t.TempDir(), "d"))
	if err == nil || !strings.Contains(out, "Authentication failed") {
		t.Errorf("bad token: err=%v out=%s", err, out)
	}
}

// TestPace: a request body that stops moving is cut off after the grace
// and the connection closed, whether the handler is reading it or has
// already answered; a body that trickles a byte at a time is cut off too,
// although bytes keep coming; a body that keeps moving at the rate is read
// to the end although it takes many times the grace.
func TestPace(t *testing.T) {
	const stall = 300 * time.Millisecond
	rate := clientlimit.Rate{Grace: stall, BytesPerSec: 64 << 10}
	f := newFixture(t)
	s, err := New(Config{Resolver: f.res, Auth: gitservetest.Tokens{}, Protocol: drainEngine{}, MaxBody: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Pace(s, rate))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	// slow sends the headers and 10 of 1000 body bytes, then the rest of
	// the body a byte every gap (gap 0: nothing more), and returns what
	// the server sent until it closed the connection.
	slow := func(t *testing.T, path string, gap time.Duration) string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\n"+
			"Content-Length: 1000\r\n\r\n0123456789", path)
		if gap > 0 {
			go func() {
				for range 990 {
					time.Sleep(gap)
					if _, err := c.Write([]byte("x")); err != nil {
						return
					}
				}
			}()
		}
		// A bound for a broken server, not the expectation: the close comes
		// after the grace.
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(c)
		// A client still sending when the server closes gets a reset.
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("connection not closed: %v (got %q)", err, got)
		}
		if d := time.Since(start); d < stall {
			t.Fatalf("closed after %s, before the grace", d)
		}
		return string(got)
	}
	t.Run("stalled body read by the handler", func(t *testing.T) {
		if got := slow(t, "/alice/pub.git/git-upload-pack", 0); !strings.HasPrefix(got, "HTTP/1.1 408") {
			t.Fatalf("answer %q, want 408", got)
		}
	})
	t.Run("stalled body after the answer", func(t *testing.T) {
		if got := slow(t, "/alice/priv.git/git-upload-pack", 0); !strings.HasPrefix(got, "HTTP/1.1 401") {
			t.Fatalf("answer %q, want 401", got)
		}
	})
	t.Run("trickled body", func(t *testing.T) {
		// A byte every third of the grace would restart a per-byte timer
		// forever (990 bytes: 100 s); it is far below the rate.
		if got := slow(t, "/alice/pub.git/git-upload-pack", stall/3); !strings.HasPrefix(got, "HTTP/1.1 408") {
			t.Fatalf("answer %q, want 408", got)
		}
	})
}

// TestPaceAnswer: a client that does not read the answer is cut off after
// the grace once the connection's buffers are full: the handler's write
// fails with clientlimit.ErrTooSlow instead of blocking for as long as the
// client likes, whether it writes or sends a file (ReadFrom, sendfile).
func TestPaceAnswer(t *testing.T) {
	const stall = 300 * time.Millisecond
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 256<<20); err != nil { // more than any socket buffers
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		// A file is sent paceChunk bytes under each deadline, which
		// earns their time at the rate: a faster rate keeps it short.
		rate   int64
		answer func(w http.ResponseWriter) error
	}{
		{"writes", 64 << 10, func(w http.ResponseWriter) error {
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			rc := http.NewResponseController(w)
			for range 4096 { // 256 MiB
				if _, err := w.Write(chunk); err != nil {
					return err
				}
				if err := rc.Flush(); err != nil {
					return err
				}
			}
			return nil
		}},
		{"a file", 4 << 20, func(w http.ResponseWriter) error {
			f, err := os.Open(big)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(w, &io.LimitedReader{R: f, N: 256 << 20})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wrote := make(chan error, 1)
			srv := httptest.NewServer(Pace(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				wrote <- c.answer(w)
			}), clientlimit.Rate{Grace: stall, BytesPerSec: c.rate}))
			defer srv.Close()
			conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, "GET /archive HTTP/1.1\r\nHost: x\r\n\r\n")
			select {
			case err := <-wrote:
				if !errors.Is(err, clientlimit.ErrTooSlow) {
					t.Fatalf("answer to a client that reads nothing: %v, want ErrTooSlow", err)
				}
			case <-time.After(30 * time.Second): // a bound for a broken server
				t.Fatal("the handler is still writing to a client that reads nothing")
			}
		})
	}
}

// fileWriter is a ResponseWriter whose ReadFrom, like net/http's, can take
// a file: it records the size of each io.LimitedReader of an *os.File it
// gets (what net.TCPConn's ReadFrom sends with sendfile(2)).
type fileWriter struct {
	*httptest.ResponseRecorder
	files, others []int64
}

func (w *fileWriter) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if _, ok := lr.R.(*os.File); ok {
			w.files = append(w.files, lr.N)
			return w.Body.ReadFrom(r)
		}
	}
	w.others = append(w.others, 0)
	return w.Body.ReadFrom(r)
}

// TestPaceSendsFiles: under Pace, a regular file copied to the answer
// (whole, or a range as an io.LimitedReader) reaches the connection's
// ReadFrom as the file itself, paceChunk bytes at a time, each under its
// own deadline; a pipe, whose reads may wait, is written as before. The
// answer has the same bytes either way.
func TestPaceSendsFiles(t *testing.T) {
	data := make([]byte, 3*paceChunk+1234)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		off, n     int64
		pipe       bool
		wantChunks []int64
	}{
		{"whole file", 0, int64(len(data)), false, []int64{paceChunk, paceChunk, paceChunk, 1234}},
		{"range", 1000, paceChunk + 10, false, []int64{paceChunk, 10}},
		{"pipe", 0, int64(len(data)), true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var src *os.File
			if c.pipe {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				go func() { w.Write(data); w.Close() }()
				src = r
			} else {
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				f.Seek(c.off, io.SeekStart)
				src = f
			}
			defer src.Close()
			fw := &fileWriter{ResponseRecorder: httptest.NewRecorder()}
			var sent int64
			var err error
			Pace(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sent, err = io.Copy(w, &io.LimitedReader{R: src, N: c.n})
			}), clientlimit.Rate{Grace: time.Minute, BytesPerSec: 1}).ServeHTTP(fw, httptest.NewRequest(http.MethodGet, "/f", nil))
			want := data[c.off : c.off+c.n]
			switch {
			case err != nil || sent != c.n || !bytes.Equal(fw.Body.Bytes(), want):
				t.Fatalf("sent %d of %d, %v; same bytes %t", sent, c.n, err, bytes.Equal(fw.Body.Bytes(), want))
			case fw.Code != http.StatusOK:
				t.Fatalf("status %d", fw.Code)
			case fmt.Sprint(fw.files) != fmt.Sprint(c.wantChunks) || len(fw.others) != 0:
				t.Fatalf("ReadFrom got file chunks %v (want %v) and other readers %d times", fw.files, c.wantChunks, len(fw.others))
			}
		})
	}
}

// TestMovedAnswerDoesNotHoldShutdown: a draining node answers a forwarded
// request "moved" while the forwarder has sent only part of the body and
// keeps the connection open. The answer arrives at once and the
// connection closes, so the node's graceful shutdown is not held (it was,
// for the 60 s stall time, past the drain deadline: the SIGTERM flake of
// testkit/multiproc TestClusterFailover).
func TestMovedAnswerDoesNotHoldShutdown(t *testing.T) {
	const stall = time.Minute // production's order of magnitude
	srv := httptest.NewServer(Pace(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gitserve.WriteMoved(w)
	}), clientlimit.Rate{Grace: stall}))
	defer srv.Close()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /alice/pub.git/git-receive-pack HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789")
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound for a broken server
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer while the body is unfinished: %v", err)
	}
	resp.Body.Close()
	if !gitserve.IsMovedResponse(resp.StatusCode, resp.Header) {
		t.Fatalf("answer %d %v, want the moved signal", resp.StatusCode, resp.Header)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("graceful shutdown with the forwarder's connection open: %v", err)
	}
}

// TestUnauthenticatedPerAddress: git requests without credentials that one
// address has in flight are capped: over the cap a request is answered 429
// with Retry-After and the limit's message, before anything is opened;
// requests with credentials are not counted, and a finished request gives
// its unit back.
func TestUnauthenticatedPerAddress(t *testing.T) {
	f := newFixture(t)
	limit := clientlimit.NewPerAddr(1, "RGIT_MAX_ANON_PER_ADDR")
	s, err := New(Config{Resolver: f.res, Auth: gitservetest.Tokens{aliceTok: "alice"}, Protocol: drainEngine{}, MaxBody: -1, Unauthenticated: limit})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	// An anonymous fetch whose body has not all arrived holds the unit.
	pr, pw := io.Pipe()
	held := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("POST", srv.URL+"/alice/pub.git/git-upload-pack", pr)
		req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
		held <- do(t, req)
	}()
	pw.Write([]byte("0000"))
	for deadline := time.Now().Add(10 * time.Second); limit.Held("127.0.0.1") != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow request holds no unit")
		}
	}
	opened := f.res.Sessions.Load()
	r := get(t, &fixture{srv: srv}, "/alice/pub.git/info/refs?service=git-upload-pack", "", nil)
	if want := "too many unauthenticated connections from your address (limit 1, set RGIT_MAX_ANON_PER_ADDR)\n"; r.status != http.StatusTooManyRequests ||
		r.body != want || r.header.Get("Retry-After") == "" {
		t.Fatalf("over the cap: %d %v %q, want 429 with Retry-After and %q", r.status, r.header, r.body, want)
	}
	if f.res.Sessions.Load() != opened {
		t.Error("a refused request opened a session")
	}
	if r := get(t, &fixture{srv: srv}, "/alice/pub.git/info/refs?service=git-upload-pack", aliceTok, nil); r.status != 200 {
		t.Errorf("with credentials: %d %q", r.status, r.body)
	}
	pw.Close()
	if r := <-held; r.status != 200 {
		t.Fatalf("slow request: %d %q", r.status, r.body)
	}
	if r := get(t, &fixture{srv: srv}, "/alice/pub.git/info/refs?service=git-upload-pack", "", nil); r.status != 200 {
		t.Errorf("after the slow request ended: %d %q", r.status, r.body)
	}
}

// busyEngine refuses every session for want of a negotiation slot.
type busyEngine struct{}

func (busyEngine) UploadPack(context.Context, gitproto.Backend, io.Reader, io.Writer, gitproto.Options) error {
	return &gitproto.BusyError{Slots: 16, Wait: 10 * time.Second}
}

func (e busyEngine) ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, o gitproto.Options) error {
	return e.UploadPack(ctx, b, in, out, o)
}

// TestBusyAnswer: a fetch refused for want of a negotiation slot is
// answered 503 with Retry-After and the line naming the settings.
func TestBusyAnswer(t *testing.T) {
	f := newFixture(t)
	s, err := New(Config{Resolver: f.res, Auth: gitservetest.Tokens{}, Protocol: busyEngine{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/alice/pub.git/git-upload-pack", strings.NewReader("0000"))
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	r := do(t, req)
	want := "server busy: all 16 fetch negotiation slots stayed taken for 10s (set RGIT_MAX_NEGOTIATIONS, RGIT_NEGOTIATION_WAIT_SECS)\n"
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != RetryAfter || r.body != want {
		t.Fatalf("busy: %d %v %q, want 503 with Retry-After and %q", r.status, r.header, r.body, want)
	}
}
