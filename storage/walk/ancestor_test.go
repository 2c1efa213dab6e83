package walk

import (
	"context"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// TestIsAncestor checks IsAncestor against `git merge-base --is-ancestor`
// on every pair of a branchy history with a merge and a commit dated
// before its parent (clock skew, which a date cutoff would get wrong), and
// answers false for non-commits as git's receive-pack does.
func TestIsAncestor(t *testing.T) {
	r := newTestRepo(t)
	a := r.commit("a")
	b := r.commit("b")
	r.git("checkout", "-q", "-b", "side", a.String())
	r.now -= 3600 // skew: c is older than its parent a
	c := r.commit("c")
	r.now += 7200
	d := r.commit("d")
	r.git("checkout", "-q", "main")
	r.git("merge", "-q", "--no-ff", "-m", "m", "side")
	m := r.rev("HEAD")
	e := r.commit("e")
	r.git("tag", "-a", "-m", "t", "t1", b.String())
	tag := r.rev("t1")
	tree := r.rev("HEAD^{tree}")
	g := NewGraph(r.reader(), 0)
	commits := []object.ID{a, b, c, d, m, e}
	for _, x := range commits {
		for _, y := range commits {
			want := r.isAncestor(x, y)
			got, err := IsAncestor(context.Background(), g, x, y)
			if err != nil || got != want {
				t.Errorf("IsAncestor(%s, %s) = %v, %v; git says %v", x, y, got, err, want)
			}
		}
	}
	for _, pair := range [][2]object.ID{{tag, e}, {b, tag}, {tree, e}, {a, tree}} {
		if got, err := IsAncestor(context.Background(), g, pair[0], pair[1]); got || err != nil {
			t.Errorf("IsAncestor(%s, %s) = %v, %v; want false for a non-commit", pair[0], pair[1], got, err)
		}
	}
	if _, err := IsAncestor(context.Background(), g, object.MustID("1111111111111111111111111111111111111111"), e); err == nil {
		t.Error("a missing object gave no error")
	}
}

func (r *testRepo) isAncestor(x, y object.ID) bool {
	_, err := r.run(nil, "merge-base", "--is-ancestor", x.String(), y.String())
	return err == nil
}
