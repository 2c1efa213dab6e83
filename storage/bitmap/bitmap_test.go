package bitmap

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/format"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/walk"
)

// sparseOptions store few masks, so queries exercise the fill walk to the
// nearest masked ancestor as well as whole masks.
var sparseOptions = BuildOptions{Interval: 3, Recent: -1}

// roundTrip writes x and parses it back, as a reader of the file would.
func roundTrip(t *testing.T, x *Index) *Index {
	t.Helper()
	var buf bytes.Buffer
	if _, err := x.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	y, err := Parse(buf.Bytes(), x.Pack())
	if err != nil {
		t.Fatalf("parse written index: %v", err)
	}
	return y
}

// commitRefs is every ref but the tag of a blob, which makes a request
// need the walk.
func commitRefs(r *gitRepo) []object.ID {
	bt := r.id("blobtag")
	return slices.DeleteFunc(r.refs(), func(id object.ID) bool { return id == bt })
}

func build(t *testing.T, p *pack.Pack, tips []object.ID, opts BuildOptions) *Index {
	t.Helper()
	x, err := Build(context.Background(), p, tips, opts)
	if err != nil {
		t.Fatal(err)
	}
	return roundTrip(t, x)
}

// tagRefs lists the annotated tags of r with their peeled objects.
func tagRefs(r *gitRepo) []walk.TagRef {
	var out []walk.TagRef
	for _, name := range []string{"v1", "v1b", "blobtag"} {
		out = append(out, walk.TagRef{Tag: r.id(name), Peeled: r.id(name + "^{}")})
	}
	return out
}

// same checks that the bitmap answers req with exactly the walk's
// (non-sparse) object set, and with git rev-list's when there is no filter
// or tag inclusion.
func same(t *testing.T, r *gitRepo, s *Stack, set *pack.Set, name string, req walk.Request) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Objects(ctx, walk.NewGraph(set, 0), req)
	if err != nil {
		t.Fatalf("%s: bitmap: %v (wants %v)", name, err, req.Wants)
	}
	want, err := walk.Objects(ctx, walk.NewGraph(set, 0), req)
	if err != nil {
		t.Fatalf("%s: walk: %v", name, err)
	}
	g, w := sortedIDs(got.Objects), sortedIDs(want.Objects)
	if len(g) != len(got.Objects) {
		t.Errorf("%s: bitmap result lists an object twice", name)
	}
	if !slices.Equal(g, w) {
		t.Errorf("%s: bitmap gives %d objects, walk %d", name, len(g), len(w))
	}
	if got.Commits != want.Commits {
		t.Errorf("%s: %d commits, walk %d", name, got.Commits, want.Commits)
	}
	for _, id := range want.Objects {
		if !got.Has(id) {
			t.Errorf("%s: Has(%s) = false for a sent object", name, id)
			break
		}
	}
	if req.Filter.Kind == walk.FilterNone && len(req.IncludeTags) == 0 {
		known := slices.DeleteFunc(slices.Clone(req.Haves), func(id object.ID) bool { return !set.Has(id) })
		if rl := r.revList(req.Wants, known); !slices.Equal(g, rl) {
			t.Errorf("%s: bitmap gives %d objects, git rev-list %d", name, len(g), len(rl))
		}
	}
	// Everything reachable from a have may be a thin-pack base.
	for _, h := range req.Haves {
		if set.Has(h) && !got.ClientHas(h) {
			t.Errorf("%s: ClientHas(have %s) = false", name, h)
		}
	}
}

