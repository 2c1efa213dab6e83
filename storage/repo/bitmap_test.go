package repo

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/walk"
)

// branchyHistory commits on main and a side branch and tags, and returns
// the ref updates that create all of it in an empty repository.
func branchyHistory(g *gitRepo) []RefUpdate {
	for i := 0; i < 12; i++ {
		g.commit()
	}
	g.run(nil, "checkout", "-q", "-b", "side", "HEAD~4")
	for i := 0; i < 5; i++ {
		g.commit()
	}
	g.run(nil, "checkout", "-q", "main")
	g.run(nil, "tag", "-a", "-m", "t", "v1", "HEAD~2")
	var cmds []RefUpdate
	for _, ref := range []string{"refs/heads/main", "refs/heads/side", "refs/tags/v1"} {
		cmds = append(cmds, RefUpdate{Name: ref, New: g.rev(ref)})
	}
	return cmds
}

// waitForKey polls the store until key exists, for at most 30 seconds.
func waitForKey(t *testing.T, st objstore.Store, key string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := st.Head(ctx, key)
		if err == nil {
			return
		}
		if !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("head %s: %v", key, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", key)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// samePlan asserts the bitmap answers req with exactly the objects of the
// walk (the exact walk: the sparse one may resend objects).
func samePlan(t *testing.T, s *Snapshot, bm *bitmap.Stack, req walk.Request) {
	t.Helper()
	g := walk.NewGraph(s.Objects(), 0)
	got, err := bm.Objects(ctx, g, req)
	if err != nil {
		t.Fatalf("bitmap query: %v", err)
	}
	want, err := walk.Objects(ctx, walk.NewGraph(s.Objects(), 0), req)
	if err != nil {
		t.Fatal(err)
	}
	a, b := slices.Clone(got.Objects), slices.Clone(want.Objects)
	cmp := func(x, y object.ID) int { return bytes.Compare(x[:], y[:]) }
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	if !slices.Equal(a, b) {
		t.Fatalf("bitmap plan has %d objects, walk %d", len(a), len(b))
	}
}

func wantsOf(cmds []RefUpdate) []object.ID {
	var ids []object.ID
	for _, c := range cmds {
		ids = append(ids, c.New)
	}
	return ids
}

// The first push into an empty repository gets a bitmap in the background;
// fetches then plan from it, with the walk's object set.
func TestFirstPushGetsBitmap(t *testing.T) { forEachStore(t, testFirstPushGetsBitmap) }

func testFirstPushGetsBitmap(t *testing.T, st objstore.Store) {
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	cmds := branchyHistory(g)
	ix := g.indexPack(d.Cache.TempDir(), "--all")
	before := snapshot(t, r) // a reader whose pack set predates the bitmap
	if before.Bitmap(ctx) != nil {
		t.Fatal("empty repository has a bitmap")
	}
	push(t, r, ix, cmds...)
	s := snapshot(t, r)
	if s.Bitmap(ctx) != nil {
		t.Fatal("bitmap before any build")
	}
	done := make(chan error, 1)
	builds := NewBitmapBuilds()
	defer builds.Close()
	if !builds.Start(d, names.MustParse("o/r"), s.Packs[0].Name, wantsOf(cmds), func(err error) { done <- err }) {
		t.Fatal("build not started")
	}
	waitForKey(t, st, BitmapKey(names.MustParse("o/r"), s.Packs[0].Name))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The cache had looked and found none; adoption replaced that answer.
	bm := s.Bitmap(ctx)
	if bm == nil || bm.Pack().Name() != s.Packs[0].Name {
		t.Fatalf("no bitmap for %s after the build", s.Packs[0].Name)
	}
	// One stack for snapshots of the same packs (its lookups' multi-index
	// is built once).
	if again := snapshot(t, r).Bitmap(ctx); again != bm {
		t.Fatal("bitmap stack not shared between snapshots")
	}
	samePlan(t, s, bm, walk.Request{Wants: wantsOf(cmds)})
	samePlan(t, s, bm, walk.Request{Wants: wantsOf(cmds), Haves: []object.ID{g.rev("main~5")}})

	// A fresh node downloads it with the pack.
	r.Close(ctx)
	r2, err := Open(ctx, newDeps(t, st), names.MustParse("o/r"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(ctx)
	s2 := snapshot(t, r2)
	if bm2 := s2.Bitmap(ctx); bm2 == nil {
		t.Fatal("fresh node found no bitmap")
	} else {
		samePlan(t, s2, bm2, walk.Request{Wants: wantsOf(cmds), Haves: []object.ID{g.rev("side~1")}})
	}
}

// A build whose tips reach past the pack (a second push landed first)
// fails cleanly and stores nothing.
func TestBitmapBuildRejectsPartialPack(t *testing.T) {
	st := memstore.New()
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	c1 := pushFirst(t, d, r, g)
	first := snapshot(t, r).Packs[0].Name
	c2 := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), c2.String(), "^"+c1.String()), RefUpdate{Name: "refs/heads/main", Old: c1, New: c2})
	err := BuildBitmap(ctx, d, names.MustParse("o/r"), first, []object.ID{c2})
	if !errors.Is(err, bitmap.ErrIncomplete) {
		t.Fatalf("err = %v, want ErrIncomplete", err)
	}
	if _, err := st.Head(ctx, BitmapKey(names.MustParse("o/r"), first)); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("bitmap stored for a partial pack: %v", err)
	}
}

