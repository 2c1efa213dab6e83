package pack

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// writeAndCheck writes objs from set, has git index the result (--strict,
// borrowing objects from alt if set) and checks it holds exactly objs.
func writeAndCheck(t *testing.T, set *Set, objs []object.ID, opts WriteOptions, alt string) (WriteStats, []byte) {
	t.Helper()
	var buf bytes.Buffer
	st, err := set.WritePack(context.Background(), &buf, objs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Bytes != int64(buf.Len()) {
		t.Fatalf("stats say %d bytes, wrote %d", st.Bytes, buf.Len())
	}
	idx, err := ParseIndex(gitIndexPack(t, buf.Bytes(), alt, "--strict"))
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(objs)
	slices.SortFunc(want, func(a, b object.ID) int { return bytes.Compare(a[:], b[:]) })
	want = slices.Compact(want)
	var got []object.ID
	for i := 0; i < idx.Count(); i++ {
		got = append(got, idx.ID(i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pack holds %d objects, want %d", len(got), len(want))
	}
	return st, buf.Bytes()
}

func TestWritePackFullIsVerbatim(t *testing.T) {
	fx := sharedFixture(t)
	p := openFixture(t, fx)
	all := revListObjects(t, fx.dir, "--all")
	st, out := writeAndCheck(t, NewSet(p), all, WriteOptions{OfsDelta: true}, "")
	if !st.Verbatim {
		t.Fatalf("full pack not streamed verbatim: %+v", st)
	}
	if orig, _ := os.ReadFile(fx.packPath); !bytes.Equal(out, orig) {
		t.Fatal("verbatim output differs from the stored pack")
	}
}

func TestWritePackSubsets(t *testing.T) {
	fx := sharedFixture(t)
	p := openFixture(t, fx)
	set := NewSet(p)
	old := revListObjects(t, fx.dir, "old")
	for _, ofs := range []bool{true, false} {
		st, _ := writeAndCheck(t, set, old, WriteOptions{OfsDelta: ofs}, "")
		if st.Verbatim || st.ReusedDeltas == 0 || st.Reused == 0 {
			t.Fatalf("ofs=%v: expected verbatim reuse of whole objects and deltas: %+v", ofs, st)
		}
	}
	// Objects new since "old": some deltas have bases that are not sent.
	newer := revListObjects(t, fx.dir, "main", "^old")
	alt := filepath.Join(fx.dir, ".git")
	st, _ := writeAndCheck(t, set, newer, WriteOptions{OfsDelta: true}, alt)
	if st.Deflated == 0 {
		t.Fatalf("expected resolved+deflated objects: %+v", st)
	}
	// Thin: the client has everything reachable from old.
	have := make(map[object.ID]bool)
	for _, id := range old {
		have[id] = true
	}
	var buf bytes.Buffer
	st, err := set.WritePack(context.Background(), &buf, newer, WriteOptions{OfsDelta: true, Thin: true, ClientHas: func(id object.ID) bool { return have[id] }})
	if err != nil {
		t.Fatal(err)
	}
	if st.ThinDeltas == 0 || st.Deflated >= len(newer)/2 {
		t.Fatalf("thin pack did not use client bases: %+v", st)
	}
	res, err := IndexPack(context.Background(), &buf, t.TempDir(), IndexOptions{Base: set})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != len(newer)+res.ThinFixed || res.ThinFixed == 0 {
		t.Fatalf("thin pack indexed to %d objects (+%d bases), want %d", len(res.Objects), res.ThinFixed, len(newer))
	}
}

// A set of two overlapping packs, one of them a completed thin pack whose
// REF_DELTA bases sit after their deltas.
func TestWritePackMultiPack(t *testing.T) {
	fx := sharedFixture(t)
	p := openFixture(t, fx)
	thin := git(t, fx.dir, []byte("main\n^old\n"), "pack-objects", "--stdout", "-q", "--revs", "--thin")
	res, err := IndexPack(context.Background(), bytes.NewReader(thin), t.TempDir(), IndexOptions{Base: NewSet(p)})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Open(res.PackPath, res.IdxPath)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	all := revListObjects(t, fx.dir, "--all")
	for _, ofs := range []bool{true, false} {
		st, _ := writeAndCheck(t, NewSet(p2, p), all, WriteOptions{OfsDelta: ofs}, "")
		if st.Verbatim || st.Objects != len(all) {
			t.Fatalf("%+v", st)
		}
	}
}

func TestWritePackMissingObject(t *testing.T) {
	fx := sharedFixture(t)
	p := openFixture(t, fx)
	_, err := NewSet(p).WritePack(context.Background(), &bytes.Buffer{}, []object.ID{{1, 2, 3}}, WriteOptions{})
	if !isErr(err, object.ErrNotFound) {
		t.Fatalf("got %v", err)
	}
}

// A stored entry whose bytes do not match the index CRC must not be sent.
func TestWritePackDetectsCorruptEntry(t *testing.T) {
	fx := sharedFixture(t)
	dir := t.TempDir()
	data, _ := os.ReadFile(fx.packPath)
	p := openFixture(t, fx)
	// Pick the largest whole object and flip a byte in its compressed data.
	var target object.ID
	var best int64
	for i := 0; i < p.Index().Count(); i++ {
		if t, s, _ := p.ReadHeader(p.Index().ID(i)); t == object.Blob && s > best {
			h, _ := p.entryHeader(p.Index().Offset(i))
			if h.typ == object.Blob {
				best, target = s, p.Index().ID(i)
			}
		}
	}
	off, _ := p.Index().Lookup(target)
	data[off+40] ^= 0x55
	pp := filepath.Join(dir, "c.pack")
	os.WriteFile(pp, data, 0o644)
	cp, err := Open(pp, fx.idxPath)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	_, err = NewSet(cp).WritePack(context.Background(), &bytes.Buffer{}, []object.ID{target}, WriteOptions{})
	if !isErr(err, ErrChecksum) {
		t.Fatalf("got %v, want ErrChecksum", err)
	}
}
