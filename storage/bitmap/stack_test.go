package bitmap

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/rgit/rgit/storage/format"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
)

// newPack returns the one pack of r that is not in known.
func newPack(t *testing.T, r *gitRepo, known []*pack.Pack) *pack.Pack {
	t.Helper()
	var fresh []*pack.Pack
	for _, p := range r.packs() {
		if !slices.ContainsFunc(known, func(k *pack.Pack) bool { return k.Checksum() == p.Checksum() }) {
			fresh = append(fresh, p)
		}
	}
	if len(fresh) != 1 {
		t.Fatalf("%d new packs, want 1", len(fresh))
	}
	return fresh[0]
}

// layered builds the standard history in one bitmapped pack, then three
// rounds of commits (a branch merged back, a tag) each in a pack of its
// own: the first two get a layer over the packs before them, the newest
// gets none (pushed since the last roll-up).
func layered(t *testing.T) (*gitRepo, []*pack.Pack, []*Index) {
	r := history(t)
	packs := []*pack.Pack{r.packs()[0]}
	xs := []*Index{build(t, packs[0], r.refs(), sparseOptions)}
	for round := range 3 {
		n := strconv.Itoa(round)
		r.commit("l" + n + "a")
		r.git("checkout", "-q", "-b", "b"+n, "main~1")
		r.commit("b" + n)
		r.git("checkout", "-q", "main")
		r.git("merge", "-q", "--no-ff", "-m", "merge b"+n, "b"+n)
		r.commit("l" + n + "c")
		r.git("tag", "-a", "-m", "t"+n, "t"+n)
		if round == 1 {
			// A pack that repeats objects of the packs below it, as the
			// bases a completed thin push carries do: positions go to
			// the lowest pack holding an object.
			list := r.g.Output(nil, "rev-list", "--objects", "--no-object-names", "main", "t1", "--not", "main~6")
			r.g.Output(list, "pack-objects", "-q", ".git/objects/pack/pack")
			r.git("prune-packed")
		} else {
			r.git("repack", "-dq")
		}
		p := newPack(t, r, packs)
		var x *Index
		if round < 2 {
			y, err := BuildLayer(context.Background(), packs, xs, p, r.refs(), sparseOptions)
			if err != nil {
				t.Fatalf("layer %d: %v", round, err)
			}
			x = roundTrip(t, y)
		}
		packs, xs = append(packs, p), append(xs, x)
	}
	return r, packs, xs
}

// TestLayersMatchWalk: queries over a stack of layers, with the newest
// pack outside it, give exactly the walk's objects, for haves and wants in
// every layer.
func TestLayersMatchWalk(t *testing.T) {
	r, packs, xs := layered(t)
	// Order does not matter to Choose; the newest has no bitmap.
	shuffled := []int{3, 1, 0, 2}
	sp, sx := make([]*pack.Pack, 4), make([]*Index, 4)
	for k, i := range shuffled {
		sp[k], sx[k] = packs[i], xs[i]
	}
	s := Choose(sp, sx)
	if s == nil || s.Pack() != packs[2] || len(s.Packs()) != 3 || slices.Contains(s.Layers(), nil) {
		t.Fatalf("Choose = %v, want the three bitmapped packs with their layers", s)
	}
	dups := 0
	for i := range packs[2].Index().Count() {
		if packs[0].Has(packs[2].Index().ID(i)) || packs[1].Has(packs[2].Index().ID(i)) {
			dups++
		}
	}
	if dups == 0 {
		t.Fatal("pack 2 repeats no object of the packs below")
	}
	set := pack.NewSet(packs...)
	revs := []string{"main", "main~1", "main~3", "main~5", "main~8", "main~12", "b0", "b1", "b2", "side", "topic", "t0", "t1", "t2", "v1"}
	for _, w := range [][]object.ID{commitRefs(r), {r.id("main")}, {r.id("t2"), r.id("side")}} {
		for _, h := range revs {
			for _, f := range []walk.Filter{{}, {Kind: walk.FilterBlobNone}} {
				req := walk.Request{Wants: w, Haves: []object.ID{r.id(h)}, Filter: f}
				same(t, r, s, set, "have "+h+"/"+f.String(), req)
			}
		}
		same(t, r, s, set, "clone", walk.Request{Wants: w})
	}
	same(t, r, s, set, "include-tag", walk.Request{Wants: []object.ID{r.id("main")}, Haves: []object.ID{r.id("main~8")},
		IncludeTags: []walk.TagRef{{Tag: r.id("t2"), Peeled: r.id("t2^{}")}, {Tag: r.id("t0"), Peeled: r.id("t0^{}")}}})
	// The layer stores masks for its own commits only.
	for id := range xs[1].entries {
		if _, ok := packs[1].Index().Find(id); !ok {
			t.Errorf("layer 1 has a mask for %s, not one of its pack's objects", id)
		}
	}
}

