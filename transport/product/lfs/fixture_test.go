package lfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/frontend/httpgit"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/service/gitserve/gitservetest"
	"github.com/rgit/rgit/transport/wire/clientlimit"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// tokens maps a token to the identity it carries.
type tokens map[string]auth.Identity

func (t tokens) TokenIdentity(_ context.Context, token string) (auth.Identity, error) {
	if id, ok := t[token]; ok {
		return id, nil
	}
	return auth.Anonymous, auth.ErrUnknownCredential
}

// settings is a backend that knows the repository's settings, as the
// engine's does (gitserve.Authoritative).
type settings struct {
	gitproto.Backend
	info auth.RepoInfo
}

func (s settings) RepoInfo() auth.RepoInfo { return s.info }

// resolver is gitservetest's with Authoritative backends.
type resolver struct{ *gitservetest.Resolver }

func (r resolver) Session(ctx context.Context, n names.Repo, write bool) (gitserve.Resolved, error) {
	res, err := r.Resolver.Session(ctx, n, write)
	if err != nil {
		return gitserve.Resolved{}, err
	}
	info, _ := r.Lookup(ctx, n)
	res.Backend = settings{Backend: res.Backend, info: info}
	return res, nil
}

// repoLocks keeps the locks of every repository in its own storage/repo
// database on one memory store, as the repo actors do.
type repoLocks struct {
	d     repo.Deps
	repos map[string]*repo.Repo
}

func (l *repoLocks) open(t *testing.T, owner, name string) {
	if err := repo.Create(t.Context(), l.d, names.MustParse(owner+"/"+name)); err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(t.Context(), l.d, names.MustParse(owner+"/"+name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	l.repos[owner+"/"+name] = r
}

func (l *repoLocks) CreateLock(ctx context.Context, r names.Repo, path, holder string) (repo.Lock, error) {
	return l.repos[r.String()].CreateLock(ctx, path, holder)
}

func (l *repoLocks) DeleteLock(ctx context.Context, r names.Repo, id, holder string) (repo.Lock, error) {
	return l.repos[r.String()].DeleteLock(ctx, id, holder)
}

func (l *repoLocks) Locks(_ context.Context, r names.Repo) ([]repo.Lock, error) {
	return l.repos[r.String()].Locks()
}

// fixture is one LFS front end over a memory store (or the given one),
// with alice's repositories alice/pub (public) and alice/priv, bob a
// collaborator with write on both, and these tokens: alice, bob, carol (a
// stranger), alice-read (scope read), alice-other (limited to another
// repository).
type fixture struct {
	srv    *Server
	ts     *httptest.Server
	store  objstore.Store
	locks  *repoLocks
	tokens tokens
}

// newFixture builds a fixture with limits; each set adjusts the Config
// before the server is built.
func newFixture(t *testing.T, st objstore.Store, limits Limits, set ...func(*Config)) *fixture {
	t.Helper()
	if st == nil {
		st = memstore.New()
	}
	cache, err := packcache.Open(t.TempDir(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	locks := &repoLocks{d: repo.Deps{Store: st, Cache: cache}, repos: map[string]*repo.Repo{}}
	res := gitservetest.NewResolver()
	grants := []auth.Grant{{User: "bob", Role: auth.RoleWrite}, {User: "rea", Role: auth.RoleRead}}
	for _, n := range []string{"pub", "priv"} {
		res.Add(auth.RepoInfo{Repo: names.MustParse("alice/" + n), Public: n == "pub", Grants: grants}, "")
		locks.open(t, "alice", n)
	}
	gate, err := gitserve.NewGate(resolver{res}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	user := func(o string) auth.Identity { return auth.Identity{Owner: o, Authenticated: true} }
	tk := tokens{"alice": user("alice"), "bob": user("bob"), "carol": user("carol"), "rea": user("rea"),
		"alice-read":  {Owner: "alice", Authenticated: true, ReadOnly: true},
		"alice-other": {Owner: "alice", Authenticated: true, Repos: []string{"alice/other"}}}
	cfg := Config{Gate: gate, Auth: tk, Store: st, Locks: locks, Secret: "a test peer secret", Limits: limits}
	for _, f := range set {
		f(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv.Register(mux)
	// Paced as a node's listeners are (httpgit.Pace, RGIT_MIN_RATE's
	// default), which sends files with sendfile(2).
	ts := httptest.NewServer(httpgit.Pace(mux, clientlimit.Rate{Grace: time.Minute, BytesPerSec: 4096}))
	t.Cleanup(ts.Close)
	return &fixture{srv: srv, ts: ts, store: st, locks: locks, tokens: tk}
}

// do sends method to path (under the server) as token ("" anonymous)
// with body (JSON-encoded unless it is a []byte) and decodes a JSON
// answer into out when out is not nil.
func (f *fixture) do(t *testing.T, method, url, token string, body any, out any) (int, http.Header) {
	t.Helper()
	var rd io.Reader = http.NoBody
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	if strings.HasPrefix(url, "/") {
		url = f.ts.URL + url
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.SetBasicAuth("x", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, url, raw, err)
		}
	}
	return resp.StatusCode, resp.Header
}

// batch posts a batch request for objects of repo as token.
func (f *fixture) batch(t *testing.T, repoPath, token, op string, objs ...objectSpec) (int, batchResponse) {
	t.Helper()
	var resp batchResponse
	code, _ := f.do(t, http.MethodPost, "/"+repoPath+".git/info/lfs/objects/batch", token,
		batchRequest{Operation: op, Transfers: []string{"basic"}, Objects: objs, HashAlgo: "sha256"}, &resp)
	return code, resp
}

// object is content with its id.
type object struct {
	data []byte
	spec objectSpec
}

func newObject(content string) object {
	sum := sha256.Sum256([]byte(content))
	return object{data: []byte(content), spec: objectSpec{OID: hex.EncodeToString(sum[:]), Size: int64(len(content))}}
}
