package web

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

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