// TestChooseSkipsBrokenLayers: a layer whose base is gone is not chosen,
// and one whose bases are in another order keeps its positions out of the
// stack.
func TestChooseSkipsBrokenLayers(t *testing.T) {
	_, packs, xs := layered(t)
	// Pack 1 retired (rolled up elsewhere): layer 2 names it as a base.
	s := Choose([]*pack.Pack{packs[0], packs[2], packs[3]}, []*Index{xs[0], xs[2], nil})
	if s == nil || s.Pack() != packs[0] || len(s.Packs()) != 1 {
		t.Fatalf("Choose without pack 1 = %v, want pack 0's bitmap alone", s)
	}
	// A stack in another order than layer 1 was built over keeps layer 0
	// (its bases, none, still fit) and drops layer 1.
	s = NewStack([]*pack.Pack{packs[0], packs[2], packs[1]}, []*Index{xs[0], xs[2], xs[1]})
	if got := s.Layers(); got[0] == nil || got[1] != nil || got[2] != nil {
		t.Fatalf("layers in the wrong order: %v, want only the first", got)
	}
	if !s.HasBitmap(packs[0].Name()) || s.HasBitmap(packs[1].Name()) {
		t.Fatal("HasBitmap disagrees with the layers kept")
	}
	if NewStack([]*pack.Pack{packs[2]}, []*Index{xs[2]}) != nil {
		t.Fatal("a layer without its bases makes a stack")
	}
}

// TestLayerOverUnbitmappedPacks: a layer over packs without bitmaps walks
// them while it is built, and answers queries exactly.
func TestLayerOverUnbitmappedPacks(t *testing.T) {
	r, packs, _ := layered(t)
	below := packs[:3]
	x, err := BuildLayer(context.Background(), below, make([]*Index, 3), packs[3], r.refs(), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x = roundTrip(t, x)
	s := Choose(packs, []*Index{nil, nil, nil, x})
	if s == nil || s.Pack() != packs[3] {
		t.Fatalf("Choose = %v, want the layer", s)
	}
	set := pack.NewSet(packs...)
	same(t, r, s, set, "clone", walk.Request{Wants: commitRefs(r)})
	same(t, r, s, set, "fetch", walk.Request{Wants: []object.ID{r.id("main")}, Haves: []object.ID{r.id("main~4")}})
	// A layer over packs that lack what its commits reach is refused.
	if _, err := BuildLayer(context.Background(), packs[1:3], make([]*Index, 2), packs[3], nil, BuildOptions{}); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("layer over part of the history: err = %v, want ErrIncomplete", err)
	}
}

// TestParseLayer: a layer file round-trips, and any damage, or a file laid
// over other packs, is refused.
func TestParseLayer(t *testing.T) {
	_, packs, xs := layered(t)
	var buf bytes.Buffer
	if _, err := xs[2].WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	y, err := Parse(good, packs[2])
	if err != nil || len(y.bases) != 2 || y.span != xs[2].span || y.Len() != xs[2].Len() {
		t.Fatalf("Parse = %+v, %v", y, err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		bad, i := slices.Clone(good), rng.IntN(len(good))
		bad[i] ^= byte(1 + rng.IntN(255))
		if _, err := Parse(bad, packs[2]); !errors.Is(err, ErrCorrupt) && !(versionByte(i) && errors.Is(err, format.ErrUnsupported)) {
			t.Fatalf("flipped byte: err = %v, want ErrCorrupt", err)
		}
	}
	if _, err := Parse(good, packs[1]); !errors.Is(err, ErrMismatch) {
		t.Fatalf("other pack: err = %v, want ErrMismatch", err)
	}
	// Resealed with no bases, or too many, the list is refused.
	for _, n := range []int{0, maxBases + 1} {
		z := *xs[2]
		z.bases = make([]packRef, n)
		var b bytes.Buffer
		z.WriteTo(&b)
		data := b.Bytes()
		if n == 0 {
			// WriteTo writes version 2 for no bases; claim a layer.
			data[7] = versionLayer
			data = resealCRC(data)
		}
		if _, err := Parse(data, packs[2]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d bases: err = %v, want ErrCorrupt", n, err)
		}
	}
}

// resealCRC recomputes the trailing checksum of a modified file.
func resealCRC(data []byte) []byte {
	body := data[:len(data)-crcLen]
	return binary.BigEndian.AppendUint32(slices.Clone(body), crc32.Checksum(body, castagnoli))
}
