package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/testkit/gitrun"
	"github.com/rgit/rgit/testkit/redistest"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// localRepo is one public repository alice/site for Local, in a pack
// git wrote: main, plus the commit of a branch "gone" that the pack holds
// but the refs no longer reach (deleted, not yet collected).
type localRepo struct {
	dir           string
	packPath      string
	main, gone    object.ID
	big           string // big.txt's content, in main, stored whole
	bigID, goneID object.ID
}

func newLocalRepo(t *testing.T) *localRepo {
	t.Helper()
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("t", "t@t", "2024-01-01T00:00:00Z")})
	dir := g.Dir
	var big strings.Builder
	for i := 0; big.Len() < 1536<<10; i++ { // past the raw answer's sniffed head
		fmt.Fprintf(&big, "line %d: %x %x\n", i, i*7919, i*i)
	}
	g.Write("big.txt", big.String())
	g.Write("README.md", "# site\n")
	g.Run("add", "-A")
	g.Run("commit", "-q", "-m", "main")
	g.Run("checkout", "-q", "-b", "gone")
	g.Write("secret.txt", "deleted with its branch\n")
	g.Run("add", "-A")
	g.Run("commit", "-q", "-m", "gone")
	r := &localRepo{dir: dir, big: big.String()}
	r.main = object.MustID(g.Run("rev-parse", "main"))
	r.gone = object.MustID(g.Run("rev-parse", "gone"))
	r.bigID = object.MustID(g.Run("rev-parse", "main:big.txt"))
	r.goneID = object.MustID(g.Run("rev-parse", "gone:secret.txt"))
	// No deltas: big.txt is one zlib stream in the pack.
	hash := strings.TrimSpace(string(g.Output([]byte("main\ngone\n"), "pack-objects", "-q", "--revs", "--window=0", filepath.Join(dir, "pack"))))
	r.packPath = filepath.Join(dir, "pack-"+hash+".pack")
	return r
}