func TestObjectsMatchWalkAndRevList(t *testing.T) {
	r := history(t)
	p := r.packs()[0]
	set := pack.NewSet(p)
	unknown := object.MustID("dead00000000000000000000000000000000beef")
	for _, opts := range []BuildOptions{sparseOptions, {}} {
		x := build(t, p, r.refs(), opts)
		wants := map[string][]object.ID{
			"all refs":              commitRefs(r),
			"main":                  {r.id("main")},
			"side":                  {r.id("side")},
			"tag":                   {r.id("v1")},
			"tag of tag and branch": {r.id("v1b"), r.id("topic")},
		}
		haves := map[string][]object.ID{
			"none":             nil,
			"main~2":           {r.id("main~2")},
			"topic":            {r.id("topic")},
			"side~1 and v1":    {r.id("side~1"), r.id("v1")},
			"a tree":           {r.id("main~1^{tree}")},
			"an older tree":    {r.id("main~2^{tree}")},
			"unknown and main": {unknown, r.id("main~1")},
		}
		filters := []walk.Filter{{}, {Kind: walk.FilterBlobNone}, {Kind: walk.FilterTreeDepth}}
		// Trees and blobs wanted (or tagged) are answered without a
		// filter; under one the walk sends them whole (TestObjectsUnsupported).
		wants["tree"] = []object.ID{r.id("main~1^{tree}")}
		wants["tag of a blob and main"] = []object.ID{r.id("blobtag"), r.id("main")}
		for wn, w := range wants {
			for hn, h := range haves {
				for _, f := range filters {
					if (wn == "tree" || wn == "tag of a blob and main") && f.Kind != walk.FilterNone {
						continue
					}
					for _, tags := range [][]walk.TagRef{nil, tagRefs(r)} {
						name := wn + "/" + hn + "/" + f.String()
						if tags != nil {
							name += "/include-tag"
						}
						same(t, r, Single(x), set, name, walk.Request{Wants: w, Haves: h, Filter: f, IncludeTags: tags})
					}
				}
			}
		}
	}
}

// TestObjectsBeyondPack: commits pushed after the bitmap was built live in
// a newer pack; the query walks from them down to the masked history.
func TestObjectsBeyondPack(t *testing.T) {
	r := history(t)
	old := r.packs()[0]
	x := build(t, old, r.refs(), sparseOptions)
	oldMain := r.id("main")
	r.commit("n0")
	r.git("tag", "-a", "-m", "v2", "v2")
	r.commit("n1")
	r.git("repack", "-dq") // the new objects only, in a second pack
	ps := r.packs()
	if len(ps) != 2 {
		t.Fatalf("%d packs, want 2", len(ps))
	}
	set := pack.NewSet(ps...)
	same(t, r, Single(x), set, "clone", walk.Request{Wants: commitRefs(r)})
	same(t, r, Single(x), set, "fetch", walk.Request{Wants: []object.ID{r.id("main")}, Haves: []object.ID{oldMain}})
	same(t, r, Single(x), set, "fetch new tag", walk.Request{Wants: []object.ID{r.id("v2")}, Haves: []object.ID{oldMain},
		IncludeTags: []walk.TagRef{{Tag: r.id("v2"), Peeled: r.id("v2^{}")}}})
	// The newer pack alone is not a whole repository.
	newer := ps[0]
	if newer.Checksum() == old.Checksum() {
		newer = ps[1]
	}
	if _, err := Build(context.Background(), newer, []object.ID{r.id("main")}, BuildOptions{}); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("build over a partial pack: err = %v, want ErrIncomplete", err)
	}
}

func TestObjectsUnsupported(t *testing.T) {
	r := history(t)
	p := r.packs()[0]
	x := build(t, p, r.refs(), BuildOptions{})
	g := walk.NewGraph(pack.NewSet(p), 0)
	main := []object.ID{r.id("main")}
	for name, req := range map[string]walk.Request{
		"depth":                 {Wants: main, Depth: 1},
		"deepen-since":          {Wants: main, DeepenSince: 1},
		"deepen-not":            {Wants: main, DeepenNot: []object.ID{r.id("main~2")}},
		"shallow":               {Wants: main, ClientShallow: []object.ID{r.id("main~2")}},
		"blob:limit":            {Wants: main, Filter: walk.Filter{Kind: walk.FilterBlobLimit, BlobLimit: 10}},
		"tree:1":                {Wants: main, Filter: walk.Filter{Kind: walk.FilterTreeDepth, TreeDepth: 1}},
		"tree want, blob:none":  {Wants: []object.ID{r.id("main^{tree}")}, Filter: walk.Filter{Kind: walk.FilterBlobNone}},
		"tag of a blob, tree:0": {Wants: []object.ID{r.id("blobtag")}, Filter: walk.Filter{Kind: walk.FilterTreeDepth}},
	} {
		if _, err := Single(x).Objects(context.Background(), g, req); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", name, err)
		}
	}
}

