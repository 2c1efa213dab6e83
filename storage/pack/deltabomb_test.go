package pack

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// bombDelta is a delta that copies all of a base of baseSize bytes copies
// times: a few bytes per copy, declaring copies×baseSize.
func bombDelta(baseSize, copies int) []byte {
	d := appendVarint(nil, uint64(baseSize))
	d = appendVarint(d, uint64(baseSize*copies))
	for range copies {
		for off := 0; off < baseSize; off += 0xffffff {
			d = appendCopy(d, off, min(0xffffff, baseSize-off))
		}
	}
	return d
}

// allocated runs f and returns the bytes the process allocated meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A delta bomb (a zero blob and a delta of many copies of it) is refused
// from the result size its header declares, before anything is applied:
// the result is never allocated, as a REF_DELTA or an OFS_DELTA, and the
// blob itself (over the pipe's size) is only streamed.
func TestIndexPackDeltaBombNotApplied(t *testing.T) {
	const baseSize, copies = 4 << 20, 32 // 128 MiB declared
	zero := make([]byte, baseSize)
	blob := whole(object.Blob, "")
	blob.declared, blob.rawZ = baseSize, zlibBytes(zero)
	bomb := bombDelta(baseSize, copies)
	for name, delta := range map[string]tEntry{
		"ref": refD(object.Hash(object.Blob, zero), bomb),
		"ofs": ofsD(0, bomb),
	} {
		t.Run(name, func(t *testing.T) {
			p := buildPack(blob, delta)
			var err error
			n := allocated(func() {
				_, err = IndexPack(context.Background(), bytes.NewReader(p), t.TempDir(), IndexOptions{MaxObjectSize: 64 << 20})
			})
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "delta result exceeds max size") {
				t.Fatalf("bomb of %d bytes declared: %v, want ErrTooLarge for the delta result", baseSize*copies, err)
			}
			if n > baseSize {
				t.Fatalf("refusing the bomb allocated %d MiB (declared result %d MiB, base %d MiB)", n>>20, baseSize*copies>>20, baseSize>>20)
			}
			t.Logf("pack of %d bytes refused after allocating %d KiB", len(p), n>>10)
		})
	}
}

var errNoMemory = errors.New("no memory for you")

