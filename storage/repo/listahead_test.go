package repo

import (
	"testing"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/testkit/faultstore"
)

// TestListAhead: Open uses the listing Start took instead of its own; no
// listing is started for a repository open here; a discarded listing is
// not used.
func TestListAhead(t *testing.T) {
	fs := faultstore.New(memstore.New(), 1)
	d := newDeps(t, fs)
	d.Ahead = NewListAhead(fs)
	if err := Create(ctx, d, names.MustParse("o/r")); err != nil {
		t.Fatal(err)
	}
	lists := func(do func()) int64 {
		t.Helper()
		fs.ResetCounts()
		do()
		d.Ahead.Wait()
		return fs.Count(faultstore.OpList)
	}
	open := func() *Repo {
		t.Helper()
		r, err := Open(ctx, d, names.MustParse("o/r"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var r *Repo
	if n := lists(func() { d.Ahead.Start(names.MustParse("o/r")); r = open() }); n != 1 {
		t.Fatalf("Start then Open listed %d times, want 1", n)
	}
	if n := lists(func() { d.Ahead.Start(names.MustParse("o/r")) }); n != 0 {
		t.Fatalf("Start on an open repository listed %d times, want 0", n)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := lists(func() { d.Ahead.Start(names.MustParse("o/r")); d.Ahead.Start(names.MustParse("o/r")) }); n != 1 {
		t.Fatalf("two Starts listed %d times, want 1", n)
	}
	if n := lists(func() { d.Ahead.Discard(names.MustParse("o/r")); r = open() }); n != 1 {
		t.Fatalf("Open after Discard listed %d times, want its own 1", n)
	}
	r.Close(ctx)
}
