package walk

import (
	"context"
	"slices"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// TestListNewCommits compares ListNewCommits with `git rev-list tip --not
// exclude...` over a branchy history with a merge and clock skew, checks
// the limit, the budget and the fast-forward answer against `git
// merge-base --is-ancestor`, and that tags are peeled while missing or
// non-commit excludes exclude nothing.
func TestListNewCommits(t *testing.T) {
	r := newTestRepo(t)
	a := r.commit("a")
	b := r.commit("b")
	r.git("checkout", "-q", "-b", "side", a.String())
	r.now -= 3600
	c := r.commit("c")
	r.now += 7200
	d := r.commit("d")
	r.git("checkout", "-q", "main")
	r.git("merge", "-q", "--no-ff", "-m", "m", "side")
	m := r.rev("HEAD")
	e := r.commit("e")
	r.git("tag", "-a", "-m", "t", "t1", e.String())
	tag := r.rev("t1")
	tree := r.rev("HEAD^{tree}")
	missing := object.MustID("1111111111111111111111111111111111111111")
	g := NewGraph(r.reader(), 0)
	ctx := context.Background()
	all := []object.ID{a, b, c, d, m, e}
	for _, tip := range all {
		for _, ex := range append([]object.ID{{}}, all...) {
			var exclude []object.ID
			args := []string{"rev-list", tip.String()}
			if !ex.IsZero() {
				exclude = []object.ID{ex}
				args = append(args, "^"+ex.String())
			}
			want := r.commits(args...)
			got, err := ListNewCommits(ctx, g, tip, exclude, 100, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.IDs, want) || got.Truncated {
				t.Errorf("%s --not %s: got %v (truncated %v), git says %v", tip, ex, got.IDs, got.Truncated, want)
			}
			if wantFF := !ex.IsZero() && r.isAncestor(ex, tip); got.Descends != wantFF {
				t.Errorf("%s from %s: descends %v, git says %v", tip, ex, got.Descends, wantFF)
			}
		}
	}

	// The limit keeps the newest and says there were more.
	got, err := ListNewCommits(ctx, g, e, nil, 2, 1000)
	if err != nil || !slices.Equal(got.IDs, r.commits("rev-list", "-n", "2", e.String())) || !got.Truncated || got.Exhausted {
		t.Errorf("limit 2: %v truncated %v, %v", got.IDs, got.Truncated, err)
	}
	// The budget stops the walk and says so: a fast-forward it did not
	// reach the end of is not claimed.
	got, err = ListNewCommits(ctx, g, e, []object.ID{a}, 100, 2)
	if err != nil || !got.Truncated || !got.Exhausted || got.Descends || len(got.IDs) > 2 {
		t.Errorf("budget 2: %v truncated %v descends %v, %v", got.IDs, got.Truncated, got.Descends, err)
	}
	// Tags are peeled, on both sides.
	got, err = ListNewCommits(ctx, g, tag, []object.ID{m}, 100, 1000)
	if err != nil || !slices.Equal(got.IDs, []object.ID{e}) || !got.Descends {
		t.Errorf("tag tip: %v descends %v, %v", got.IDs, got.Descends, err)
	}
	got, err = ListNewCommits(ctx, g, e, []object.ID{tag}, 100, 1000)
	if err != nil || len(got.IDs) != 0 || !got.Descends {
		t.Errorf("tag exclude: %v descends %v, %v", got.IDs, got.Descends, err)
	}
	// A missing or non-commit exclude excludes nothing; a non-commit tip
	// brought no commits.
	for _, ex := range []object.ID{missing, tree} {
		got, err = ListNewCommits(ctx, g, b, []object.ID{ex}, 100, 1000)
		if err != nil || !slices.Equal(got.IDs, []object.ID{b, a}) || got.Descends {
			t.Errorf("exclude %s: %v descends %v, %v", ex, got.IDs, got.Descends, err)
		}
	}
	if got, err = ListNewCommits(ctx, g, tree, nil, 100, 1000); err != nil || len(got.IDs) != 0 {
		t.Errorf("tree tip: %v, %v", got.IDs, err)
	}
	if _, err = ListNewCommits(ctx, g, missing, nil, 100, 1000); err == nil {
		t.Error("a missing tip gave no error")
	}
}

// commits runs `git args...` and parses the commit ids it prints.
func (r *testRepo) commits(args ...string) []object.ID {
	return parseIDs(r.tb, r.git(args...))
}
