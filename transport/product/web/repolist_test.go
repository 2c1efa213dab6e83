package web

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/repo"
)

// listCounter counts the listings of the store under it.
type listCounter struct {
	objstore.Store
	lists atomic.Int32
}

func (c *listCounter) List(ctx context.Context, prefix, after string) iter.Seq2[objstore.ObjectInfo, error] {
	c.lists.Add(1)
	return c.Store.List(ctx, prefix, after)
}

// TestRepoListReadsTheIndexOncePerTTL: a stream of anonymous list
// requests reads the name index (a listing plus a read per repository)
// once, not once per request, and each caller still sees only what it may
// read.
func TestRepoListReadsTheIndexOncePerTTL(t *testing.T) {
	ctx := context.Background()
	st := &listCounter{Store: memstore.New()}
	cache, err := packcache.Open(t.TempDir(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	d := repo.Deps{Store: st, Cache: cache}
	for _, name := range []string{"pub", "priv"} {
		if err := repo.Create(ctx, d, names.MustParse("alice/"+name)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := repo.Open(ctx, d, names.MustParse("alice/pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetVisibility(ctx, true); err != nil {
		t.Fatal(err)
	}
	r.Close(ctx)
	l := &RepoLister{Store: st, Auth: auth.NewStore(st)}
	before := st.lists.Load()
	for range 20 {
		rec := httptest.NewRecorder()
		l.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/repos", nil))
		var got RepoList
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 {
			t.Fatalf("GET /api/repos: %d %s", rec.Code, rec.Body)
		}
		if len(got.Repos) != 1 || got.Repos[0].Name != "pub" {
			t.Fatalf("anonymous sees %+v, want alice/pub only", got.Repos)
		}
	}
	if n := st.lists.Load() - before; n != 1 {
		t.Fatalf("20 list requests listed the name index %d times, want 1", n)
	}
}

// TestRepoListOwnFirstPaged: the caller's own repositories come first,
// then every other one they may read (others' public ones, and private
// ones shared with them), each by name; a private repository of
// someone else is never listed, to another owner or to an anonymous
// caller; the pages hold each repository once and say where the list
// ends; a bad page number is 400.
func TestRepoListOwnFirstPaged(t *testing.T) {
	repo := func(full string, public bool, grants ...auth.Grant) auth.RepoInfo {
		return auth.RepoInfo{Repo: names.MustParse(full), Public: public, Grants: grants}
	}
	metas := []auth.RepoInfo{
		repo("bob/x", true), repo("alice/b", false), repo("Dave/pub", true), repo("bob/secret", false),
		repo("carol/shared", false, auth.Grant{User: "alice", Role: auth.RoleRead}), repo("alice/A", true),
	}
	for _, c := range []struct {
		who  auth.Identity
		want string
	}{
		{auth.Identity{Owner: "alice", Authenticated: true}, "alice/A alice/b bob/x carol/shared Dave/pub"},
		{auth.Identity{Owner: "bob", Authenticated: true}, "bob/secret bob/x alice/A Dave/pub"},
		{auth.Identity{}, "alice/A bob/x Dave/pub"},
	} {
		if got := fullNames(listFor(c.who, metas)); got != c.want {
			t.Errorf("%q sees %s, want %s", c.who.Owner, got, c.want)
		}
	}

	st := memstore.New()
	tokens := auth.NewStore(st)
	tok, err := tokens.CreateToken(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	l := &RepoLister{Store: st, Auth: tokens, PerPage: 2}
	// The index as read a moment ago (what index() serves within listTTL).
	l.metas, l.readAt = metas, time.Now()
	var pages []string
	for page := 1; ; page++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/api/repos?page="+strconv.Itoa(page), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		l.ServeHTTP(rec, req)
		var got RepoList
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 || got.Page != page {
			t.Fatalf("page %d: %d %s", page, rec.Code, rec.Body)
		}
		pages = append(pages, fullNames(got.Repos))
		if !got.More || page > 5 {
			break
		}
	}
	if got := strings.Join(pages, " | "); got != "alice/A alice/b | bob/x carol/shared | Dave/pub" {
		t.Errorf("alice's pages: %s", got)
	}
	for _, bad := range []string{"0", "-1", "x", "1001"} {
		rec := httptest.NewRecorder()
		l.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/repos?page="+bad, nil))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("page=%s: %d", bad, rec.Code)
		}
	}
}

func fullNames(items []RepoItem) string {
	var out []string
	for _, it := range items {
		out = append(out, it.Owner+"/"+it.Name)
	}
	return strings.Join(out, " ")
}
