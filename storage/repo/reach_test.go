package repo

import (
	"context"
	"errors"
	"testing"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
)

// TestReachableFollowsRefs: what is reachable follows the refs (a commit
// whose branch was deleted is not, though its pack is still listed); the
// set is computed once per pack set and ref tips, shared by snapshots of
// later database states with the same tips, and a caller that gives up
// waiting does not stop the computation.
func TestReachableFollowsRefs(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	c1 := pushFirst(t, d, r, g)
	c2 := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), c2.String(), "^"+c1.String()), RefUpdate{Name: "refs/heads/tmp", New: c2})

	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := snapshot(t, r).Reachable(gone); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reachable with a cancelled context: %v", err)
	}
	before, err := snapshot(t, r).Reachable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tree := g.rev(c2.String() + "^{tree}")
	if !before.Has(c1) || !before.Has(c2) || !before.Has(tree) {
		t.Fatal("a ref's commit or tree is not reachable")
	}
	if err := r.SetVisibility(ctx, true); err != nil {
		t.Fatal(err)
	}
	if again, err := snapshot(t, r).Reachable(ctx); err != nil || again != before {
		t.Fatalf("same tips in a later state: %p %v, want the shared set %p", again, err, before)
	}

	push(t, r, nil, RefUpdate{Name: "refs/heads/tmp", Old: c2})
	s := snapshot(t, r)
	if !s.Objects().Has(c2) {
		t.Fatal("fixture: the deleted branch's commit must still be stored")
	}
	after, err := s.Reachable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Has(c2) || after.Has(tree) || !after.Has(c1) {
		t.Fatalf("after deleting tmp: c2 %v, its tree %v, c1 %v", after.Has(c2), after.Has(tree), after.Has(c1))
	}
}
