package repo

import (
	"bytes"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/pack"
)

// TestRepackFreshDeltas: pushes of one commit each store every new blob
// version whole (its previous version is in another pack), so a repack
// reusing stored deltas keeps them whole; the fresh delta search finds the
// deltas between versions. Its pack is valid (git index-pack --strict, every
// object reads back as git has it), has a bitmap and is smaller.
func TestRepackFreshDeltas(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, "o", "r")
	g := newGitRepo(t)
	want := pushes(t, d, r, g, 30)
	s := snapshot(t, r)

	stored, err := BuildRepack(ctx, d, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := BuildRepackFresh(ctx, d, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("30 pushes: stored deltas %d bytes, fresh deltas %d bytes", stored.Pack.Size, fresh.Pack.Size)
	if fresh.Pack.Objects != len(want) {
		t.Fatalf("fresh repack has %d objects, git has %d", fresh.Pack.Objects, len(want))
	}
	if fresh.Pack.Size*2 > stored.Pack.Size {
		t.Fatalf("fresh repack is %d bytes, stored-delta repack %d; want under half", fresh.Pack.Size, stored.Pack.Size)
	}
	info, err := r.CommitRepack(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, r)
	if len(after.Packs) != 1 || after.Packs[0].Name != info.Name {
		t.Fatalf("packs after the repack = %+v", after.Packs)
	}
	checkObjects(t, after, want)
	if after.Bitmap(ctx) == nil {
		t.Fatal("no bitmap for the freshly repacked pack")
	}
	// The new pack file itself, as a client gets it in a clone.
	ids := make([]object.ID, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	var buf bytes.Buffer
	st, err := after.Objects().WritePack(ctx, &buf, ids, pack.WriteOptions{OfsDelta: true})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Verbatim {
		t.Fatalf("clone of the repacked repository was not the stored pack: %+v", st)
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
	r := create(t, d, "o", "r")
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
