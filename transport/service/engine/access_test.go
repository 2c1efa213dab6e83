package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/transport/service/gitserve"
)

// TestAccessBeforeOpen: a caller who may not read a cold private
// repository opens no database, and "private" costs exactly what
// "missing" costs (DESIGN §6): cold, one index GET and the database
// listing started beside it (repo.ListAhead, never waited for, never
// used); nothing when cached. Any spelling reaches the repository under
// its canonical name.
func TestAccessBeforeOpen(t *testing.T) {
	ctx := context.Background()
	fs := faultstore.New(memstore.New(), 1)
	deps, node, gate := gateOver(t, fs, "alice", "priv")
	// Any touch of a repository database fails loudly.
	rule := fs.AddRule(faultstore.Rule{Prefix: "repo/", FailBefore: 1})
	deps.Meta.Forget(names.MustParse("alice/priv")) // cold: Create just wrote it

	bob := auth.Identity{Owner: "bob", Authenticated: true}
	for _, tc := range []struct {
		id   auth.Identity
		want auth.Decision
	}{{auth.Anonymous, auth.Unauthorized}, {bob, auth.NotFound}} {
		var ops [2][2]int64
		for i, name := range []string{"priv", "missing"} {
			for pass := range 2 { // cold, then cached
				fs.ResetCounts()
				_, err := gate.Open(ctx, gitserve.UploadPack, names.MustParse("alice/"+name), tc.id)
				var de *gitserve.DeniedError
				if !errors.As(err, &de) || de.Decision != tc.want {
					t.Fatalf("%+v on alice/%s: %v, want %s", tc.id, name, err, tc.want)
				}
				deps.Ahead.Wait()
				ops[i][pass] = fs.Count(faultstore.AllOps)
			}
			deps.Meta.Forget(names.MustParse("alice/" + name))
		}
		if ops[0] != ops[1] || ops[0] != [2]int64{2, 0} {
			t.Errorf("%+v: store ops (cold, cached) private %v, missing %v; want [2 0] for both", tc.id, ops[0], ops[1])
		}
	}
	if open, _ := node.OpenRepos(ctx); len(open) != 0 {
		t.Fatalf("denied requests opened %v", open)
	}

	fs.RemoveRule(rule)
	alice := auth.Identity{Owner: "ALICE", Authenticated: true}
	sess, err := gate.Open(ctx, gitserve.UploadPack, names.MustParse("Alice/PRIV.git"), alice)
	if err != nil {
		t.Fatalf("alice opening Alice/PRIV.git: %v", err)
	}
	defer sess.Close()
	if sess.Repo.String() != "alice/priv" {
		t.Fatalf("session on %s, want the canonical alice/priv", sess.Repo)
	}
}

// gateOver is a single node's gate over store st, with a name-index cache
// and listings ahead, on which owner/name was just created.
func gateOver(t *testing.T, st objstore.Store, owner, name string) (repo.Deps, *actors.Node, *gitserve.Gate) {
	t.Helper()
	deps := repo.Deps{Store: st, Meta: repo.NewMetaCache(st, repo.MetaCacheOptions{}), Ahead: repo.NewListAhead(st)}
	if err := repo.Create(context.Background(), deps, names.MustParse(owner+"/"+name)); err != nil {
		t.Fatal(err)
	}
	node, err := actors.NewNode(actors.Config{Deps: deps})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown(context.Background()) })
	gate, err := gitserve.NewGate(&NodeResolver{Node: node, Deps: deps}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return deps, node, gate
}