// Deltas within the object size limit still declare what they will hold:
// Reserve is asked for the base and the result before either is
// allocated, its refusal stops IndexPack unchanged, and once granted the
// pack indexes with what was asked for.
func TestIndexPackReservesDeclaredSizes(t *testing.T) {
	const baseSize, copies = 2 << 20, 8 // 16 MiB declared
	zero := make([]byte, baseSize)
	blob := whole(object.Blob, "")
	blob.declared, blob.rawZ = baseSize, zlibBytes(zero)
	bomb := bombDelta(baseSize, copies)
	p := buildPack(blob, refD(object.Hash(object.Blob, zero), bomb))
	want := int64(baseSize + baseSize*copies + len(bomb))

	var asked []int64
	var err error
	n := allocated(func() {
		_, err = IndexPack(context.Background(), bytes.NewReader(p), t.TempDir(), IndexOptions{
			Reserve: func(n int64) error { asked = append(asked, n); return errNoMemory }})
	})
	if err != errNoMemory {
		t.Fatalf("refused reservation: IndexPack returned %v, want it unchanged", err)
	}
	if !slices.Equal(asked, []int64{want}) {
		t.Fatalf("asked for %v, want [%d] (base, delta and result)", asked, want)
	}
	if n > baseSize {
		t.Fatalf("refused reservation, yet %d MiB allocated", n>>20)
	}

	asked = nil
	res, err := IndexPack(context.Background(), bytes.NewReader(p), t.TempDir(), IndexOptions{
		Reserve: func(n int64) error { asked = append(asked, n); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asked, []int64{want}) || res.Objects[1].Size != baseSize*copies {
		t.Fatalf("granted: asked %v (want [%d]), objects %+v", asked, want, res.Objects)
	}

	// Small objects need nothing beyond the fixed buffers.
	const base = "hello world, this is the base object\n"
	small := buildPack(whole(object.Blob, base), ofsD(0, deltaOf(base, base+"more\n")), refD(object.Hash(object.Blob, []byte(base)), deltaOf(base, "x")))
	if _, err := IndexPack(context.Background(), bytes.NewReader(small), t.TempDir(), IndexOptions{
		Reserve: func(n int64) error { return errNoMemory }}); err != nil {
		t.Fatalf("small pack asked for memory: %v", err)
	}
}

// A commit, tree or tag too big for the pipe is buffered whole for Check:
// Reserve is asked for its declared size first.
func TestIndexPackReservesCheckedObjects(t *testing.T) {
	var tree []byte
	for i := 0; len(tree) <= 2*maxPipedCheck; i++ {
		tree = append(tree, "100644 file"+strings.Repeat("x", i%50)+string(rune('a'+i%26))...)
		tree = append(tree, 0)
		tree = append(tree, make([]byte, object.IDSize)...)
	}
	p := buildPack(whole(object.Tree, string(tree)))
	var asked []int64
	var err error
	n := allocated(func() {
		_, err = IndexPack(context.Background(), bytes.NewReader(p), t.TempDir(), IndexOptions{
			Check:   func(object.ID, object.Type, []byte) error { return nil },
			Reserve: func(n int64) error { asked = append(asked, n); return errNoMemory }})
	})
	if err != errNoMemory || !slices.Equal(asked, []int64{int64(len(tree))}) {
		t.Fatalf("tree of %d bytes: err %v, asked %v", len(tree), err, asked)
	}
	if n > uint64(len(tree)) {
		t.Fatalf("refused reservation, yet %d KiB allocated for a %d KiB tree", n>>10, len(tree)>>10)
	}
}

// A delta's instructions are inflated whole to apply it, so they are held
// to the object size limit too, even when the result they declare is
// within it: eight bytes of copy instruction can make one byte.
func TestIndexPackDeltaInstructionsOverLimit(t *testing.T) {
	base := strings.Repeat("b", 64)
	const result = 1000
	d := appendVarint(nil, uint64(len(base)))
	d = appendVarint(d, result)
	for i := range result {
		// Offset and size bytes all present: 8 bytes for one.
		d = append(d, 0xff, byte(i%63), 0, 0, 0, 1, 0, 0)
	}
	p := buildPack(whole(object.Blob, base), ofsD(0, d))
	if _, err := IndexPack(context.Background(), bytes.NewReader(p), t.TempDir(), IndexOptions{MaxObjectSize: 4000}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "delta exceeds max size") {
		t.Fatalf("delta of %d bytes for a %d-byte result under a 4000-byte limit: %v", len(d), result, err)
	}
	if _, err := IndexPack(context.Background(), bytes.NewReader(p), t.TempDir(), IndexOptions{MaxObjectSize: int64(len(d))}); err != nil {
		t.Fatalf("same delta at the limit: %v", err)
	}
}

func TestResolveMemory(t *testing.T) {
	const M = 1 << 20
	tests := []struct {
		name     string
		threads  int
		largest  []int64
		maxDelta int64
		want     int64
	}{
		{"nothing", 2, nil, 0, 0},
		{"small objects", 1, []int64{M, 4 << 10}, 2 << 10, 0},
		{"big delta instructions", 1, []int64{1 << 10}, 2 * M, 1<<10 + 2*M},
		{"one big delta", 1, []int64{96 * M, 16 * M}, 300, 112*M + 300},
		{"two resolvers", 2, []int64{96 * M, 96 * M, 16 * M, 16 * M}, 300, 224*M + 600},
		{"declared beyond int64", 1, []int64{1<<63 - 1, 1 << 62}, 1, 1<<63 - 1},
	}
	for _, tc := range tests {
		if got := resolveMemory(tc.threads, tc.largest, tc.maxDelta); got != tc.want {
			t.Errorf("%s: resolveMemory(%d, %v, %d) = %d, want %d", tc.name, tc.threads, tc.largest, tc.maxDelta, got, tc.want)
		}
	}
	top := topSizes{k: 3}
	for _, x := range []int64{5, 1, 9, 5, 7, 2, 9} {
		top.add(x)
	}
	if !slices.Equal(top.v, []int64{9, 9, 7}) {
		t.Errorf("topSizes kept %v, want [9 9 7]", top.v)
	}
}