// Repack writes a bitmap for its pack; fork copies it, GC keeps it with
// its pack, delete removes it.
func TestRepackBitmapLifecycle(t *testing.T) { forEachStore(t, testRepackBitmapLifecycle) }

func testRepackBitmapLifecycle(t *testing.T, st objstore.Store) {
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	c1 := pushFirst(t, d, r, g)
	cmds := branchyHistory(g)
	cmds[0].Old = c1
	push(t, r, g.indexPack(d.Cache.TempDir(), "--all", "^"+c1.String()), cmds...)
	if bm := snapshot(t, r).Bitmap(ctx); bm != nil {
		t.Fatal("bitmap without a build")
	}
	info, err := repack(t, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := snapshot(t, r)
	bm := s.Bitmap(ctx)
	if bm == nil || bm.Pack().Name() != info.Name {
		t.Fatalf("no bitmap for the repacked pack %s", info.Name)
	}
	samePlan(t, s, bm, walk.Request{Wants: wantsOf(cmds), Haves: []object.ID{c1}})

	// GC after the grace period: the new pack keeps its bitmap.
	if _, err := gc(r, time.Now().Add(2*time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	pk, ik := PackKeys(names.MustParse("o/r"), info.Name)
	bk := BitmapKey(names.MustParse("o/r"), info.Name)
	if keys := storeKeys(t, st, packPrefix(names.MustParse("o/r"))); !slices.Equal(keys, []string{bk, ik, pk}) {
		t.Fatalf("pack objects after GC = %v", keys)
	}

	if err := Fork(ctx, d, s, names.MustParse("o/fork")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Head(ctx, BitmapKey(names.MustParse("o/fork"), info.Name)); err != nil {
		t.Fatalf("fork has no bitmap: %v", err)
	}
	if err := Delete(ctx, d, names.MustParse("o/fork")); err != nil {
		t.Fatal(err)
	}
	if keys := storeKeys(t, st, objectsPrefix(names.MustParse("o/fork"))); len(keys) != 0 {
		t.Fatalf("left after delete: %v", keys)
	}
}

// A corrupt bitmap in the store is ignored (logged, counted): fetches walk
// and see every object.
func TestCorruptBitmapIgnored(t *testing.T) {
	st := memstore.New()
	d := newDeps(t, st)
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	cmds := branchyHistory(g)
	push(t, r, g.indexPack(d.Cache.TempDir(), "--all"), cmds...)
	name := snapshot(t, r).Packs[0].Name
	if err := BuildBitmap(ctx, d, names.MustParse("o/r"), name, wantsOf(cmds)); err != nil {
		t.Fatal(err)
	}
	key := BitmapKey(names.MustParse("o/r"), name)
	rc, _, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(rc)
	rc.Close()
	data := buf.Bytes()
	data[len(data)/2] ^= 0xff
	if err := st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}

	d2 := newDeps(t, st)
	r.Close(ctx)
	r2, err := Open(ctx, d2, names.MustParse("o/r"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(ctx)
	s := snapshot(t, r2)
	if bm := s.Bitmap(ctx); bm != nil {
		t.Fatal("corrupt bitmap used")
	}
	if c := d2.Cache.Stats().Corrupt; c != 1 {
		t.Fatalf("corrupt count = %d, want 1", c)
	}
	if bm := s.Bitmap(ctx); bm != nil || d2.Cache.Stats().Corrupt != 1 {
		t.Fatal("corrupt bitmap looked at again")
	}
	checkObjects(t, s, g.catAll())
	res, err := walk.Objects(ctx, walk.NewGraph(s.Objects(), 0), walk.Request{Wants: wantsOf(cmds)})
	if err != nil || len(res.Objects) != len(g.catAll()) {
		t.Fatalf("walk after ignoring the bitmap: %d objects, %v", len(res.Objects), err)
	}
}
