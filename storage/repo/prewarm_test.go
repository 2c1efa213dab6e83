package repo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
)

// Prewarm leaves a fresh node's cache holding the pack, its index and its
// bitmap; a budget smaller than the pack fetches nothing.
func TestPrewarm(t *testing.T) {
	st := memstore.New()
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	cmds := branchyHistory(g)
	push(t, r, g.indexPack(d.Cache.TempDir(), "--all"), cmds...)
	s := snapshot(t, r)
	name := s.Packs[0].Name
	done := make(chan error, 1)
	builds := NewBitmapBuilds()
	defer builds.Close()
	if !builds.Start(d, names.MustParse("o/r"), name, wantsOf(cmds), func(err error) { done <- err }) {
		t.Fatal("build not started")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := s.Packs[0].Size + s.Packs[0].IdxSize

	tight := newDeps(t, st)
	if n, err := Prewarm(ctx, tight, names.MustParse("o/r"), want-1); err != nil || n != 0 {
		t.Fatalf("Prewarm within %d bytes = %d, %v; want 0 (the pack does not fit)", want-1, n, err)
	}
	if files := cached(t, tight.Cache.Dir(), name); len(files) != 0 {
		t.Fatalf("over-budget prewarm cached %v", files)
	}

	fresh := newDeps(t, st)
	n, err := Prewarm(ctx, fresh, names.MustParse("o/r"), 0)
	if err != nil || n != want {
		t.Fatalf("Prewarm = %d, %v; want %d", n, err, want)
	}
	files := cached(t, fresh.Cache.Dir(), name)
	for _, ext := range []string{".pack", ".idx", ".bitmap"} {
		if _, ok := files[name+ext]; !ok {
			t.Errorf("no %s%s in the cache after Prewarm: %v", name, ext, files)
		}
	}
}

// cached lists the files under dir whose names start with name.
func cached(t *testing.T, dir, name string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && len(e.Name()) >= len(name) && e.Name()[:len(name)] == name {
			out[e.Name()] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
