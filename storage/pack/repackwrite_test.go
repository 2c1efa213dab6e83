package pack

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/gitrun"
)

func TestLimitChains(t *testing.T) {
	whole := func() rcopy { return rcopy{base: -1, depth: depthUnknown, whole: witem{off: 12}} }
	delta := func(base int32, hasWhole bool) rcopy {
		c := rcopy{base: base, depth: depthUnknown, h: entryHeader{typ: object.RefDelta}}
		if hasWhole {
			c.whole = witem{off: 12}
		}
		return c
	}
	for _, r := range []struct {
		name  string
		cs    []rcopy
		depth int
		want  []int16 // depth of each entry afterwards
		bases []int32
	}{
		{"chain", []rcopy{whole(), delta(0, false), delta(1, false)}, 50, []int16{0, 1, 2}, []int32{-1, 0, 1}},
		{"too deep", []rcopy{whole(), delta(0, false), delta(1, true), delta(2, false)}, 1, []int16{0, 1, 0, 1}, []int32{-1, 0, -1, 2}},
		{"cycle", []rcopy{delta(1, true), delta(0, true)}, 50, []int16{0, 1}, []int32{-1, 0}},
		{"cycle reached from outside", []rcopy{delta(1, false), delta(2, true), delta(1, true)}, 50, []int16{1, 0, 1}, []int32{1, -1, 1}},
	} {
		limitChains(r.cs, r.depth)
		for i, c := range r.cs {
			if c.depth != r.want[i] || c.base != r.bases[i] {
				t.Errorf("%s: entry %d depth %d base %d, want %d %d", r.name, i, c.depth, c.base, r.want[i], r.bases[i])
			}
		}
	}
}

// TestWriteRepackPrefersDeltas: across a pack of a first push and a
// completed thin pack (the new blob as a delta plus a whole copy of its
// base, as IndexPack completes a pushed thin pack), WriteRepack writes the
// base once and the new blob as a delta, in either set order (WritePack
// takes the first copy found, the whole duplicate when the thin pack comes
// first); and packs that store a pair in opposite directions do not give
// a delta cycle. git index-pack --strict accepts both outputs.
func TestWriteRepackPrefersDeltas(t *testing.T) {
	v1 := []byte(strings.Repeat("line of the first version\n", 40))
	v2 := append(bytes.Clone(v1), "and one more line\n"...)
	id1, id2 := object.Hash(object.Blob, v1), object.Hash(object.Blob, v2)
	dir := t.TempDir()
	open := func(entries ...tEntry) *Pack {
		ix, err := IndexPack(context.Background(), bytes.NewReader(buildPack(entries...)), dir, IndexOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := Open(ix.PackPath, ix.IdxPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	first := open(whole(object.Blob, string(v1)))
	thin := open(whole(object.Blob, string(v1)), refD(id1, makeDelta(v1, v2)))
	reversed := open(whole(object.Blob, string(v2)), refD(id2, makeDelta(v2, v1)))
	for _, c := range []struct {
		name   string
		packs  []*Pack
		deltas int
	}{
		{"thin pack completed", []*Pack{first, thin}, 1},
		{"thin pack first", []*Pack{thin, first}, 1},
		{"opposite deltas", []*Pack{thin, reversed}, 1},
	} {
		var buf bytes.Buffer
		st, err := NewSet(c.packs...).WriteRepack(context.Background(), &buf, []object.ID{id2, id1, id2}, 0, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if st.Objects != 2 || st.ReusedDeltas != c.deltas || st.Deflated != 0 {
			t.Fatalf("%s: stats %+v, want 2 objects, %d reused delta", c.name, st, c.deltas)
		}
		repo := gitrun.Scratch(t, gitrun.Env{}).Dir
		git(t, repo, buf.Bytes(), "index-pack", "--stdin", "--strict")
		for id, want := range map[object.ID][]byte{id1: v1, id2: v2} {
			if got := git(t, repo, nil, "cat-file", "blob", id.String()); !bytes.Equal(got, want) {
				t.Fatalf("%s: %s reads back %d bytes, want %d", c.name, id, len(got), len(want))
			}
		}
	}
}
