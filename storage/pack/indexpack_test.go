package pack

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// gitIndexPack runs `git index-pack` on a copy of pack and returns its idx.
// If alt is set, it is the .git dir of a repository whose objects the
// checking repository borrows, so that --strict connectivity checks of a
// partial pack pass.
func gitIndexPack(t *testing.T, pack []byte, alt string, extra ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, nil, "init", "-q", "--bare") // --strict needs a repository
	if alt != "" {
		os.WriteFile(filepath.Join(dir, "objects/info/alternates"), []byte(filepath.Join(alt, "objects")+"\n"), 0o644)
	}
	pp := filepath.Join(dir, "x.pack")
	os.WriteFile(pp, pack, 0o644)
	git(t, dir, nil, append([]string{"index-pack", "-o", filepath.Join(dir, "x.idx")}, append(extra, pp)...)...)
	idx, err := os.ReadFile(filepath.Join(dir, "x.idx"))
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func indexBytes(t *testing.T, pack []byte, opts IndexOptions) (*Indexed, []byte) {
	t.Helper()
	res, err := IndexPack(context.Background(), bytes.NewReader(pack), t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := os.ReadFile(res.IdxPath)
	if err != nil {
		t.Fatal(err)
	}
	return res, idx
}

// checkIndexed compares the result with git's view of the same objects.
func checkIndexed(t *testing.T, res *Indexed, want map[object.ID]catObj) {
	t.Helper()
	if len(res.Objects) != len(want) {
		t.Fatalf("indexed %d objects, want %d", len(res.Objects), len(want))
	}
	for _, o := range res.Objects {
		w, ok := want[o.ID]
		if !ok {
			t.Fatalf("unexpected object %s", o.ID)
		}
		if o.Type != w.typ || o.Size != int64(len(w.data)) {
			t.Fatalf("%s: %v %d, want %v %d", o.ID, o.Type, o.Size, w.typ, len(w.data))
		}
	}
	base := filepath.Base(res.PackPath)
	if !strings.HasPrefix(base, res.Name+"-") || !strings.HasSuffix(base, ".pack") ||
		res.IdxPath != strings.TrimSuffix(res.PackPath, ".pack")+".idx" || res.Name != "pack-"+res.Checksum.String() {
		t.Fatalf("bad names %q %q", res.Name, res.PackPath)
	}
}

func TestIndexPackMatchesGitOfs(t *testing.T) {
	fx := sharedFixture(t)
	pack, _ := os.ReadFile(fx.packPath)
	gitIdx, _ := os.ReadFile(fx.idxPath)
	for _, threads := range []int{1, 2, 4} {
		var stages []string
		res, idx := indexBytes(t, pack, IndexOptions{Threads: threads, Progress: func(s string, done, total uint64) {
			if len(stages) == 0 || stages[len(stages)-1] != s {
				stages = append(stages, s)
			}
		}})
		if !bytes.Equal(idx, gitIdx) {
			t.Fatalf("threads=%d: idx differs from git's", threads)
		}
		checkIndexed(t, res, catFileAll(t, fx.dir))
		if res.ThinFixed != 0 {
			t.Fatalf("ThinFixed = %d", res.ThinFixed)
		}
		if got, _ := os.ReadFile(res.PackPath); !bytes.Equal(got, pack) {
			t.Fatal("stored pack differs from input")
		}
		if strings.Join(stages, ",") != "receiving objects,resolving deltas" {
			t.Fatalf("stages %v", stages)
		}
	}
}

// A tiny resolution budget forces dropped frames to be rebuilt.
func TestIndexPackSmallCache(t *testing.T) {
	fx := sharedFixture(t)
	pack, _ := os.ReadFile(fx.packPath)
	gitIdx, _ := os.ReadFile(fx.idxPath)
	_, idx := indexBytes(t, pack, IndexOptions{CacheBytes: 1})
	if !bytes.Equal(idx, gitIdx) {
		t.Fatal("idx differs from git's")
	}
}

func TestIndexPackRefDeltas(t *testing.T) {
	fx := sharedFixture(t)
	// Without --delta-base-offset, git sends every delta as REF_DELTA.
	list := git(t, fx.dir, nil, "rev-list", "--objects", "--all")
	pack := git(t, fx.dir, list, "pack-objects", "--stdout", "-q")
	if bytes.Contains(git(t, fx.dir, nil, "verify-pack", "-v", fx.idxPath), []byte("chain length")) == false {
		t.Fatal("fixture has no deltas")
	}
	res, idx := indexBytes(t, pack, IndexOptions{})
	if want := gitIndexPack(t, pack, ""); !bytes.Equal(idx, want) {
		t.Fatal("idx differs from git index-pack's")
	}
	checkIndexed(t, res, catFileAll(t, fx.dir))
	// Forcing fresh deltas (--no-reuse-delta) exercises git's own ordering.
	pack2 := git(t, fx.dir, list, "pack-objects", "--stdout", "-q", "--no-reuse-delta", "--window=20")
	_, idx2 := indexBytes(t, pack2, IndexOptions{Threads: 3})
	if want := gitIndexPack(t, pack2, ""); !bytes.Equal(idx2, want) {
		t.Fatal("no-reuse-delta: idx differs from git index-pack's")
	}
}

func TestIndexPackThin(t *testing.T) {
	fx := sharedFixture(t)
	p := openFixture(t, fx)
	base := NewSet(p)
	for _, ofs := range []bool{false, true} {
		args := []string{"pack-objects", "--stdout", "-q", "--revs", "--thin"}
		if ofs {
			args = append(args, "--delta-base-offset")
		}
		thin := git(t, fx.dir, []byte("main\n^old\n"), args...)
		if _, err := IndexPack(context.Background(), bytes.NewReader(thin), t.TempDir(), IndexOptions{}); !isErr(err, ErrMissingBase) {
			t.Fatalf("thin pack without base: %v", err)
		}
		res, err := IndexPack(context.Background(), bytes.NewReader(thin), t.TempDir(), IndexOptions{Base: base, BaseHas: base.Has})
		if err != nil {
			t.Fatal(err)
		}
		if res.ThinFixed == 0 {
			t.Fatal("thin pack needed no bases; fixture too simple")
		}
		// git must accept the completed pack on its own and agree on the index.
		completed, _ := os.ReadFile(res.PackPath)
		ours, _ := os.ReadFile(res.IdxPath)
		if want := gitIndexPack(t, completed, filepath.Join(fx.dir, ".git"), "--strict"); !bytes.Equal(ours, want) {
			t.Fatal("completed thin pack: idx differs from git's")
		}
		sent := revListObjects(t, fx.dir, "main", "^old")
		if len(res.Objects) != len(sent)+res.ThinFixed {
			t.Fatalf("%d objects, want %d sent + %d bases", len(res.Objects), len(sent), res.ThinFixed)
		}
		cp, err := Open(res.PackPath, res.IdxPath)
		if err != nil {
			t.Fatal(err)
		}
		all := catFileAll(t, fx.dir)
		for _, id := range sent {
			_, data, err := cp.ReadObject(id)
			if err != nil || !bytes.Equal(data, all[id].data) {
				t.Fatalf("%s: %v", id, err)
			}
		}
		cp.Close()
	}
}

// TestIndexPackSameBytesTwice: indexing identical bytes twice into one
// directory gives each result its own files, so one caller adopting or
// removing its files cannot take the other's (a background roll-up and an
// admin repack produce identical packs).
func TestIndexPackSameBytesTwice(t *testing.T) {
	fx := sharedFixture(t)
	pack, err := os.ReadFile(fx.packPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, err := IndexPack(context.Background(), bytes.NewReader(pack), dir, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := IndexPack(context.Background(), bytes.NewReader(pack), dir, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != b.Name || a.PackPath == b.PackPath || a.IdxPath == b.IdxPath {
		t.Fatalf("names %s %s, paths %s %s", a.Name, b.Name, a.PackPath, b.PackPath)
	}
	if err := os.Remove(a.IdxPath); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.IdxPath); err != nil {
		t.Fatalf("removing one result's index removed the other's: %v", err)
	}
}

// TestIndexPackSealed: Sealed is called once, with the bytes and checksum
// of the pack IndexPack keeps: before delta resolution when the pack has no
// REF_DELTA (a push's upload overlaps it), after it otherwise (a thin pack
// grows).
func TestIndexPackSealed(t *testing.T) {
	fx := sharedFixture(t)
	base := NewSet(openFixture(t, fx))
	ofs, _ := os.ReadFile(fx.packPath)
	list := git(t, fx.dir, nil, "rev-list", "--objects", "--all")
	for _, tc := range []struct {
		name  string
		pack  []byte
		early bool
	}{
		{"ofs", ofs, true},
		{"ref", git(t, fx.dir, list, "pack-objects", "--stdout", "-q"), false},
		{"thin", git(t, fx.dir, []byte("main\n^old\n"), "pack-objects", "--stdout", "-q", "--revs", "--thin", "--delta-base-offset"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stage string // the last progress stage seen
			calls := 0
			var sealed []byte
			var sealedSum object.ID
			res, err := IndexPack(context.Background(), bytes.NewReader(tc.pack), t.TempDir(), IndexOptions{
				Base: base, BaseHas: base.Has,
				Progress: func(s string, _, _ uint64) { stage = s },
				Sealed: func(f *os.File, size int64, sum object.ID) {
					defer f.Close()
					calls++
					if early := stage == "receiving objects"; early != tc.early {
						t.Errorf("sealed during %q, want early=%v", stage, tc.early)
					}
					sealed = make([]byte, size)
					if _, err := f.ReadAt(sealed, 0); err != nil {
						t.Errorf("read sealed pack: %v", err)
					}
					sealedSum = sum
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			kept, _ := os.ReadFile(res.PackPath)
			if calls != 1 || sealedSum != res.Checksum || !bytes.Equal(sealed, kept) {
				t.Fatalf("Sealed called %d times with pack-%s (%d bytes); kept pack-%s (%d bytes), same bytes %v",
					calls, sealedSum, len(sealed), res.Checksum, len(kept), bytes.Equal(sealed, kept))
			}
		})
	}
}
