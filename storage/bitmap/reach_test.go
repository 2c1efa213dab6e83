package bitmap

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
)

// TestReachableMatchesRevList: the objects reachable from the refs are
// exactly `git rev-list --objects --all`, over a stack of layers with
// packs outside it and with no bitmap at all; a commit whose branch was
// deleted, and everything only it reaches, is not reachable though its
// pack holds it, and neither is a pack that holds them (HoldsAll).
func TestReachableMatchesRevList(t *testing.T) {
	r, packs, xs := layered(t)
	r.git("checkout", "-q", "-b", "gone")
	r.commit("gone")
	r.git("checkout", "-q", "main")
	r.git("repack", "-dq")
	gone := r.id("gone")
	only := r.id("gone:src/gone.go")
	r.git("branch", "-D", "gone")
	all := append(slices.Clone(packs), newPack(t, r, packs))
	set := pack.NewSet(all...)
	want := map[object.ID]bool{}
	for _, id := range r.revList(r.refs(), nil) {
		want[id] = true
	}
	if want[gone] || want[only] || !set.Has(gone) || !set.Has(only) {
		t.Fatal("fixture: the deleted branch's commit must be stored and unreachable")
	}
	for name, s := range map[string]*Stack{"layers": Choose(packs, xs), "no bitmap": nil} {
		if name == "layers" && (s == nil || len(s.Packs()) != 3) {
			t.Fatalf("Choose = %v, want three layered packs", s)
		}
		reach, err := Reachable(context.Background(), s, set, walk.NewGraph(set, 0), r.refs())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := 0
		for _, p := range all {
			for i := range p.Index().Count() {
				id := p.Index().ID(i)
				if got := reach.Has(id); got != want[id] {
					t.Errorf("%s: Has(%s) = %v, rev-list says %v", name, id, got, want[id])
				}
				if want[id] {
					n++
				}
			}
		}
		if n < len(want) {
			t.Errorf("%s: the packs hold %d of rev-list's %d objects", name, n, len(want))
		}
		if reach.Has(object.MustID("0123456789012345678901234567890123456789")) {
			t.Errorf("%s: an unknown id is reachable", name)
		}
		held := 0
		for _, p := range all {
			whole := true
			for i := range p.Index().Count() {
				whole = whole && want[p.Index().ID(i)]
			}
			if got := reach.HoldsAll(p); got != whole {
				t.Errorf("%s: HoldsAll(%s) = %v, rev-list says %v", name, p.Name(), got, whole)
			}
			if whole {
				held++
			}
		}
		if held == 0 || held == len(all) {
			t.Errorf("fixture: %d of %d packs wholly reachable; want some but not all", held, len(all))
		}
	}
	if _, err := Reachable(context.Background(), nil, set, walk.NewGraph(set, 0),
		[]object.ID{object.MustID("0123456789012345678901234567890123456789")}); err == nil {
		t.Error("a missing tip gave no error")
	}
}

// BenchmarkReachable measures what the read API pays for its reachable
// set: computed once per ref state from a whole-repository bitmap, or by
// walking the whole history when there is none, and then one Has per
// request. RGIT_BENCH_REPO names a git directory holding one pack (a
// fixture under RGIT_BENCH_DIR, e.g. medium-g1-go1.26.8).
func BenchmarkReachable(b *testing.B) {
	dir := os.Getenv("RGIT_BENCH_REPO")
	if dir == "" {
		b.Skip("RGIT_BENCH_REPO not set")
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if len(paths) != 1 {
		b.Fatalf("%s: %d packs, want 1", dir, len(paths))
	}
	p, err := pack.Open(paths[0], strings.TrimSuffix(paths[0], ".pack")+".idx")
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	out, err := exec.Command("git", "--git-dir", dir, "for-each-ref", "--format=%(objectname)").Output()
	if err != nil {
		b.Fatal(err)
	}
	var tips []object.ID
	for _, l := range strings.Fields(string(out)) {
		tips = append(tips, object.MustID(l))
	}
	ctx := context.Background()
	x, err := Build(ctx, p, tips, BuildOptions{})
	if err != nil {
		b.Fatal(err)
	}
	set := pack.NewSet(p)
	for name, s := range map[string]*Stack{"bitmap": Single(x), "walk": nil} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Reachable(ctx, s, set, walk.NewGraph(set, 1024), tips); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	reach, err := Reachable(ctx, Single(x), set, walk.NewGraph(set, 1024), tips)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("has", func(b *testing.B) {
		n := p.Index().Count()
		i := 0
		for b.Loop() {
			reach.Has(p.Index().ID(i % n))
			i++
		}
	})
}