func TestParseRejectsBadFiles(t *testing.T) {
	r := history(t)
	p := r.packs()[0]
	x, err := Build(context.Background(), p, r.refs(), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := x.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		bad := slices.Clone(good)
		bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
		if _, err := Parse(bad, p); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipped byte: err = %v, want ErrCorrupt", err)
		}
	}
	for n := range len(good) {
		if _, err := Parse(good[:n], p); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: err = %v, want ErrCorrupt", n, err)
		}
	}
	// An intact file for another pack.
	other := history(t)
	other.commit("different")
	other.git("repack", "-adq")
	if _, err := Parse(good, other.packs()[0]); !errors.Is(err, ErrMismatch) {
		t.Fatalf("other pack: err = %v, want ErrMismatch", err)
	}
	// Files on disk: a written one opens, a missing one is an error.
	path := filepath.Join(t.TempDir(), "pack-x.bitmap")
	if err := x.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if y, err := Open(path, p); err != nil || y.Len() != x.Len() {
		t.Fatalf("Open = %v, %v", y, err)
	}
	if _, err := Open(path+".missing", p); err == nil {
		t.Fatal("Open of a missing file succeeded")
	}
}

// Structurally valid but hostile files (the checksum recomputed) must be
// refused without panicking: bad bases, masks past the pack.
func TestParseHostile(t *testing.T) {
	r := history(t)
	p := r.packs()[0]
	x, err := Build(context.Background(), p, r.refs(), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reseal := func(y *Index) []byte {
		var buf bytes.Buffer
		y.WriteTo(&buf)
		return buf.Bytes()
	}
	cyc := *x
	cyc.list = slices.Clone(x.list)
	cyc.list[0].base = len(cyc.list) - 1
	if _, err := Parse(reseal(&cyc), p); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("forward base: err = %v, want ErrCorrupt", err)
	}
	past := *x
	past.list = slices.Clone(x.list)
	full := newBitset(x.count + 64)
	for i := range full {
		full[i] = ^uint64(0)
	}
	past.list[0] = entry{id: x.list[0].id, base: -1, mask: encode(nil, full)}
	y, err := Parse(reseal(&past), p)
	if err != nil {
		t.Fatal(err) // structure is fine; the mask fails when decoded
	}
	g := walk.NewGraph(pack.NewSet(p), 0)
	if _, err := Single(y).Objects(context.Background(), g, walk.Request{Wants: []object.ID{y.list[0].id}}); err == nil || errors.Is(err, ErrUnsupported) {
		t.Fatalf("mask past the pack: err = %v, want a decode error", err)
	}
}

func TestEncodeDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for n := range 300 {
		b := newBitset(n * 37)
		for i := range b {
			switch rng.IntN(4) {
			case 0:
			case 1:
				b[i] = ^uint64(0)
			default:
				b[i] = rng.Uint64()
			}
		}
		got, err := decode(encode(nil, b), len(b))
		if err != nil || !slices.Equal(got, b) {
			t.Fatalf("round trip of %d words failed: %v", len(b), err)
		}
		if _, err := decode(encode(nil, b), len(b)+1); len(b) > 0 && err == nil {
			t.Fatal("decode accepted a mask of the wrong length")
		}
	}
}

