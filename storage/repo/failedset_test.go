package repo

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/testkit/tmpfs"
)

// TestFailedPackDownloadIsLetGo: a pack whose download broke after the
// pack set opened is let go by the Repo at the next Snapshot, also when
// that Snapshot cannot open the set again. Its file is deleted from the
// cache directory at once; a descriptor the Repo kept would keep its
// space used (on a full cache disk, for good).
func TestFailedPackDownloadIsLetGo(t *testing.T) {
	fs := faultstore.New(memstore.New(), 1)
	name := names.MustParse("o/r")
	d := newDeps(t, fs)
	r := create(t, d, name)
	g := newGitRepo(t)
	pushFirst(t, d, r, g)
	packName := snapshot(t, r).Packs[0].Name
	r.Close(ctx)

	// A fresh node, downloading in small ranged reads that break once
	// the pack set is open.
	c, err := packcache.Open(t.TempDir(), fs, nil, packcache.WithParallel(objstore.ParallelOptions{Chunk: 64, Streams: 2}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d2 := Deps{Store: fs, Cache: c}
	pk, ik := PackKeys(name, packName)
	fs.AddRule(faultstore.Rule{Ops: faultstore.OpGetRange, Prefix: pk, CutBodyAfter: 5})
	gate := fs.HoldKeys(faultstore.OpGetRange, pk, "")
	r2, err := Open(ctx, d2, name)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(ctx)
	s, err := r2.Snapshot(ctx)
	gate.Release()
	if err != nil {
		t.Fatal(err)
	}
	// Get joins the download and returns once it is over.
	if _, _, err := d2.Cache.Get(ctx, pk, ik, packName); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("Get of a pack whose download breaks: %v, want the injected error", err)
	}
	s.Close()
	// The next open fails too: the index cannot be read now.
	fs.AddRule(faultstore.Rule{Ops: faultstore.OpGet | faultstore.OpGetRange, Prefix: ik, FailBefore: 1})
	if _, err := r2.Snapshot(ctx); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("Snapshot with the store failing: %v, want the injected error", err)
	}
	if fds := tmpfs.OpenUnder(t, filepath.Join(d2.Cache.Dir(), "tmp")); len(fds) != 0 {
		t.Fatalf("the failed download's files are still open: %v", fds)
	}
}