// open opens the pack and computes what main reaches.
func (r *localRepo) open(t *testing.T) *browseBackend {
	t.Helper()
	p, err := pack.Open(r.packPath, strings.TrimSuffix(r.packPath, ".pack")+".idx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	set := pack.NewSet(p)
	reach, err := bitmap.Reachable(context.Background(), nil, set, walk.NewGraph(set, 0), []object.ID{r.main})
	if err != nil {
		t.Fatal(err)
	}
	return &browseBackend{set: set, reach: reach}
}

// corruptBig damages big.txt's stored bytes past the raw answer's head,
// so a read of it fails part-way.
func (r *localRepo) corruptBig(t *testing.T) {
	t.Helper()
	p, err := pack.Open(r.packPath, strings.TrimSuffix(r.packPath, ".pack")+".idx")
	if err != nil {
		t.Fatal(err)
	}
	idx := p.Index()
	i, ok := idx.Find(r.bigID)
	if !ok {
		t.Fatal("big.txt not in the pack")
	}
	start, end := idx.Offset(i), p.Size()-20
	for j := range idx.Count() {
		if o := idx.Offset(j); o > start && o < end {
			end = o
		}
	}
	p.Close()
	f, err := os.OpenFile(r.packPath, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := start + (end-start)*3/4
	if _, err := f.WriteAt(make([]byte, 4096), at); err != nil {
		t.Fatal(err)
	}
}

// browseBackend is a session's backend over one pack: public alice/site.
type browseBackend struct {
	gitproto.Backend // only what the read API calls is implemented
	set              *pack.Set
	reach            *bitmap.Reach
}

func (b *browseBackend) Objects() *pack.Set { return b.set }

func (b *browseBackend) Reachable(context.Context) (*bitmap.Reach, error) { return b.reach, nil }

func (b *browseBackend) RepoInfo() auth.RepoInfo {
	return auth.RepoInfo{Repo: names.MustParse("alice/site"), Public: true}
}

// oneRepo resolves alice/site to b and nothing else.
type oneRepo struct{ b *browseBackend }

func (o oneRepo) Lookup(_ context.Context, r names.Repo) (auth.RepoInfo, error) {
	if r.Key() != "alice/site" {
		return auth.RepoInfo{}, auth.ErrRepoNotFound
	}
	return o.b.RepoInfo(), nil
}

func (o oneRepo) Session(context.Context, names.Repo, bool) (gitserve.Resolved, error) {
	return gitserve.Resolved{Backend: o.b}, nil
}

func newLocal(t *testing.T, b *browseBackend) *Local {
	t.Helper()
	gate, err := gitserve.NewGate(oneRepo{b}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return &Local{Gate: gate}
}

// get answers path through srv: status, headers and as much of the body
// as arrived.
func get(t *testing.T, srv *httptest.Server, path string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body) // a cut answer ends in an error
	return resp.StatusCode, resp.Header, string(b)
}

// TestUnreachableLikeMissing: an object only a deleted branch reaches is
// refused by every id endpoint exactly as a missing one is (status,
// headers, body but for the id), as a fetch refuses it; what main reaches
// is served.
func TestUnreachableLikeMissing(t *testing.T) {
	r := newLocalRepo(t)
	srv := newTestHandler(t, nil, newLocal(t, r.open(t)))
	missing := object.MustID(oidA)
	paths := func(id object.ID) []string {
		o := id.String()
		return []string{"tree/" + o, "blob/" + o, "raw/" + o, "log/" + o, "commit/" + o, "archive/" + o + ".tar.gz",
			"archive/" + o + ".zip", "compare/" + r.main.String() + "..." + o, "compare/" + o + "..." + r.main.String(),
			"tree/" + o + "/secret.txt", "raw/" + o + "/secret.txt"}
	}
	for _, id := range []object.ID{r.gone, r.goneID} {
		for i, p := range paths(id) {
			code, h, body := get(t, srv, "/api/alice/site/"+p)
			mcode, mh, mbody := get(t, srv, "/api/alice/site/"+paths(missing)[i])
			if code != http.StatusNotFound || code != mcode || strings.ReplaceAll(body, id.String(), oidA) != mbody {
				t.Errorf("%s: %d %s; missing: %d %s", p, code, body, mcode, mbody)
			}
			for _, k := range []string{"Content-Type", "Cache-Control", "ETag", "Content-Length"} {
				if k != "Content-Length" && !slices.Equal(h.Values(k), mh.Values(k)) {
					t.Errorf("%s: %s %q, missing %q", p, k, h.Values(k), mh.Values(k))
				}
			}
		}
	}
	for _, p := range []string{"commit/" + r.main.String(), "raw/" + r.main.String() + "/README.md", "tree/" + r.main.String()} {
		if code, _, body := get(t, srv, "/api/alice/site/"+p); code != http.StatusOK {
			t.Errorf("%s (reachable): %d %s", p, code, body)
		}
	}
}

// TestLocalReadErrorNotStored: a raw answer whose pack read fails
// part-way reaches the client cut short and is not cached, so the next
// request reads again instead of serving the cut copy to everyone.
func TestLocalReadErrorNotStored(t *testing.T) {
	r := newLocalRepo(t)
	r.corruptBig(t)
	rs := redistest.Start(t, "maxmemory-policy volatile-lru")
	// Entries as large as big.txt: a raw answer fails past its sniffed
	// head only when it is larger than the default cap.
	c, err := OpenCache(rs.URL(), nil, CacheOptions{MaxEntry: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv := newTestHandler(t, c, newLocal(t, r.open(t)))
	path := "/api/alice/site/raw/" + r.main.String() + "/big.txt"
	for i := range 2 {
		code, h, body := get(t, srv, path)
		if code != http.StatusOK || body == r.big {
			t.Fatalf("request %d: %d, %d bytes: the damaged pack was read whole", i, code, len(body))
		}
		t.Logf("request %d: %d of %s bytes", i, len(body), h.Get("Content-Length"))
		if x := h.Get("X-Cache"); x != "miss" {
			t.Fatalf("request %d: X-Cache %q: the cut answer was cached", i, x)
		}
	}
}

// TestFailStatus: the node's conditions reach read-API callers as git
// clients get them — 503 with Retry-After and the same words (a store
// outage through api-serve answered 500) — and only what nobody
// classified is a 500.
func TestFailStatus(t *testing.T) {
	for _, c := range []struct {
		err        error
		code       int
		body       string
		retryAfter bool
	}{
		{fmt.Errorf("open: %w", objstore.ErrUnavailable), http.StatusServiceUnavailable, gitserve.StoreUnavailable, true},
		{fmt.Errorf("fetch: %w", packcache.ErrDiskFull), http.StatusServiceUnavailable, gitserve.CacheDiskFull, true},
		{fmt.Errorf("claim: %w", gitserve.ErrUnavailable), http.StatusServiceUnavailable, "repository temporarily unavailable", true},
		{fmt.Errorf("x: %w", ErrNotFound), http.StatusNotFound, "not found", false},
		{fmt.Errorf("something else"), http.StatusInternalServerError, "internal error", false},
	} {
		w := httptest.NewRecorder()
		(&Local{}).fail(w, httptest.NewRequest(http.MethodGet, "/api/alice/site/refs", nil), c.err)
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.body) || (w.Header().Get("Retry-After") != "") != c.retryAfter {
			t.Errorf("%v: %d %q Retry-After %q; want %d with %q", c.err, w.Code, w.Body.String(), w.Header().Get("Retry-After"), c.code, c.body)
		}
	}
}