// One Index serves concurrent queries (run with -race).
func TestObjectsConcurrent(t *testing.T) {
	r := history(t)
	p := r.packs()[0]
	x := build(t, p, r.refs(), sparseOptions)
	set := pack.NewSet(p)
	req := walk.Request{Wants: []object.ID{r.id("main")}, Haves: []object.ID{r.id("main~3")}}
	want := r.revList(req.Wants, req.Haves)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			res, err := Single(x).Objects(context.Background(), walk.NewGraph(set, 0), req)
			if err == nil && !slices.Equal(sortedIDs(res.Objects), want) {
				err = errors.New("concurrent query gave a different object set")
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// asV1 reseals a version 2 file as version 1 (SHA-1 trailer), as files
// written before version 2 are.
func asV1(v2 []byte) []byte {
	body := slices.Clone(v2[:len(v2)-crcLen])
	binary.BigEndian.PutUint32(body[4:], versionV1)
	sum := sha1.Sum(body)
	return append(body, sum[:]...)
}

// Both versions are read, and in both any damaged byte is found when the
// file is parsed, before a query could trust a mask: every position of the
// file, flipped, must fail Parse.
func TestParseVersionsDetectEveryFlip(t *testing.T) {
	r := history(t)
	p := r.packs()[0]
	x := build(t, p, r.refs(), BuildOptions{})
	var buf bytes.Buffer
	if _, err := x.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	v2 := buf.Bytes()
	if v := binary.BigEndian.Uint32(v2[4:]); v != version {
		t.Fatalf("written version %d, want %d", v, version)
	}
	// A version this build does not read is refused by name (the caller
	// walks), whatever its checksum.
	newer := slices.Clone(v2)
	binary.BigEndian.PutUint32(newer[4:], format.Bitmap.Newest+1)
	if _, err := Parse(newer, p); !errors.Is(err, format.ErrUnsupported) || !strings.Contains(err.Error(), fmt.Sprintf("bitmap index version %d ", format.Bitmap.Newest+1)) {
		t.Fatalf("newer version: err = %v, want a refusal naming it", err)
	}
	for name, good := range map[string][]byte{"v2": v2, "v1": asV1(v2)} {
		y, err := Parse(good, p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if y.Len() != x.Len() || !slices.Equal(y.types[0], x.types[0]) {
			t.Fatalf("%s: parsed index differs from the written one", name)
		}
		for i := range good {
			bad := slices.Clone(good)
			bad[i] ^= 0x10
			if _, err := Parse(bad, p); !errors.Is(err, ErrCorrupt) && !(versionByte(i) && errors.Is(err, format.ErrUnsupported)) {
				t.Fatalf("%s: byte %d of %d flipped: err = %v, want ErrCorrupt (or a refused version)", name, i, len(good), err)
			}
		}
	}
}

// BenchmarkOpen measures what every process opening a pack pays for its
// bitmap, in either version. RGIT_BENCH_PACK names a real pack (its .idx
// next to it) and RGIT_BENCH_BITMAP an rgit bitmap file for it.
func BenchmarkOpen(b *testing.B) {
	path := os.Getenv("RGIT_BENCH_PACK")
	if path == "" {
		b.Skip("RGIT_BENCH_PACK not set")
	}
	p, err := pack.Open(path, strings.TrimSuffix(path, ".pack")+".idx")
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	x, err := Open(os.Getenv("RGIT_BENCH_BITMAP"), p)
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := x.WriteTo(&buf); err != nil {
		b.Fatal(err)
	}
	for name, data := range map[string][]byte{"v2": buf.Bytes(), "v1": asV1(buf.Bytes())} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Parse(data, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A build keeps one encoding per mask, at its exact size: the spare
// capacity append leaves was half the memory of a build on a big history.
func TestBuildKeepsMasksExact(t *testing.T) {
	r := history(t)
	x, err := Build(context.Background(), r.packs()[0], r.refs(), BuildOptions{Interval: 1})
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() < 10 {
		t.Fatalf("%d masks, want enough to fill the XOR window", x.Len())
	}
	for i, e := range x.list {
		if cap(e.mask) != len(e.mask) {
			t.Errorf("mask %d: %d bytes with capacity %d", i, len(e.mask), cap(e.mask))
		}
	}
}

// WriteTo streams: it allocates a small buffer, not a copy of the masks.
func TestWriteToStreams(t *testing.T) {
	r := history(t)
	x := build(t, r.packs()[0], r.refs(), BuildOptions{})
	mask := make([]byte, 64<<10)
	for i := range 64 { // 4 MB of masks
		x.list = append(x.list, entry{id: object.ID{byte(i), 1}, base: -1, mask: mask})
	}
	var want bytes.Buffer
	if _, err := x.WriteTo(&want); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n, err := x.WriteTo(io.Discard)
	runtime.ReadMemStats(&after)
	if err != nil || n != int64(want.Len()) {
		t.Fatalf("WriteTo = %d, %v; want %d bytes", n, err, want.Len())
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("WriteTo of %d bytes allocated %d bytes", n, got)
	}
	// The streamed file is the one a reader accepts, checksum included.
	x.list = x.list[:len(x.list)-64]
	roundTrip(t, x)
	// A failing writer is reported.
	if _, err := x.WriteTo(failWriter{}); err == nil {
		t.Error("WriteTo to a failing writer succeeded")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// versionByte reports whether byte i of a file is in its version field
// (a flip there is refused as an unknown version).
func versionByte(i int) bool { return i >= len(magic) && i < len(magic)+4 }
