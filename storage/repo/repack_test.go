package repo

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/pack"
)

// TestFullRollUpFreshDeltas: pushes of one commit each store every new
// blob version whole (its previous version is in another pack), so a
// roll-up reusing stored deltas keeps them whole; the full roll-up's fresh
// delta search finds the deltas between versions. Its pack is valid (git
// index-pack --strict and fsck on a clone, every object reads back as git
// has it), has a bitmap and is smaller. A push between its build and its
// switch does not make the switch fail.
func TestFullRollUpFreshDeltas(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	want := pushes(t, d, r, g, 30)
	s := snapshot(t, r)

	stored, err := BuildRollUp(ctx, d, s, PlanGeometric(s.Packs, 1<<20), nil)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := BuildFullRollUp(ctx, d, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("30 pushes: stored deltas %d bytes, fresh deltas %d bytes", stored.Pack.Size, fresh.Pack.Size)
	if stored.Pack.Objects != len(want) || fresh.Pack.Objects != len(want) {
		t.Fatalf("roll-ups have %d and %d objects, git has %d", stored.Pack.Objects, fresh.Pack.Objects, len(want))
	}
	if fresh.Pack.Size*2 > stored.Pack.Size {
		t.Fatalf("fresh roll-up is %d bytes, stored-delta roll-up %d; want under half", fresh.Pack.Size, stored.Pack.Size)
	}
	prev := g.rev("HEAD")
	c := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), c.String(), "^"+prev.String()), RefUpdate{Name: "refs/heads/main", Old: prev, New: c})
	want = g.catAll()
	info, err := r.CommitRepack(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, r)
	if len(after.Packs) != 2 || (after.Packs[0].Name != info.Name && after.Packs[1].Name != info.Name) {
		t.Fatalf("packs after the roll-up = %+v, want it and the last push's", after.Packs)
	}
	checkObjects(t, after, want)
	if after.Bitmap(ctx) == nil {
		t.Fatal("no bitmap for the fresh roll-up")
	}
	// A clone's pack.
	ids := make([]object.ID, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	var buf bytes.Buffer
	_, err = after.Objects().WritePack(ctx, &buf, ids, pack.WriteOptions{OfsDelta: true})
	if err != nil {
		t.Fatal(err)
	}
	clone := newGitRepo(t)
	clone.run(buf.Bytes(), "index-pack", "--stdin", "--strict")
	clone.run(nil, "update-ref", "refs/heads/main", g.rev("HEAD").String())
	clone.run(nil, "fsck", "--strict", "--no-dangling")
}

// TestPathHashes: every tree and blob gets the hash of a path it is
// reachable under.
func TestPathHashes(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	pushes(t, d, r, g, 2)
	s := snapshot(t, r)
	res, err := reachable(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pathHashes(ctx, s.Objects(), res)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(g.run(nil, "rev-list", "--objects", "--all")), []byte("\n")) {
		f := bytes.SplitN(line, []byte(" "), 2)
		if len(f) < 2 {
			continue // a commit or the root tree
		}
		id := object.MustID(string(f[0]))
		if got, want := names(id), pack.NameHash(string(f[1])); got != want {
			t.Errorf("%s (%s): hash %08x, want %08x", id, f[1], got, want)
		}
	}
}

// TestFailedRepackLeavesCache: a repack whose switch fails (a push moved
// a ref during the build) leaves the node's pack cache, where it would
// otherwise hold a descriptor and memory until the byte budget evicts it;
// the repository is untouched.
func TestFailedRepackLeavesCache(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	pushes(t, d, r, g, 3)
	b, err := BuildRepack(ctx, d, snapshot(t, r), nil)
	if err != nil || b == nil {
		t.Fatalf("build: %v, %v", b, err)
	}
	prev := g.rev("HEAD")
	c := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), c.String(), "^"+prev.String()), RefUpdate{Name: "refs/heads/main", Old: prev, New: c})
	cached := d.Cache.Stats().Packs
	if _, err := r.CommitRepack(ctx, b); !errors.Is(err, ErrConcurrentUpdate) {
		t.Fatalf("commit after a push: %v, want ErrConcurrentUpdate", err)
	}
	if got := d.Cache.Stats().Packs; got != cached-1 {
		t.Fatalf("cache holds %d packs after the failed switch, want %d", got, cached-1)
	}
	s := snapshot(t, r)
	if len(s.Packs) != 4 {
		t.Fatalf("packs after the failed switch = %+v, want the 4 pushes'", s.Packs)
	}
	checkObjects(t, s, g.catAll())
}

// TestFullRollUpPastBudgetReusesDeltas: a delta search that outlasts its
// budget does not fail the full roll-up; it is written with the stored
// deltas instead, complete and with a bitmap.
func TestFullRollUpPastBudgetReusesDeltas(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("o/r"))
	g := newGitRepo(t)
	want := pushes(t, d, r, g, 5)
	s := snapshot(t, r)
	stored, err := BuildRollUp(ctx, d, s, PlanGeometric(s.Packs, 1<<20), nil)
	if err != nil {
		t.Fatal(err)
	}
	d.FreshDeltaBudget = time.Nanosecond
	b, err := BuildFullRollUp(ctx, d, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Pack.Name != stored.Pack.Name {
		t.Fatalf("full roll-up past its budget wrote %s (%d bytes), want the stored-delta roll-up %s (%d bytes)",
			b.Pack.Name, b.Pack.Size, stored.Pack.Name, stored.Pack.Size)
	}
	if _, err := r.CommitRepack(ctx, b); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, r)
	checkObjects(t, after, want)
	if after.Bitmap(ctx) == nil {
		t.Fatal("no bitmap for the roll-up")
	}
}
