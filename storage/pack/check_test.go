package pack

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// checkRecorder is an IndexOptions.Check that records every call.
type checkRecorder struct {
	mu    sync.Mutex
	calls map[object.ID]catObj
	dup   []object.ID
	fail  map[object.ID]error
}

func newCheckRecorder() *checkRecorder {
	return &checkRecorder{calls: map[object.ID]catObj{}, fail: map[object.ID]error{}}
}

func (r *checkRecorder) check(id object.ID, t object.Type, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.calls[id]; ok {
		r.dup = append(r.dup, id)
	}
	// data is only valid during the call.
	r.calls[id] = catObj{typ: t, data: bytes.Clone(data)}
	return r.fail[id]
}

// storedTypes returns each object's type as stored in the pack (deltas
// included), so tests can tell whole objects from resolved ones.
func storedTypes(t *testing.T, p *Pack) map[object.ID]object.Type {
	t.Helper()
	ents, err := p.Entries()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[object.ID]object.Type, len(ents))
	for _, e := range ents {
		h, err := p.entryHeader(e.Offset)
		if err != nil {
			t.Fatal(err)
		}
		out[e.ID] = h.typ
	}
	return out
}

// Check sees every commit, tree and tag exactly once with its content,
// whether stored whole or resolved from a delta, and never a blob.
func TestIndexPackCheckSeesEveryNonBlob(t *testing.T) {
	fx := sharedFixture(t)
	pack, _ := os.ReadFile(fx.packPath)
	all := catFileAll(t, fx.dir)
	stored := storedTypes(t, openFixture(t, fx))
	var whole, resolved int
	for id, o := range all {
		if o.typ == object.Blob {
			continue
		}
		if stored[id] >= object.OfsDelta {
			resolved++
		} else {
			whole++
		}
	}
	if whole == 0 || resolved == 0 {
		t.Fatalf("fixture has %d whole and %d deltified non-blobs; want both", whole, resolved)
	}
	for _, threads := range []int{1, 3} {
		rec := newCheckRecorder()
		indexBytes(t, pack, IndexOptions{Threads: threads, Check: rec.check})
		if len(rec.dup) > 0 {
			t.Fatalf("threads=%d: checked twice: %v", threads, rec.dup)
		}
		for id, o := range all {
			got, ok := rec.calls[id]
			switch {
			case o.typ == object.Blob && ok:
				t.Fatalf("threads=%d: blob %s passed to Check", threads, id)
			case o.typ == object.Blob:
			case !ok:
				t.Fatalf("threads=%d: %v %s never checked", threads, o.typ, id)
			case got.typ != o.typ || !bytes.Equal(got.data, o.data):
				t.Fatalf("threads=%d: %s checked as %v with other content", threads, id, got.typ)
			}
		}
		if len(rec.calls) != whole+resolved {
			t.Fatalf("threads=%d: %d checks, want %d", threads, len(rec.calls), whole+resolved)
		}
	}
}

// The first error of Check fails IndexPack, unchanged, and leaves no files.
func TestIndexPackCheckErrorFails(t *testing.T) {
	fx := sharedFixture(t)
	pack, _ := os.ReadFile(fx.packPath)
	all := catFileAll(t, fx.dir)
	stored := storedTypes(t, openFixture(t, fx))
	// One target stored whole (checked while receiving), one deltified
	// (checked by a resolver goroutine).
	var targets []object.ID
	for _, wantDelta := range []bool{false, true} {
		for id, o := range all {
			if o.typ != object.Blob && (stored[id] >= object.OfsDelta) == wantDelta {
				targets = append(targets, id)
				break
			}
		}
	}
	if len(targets) != 2 {
		t.Fatal("fixture lacks a whole or a deltified non-blob")
	}
	bad := errors.New("rejected by check")
	for _, id := range targets {
		rec := newCheckRecorder()
		rec.fail[id] = bad
		dir := t.TempDir()
		_, err := IndexPack(context.Background(), bytes.NewReader(pack), dir, IndexOptions{Threads: 2, Check: rec.check})
		if err != bad {
			t.Fatalf("%s (stored %v): err = %v, want the check's error unchanged", id, stored[id], err)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("%s: files left behind: %v", id, left)
		}
	}
}

// Bases appended to complete a thin pack are checked too: here a tree from
// the repository that a pushed REF_DELTA names as its base.
func TestIndexPackCheckThinBases(t *testing.T) {
	fx := sharedFixture(t)
	base := NewSet(openFixture(t, fx))
	var treeID object.ID
	var tree []byte
	for id, o := range catFileAll(t, fx.dir) {
		if o.typ == object.Tree {
			treeID, tree = id, o.data
			break
		}
	}
	// The indexer does not parse trees, so any new content will do.
	result := append(bytes.Clone(tree), "100644 x\x00"+string(make([]byte, 20))...)
	thin := buildPack(whole(object.Blob, "unrelated"), refD(treeID, makeDelta(tree, result)))
	rec := newCheckRecorder()
	res, err := IndexPack(context.Background(), bytes.NewReader(thin), t.TempDir(), IndexOptions{Base: base, BaseHas: base.Has, Check: rec.check})
	if err != nil {
		t.Fatal(err)
	}
	if res.ThinFixed != 1 {
		t.Fatalf("ThinFixed = %d, want 1", res.ThinFixed)
	}
	resultID := object.Hash(object.Tree, result)
	if len(rec.calls) != 2 || len(rec.dup) > 0 {
		t.Fatalf("%d checks (duplicates %v), want the base and the result", len(rec.calls), rec.dup)
	}
	if got := rec.calls[treeID]; got.typ != object.Tree || !bytes.Equal(got.data, tree) {
		t.Fatalf("thin base: checked as %v, content equal %v", got.typ, bytes.Equal(got.data, tree))
	}
	if got := rec.calls[resultID]; got.typ != object.Tree || !bytes.Equal(got.data, result) {
		t.Fatalf("delta result: checked as %v, content equal %v", got.typ, bytes.Equal(got.data, result))
	}
}

// OpenIndexed answers ReadHeader from the indexer's record, and agrees
// with a pack that walks delta headers.
func TestOpenIndexedHeaders(t *testing.T) {
	fx := sharedFixture(t)
	pack, _ := os.ReadFile(fx.packPath)
	res, _ := indexBytes(t, pack, IndexOptions{})
	p, err := OpenIndexed(res)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	plain := openFixture(t, fx)
	for _, o := range res.Objects {
		typ, size, err := p.ReadHeader(o.ID)
		wt, ws, werr := plain.ReadHeader(o.ID)
		if err != nil || werr != nil || typ != wt || size != ws || typ != o.Type || size != o.Size {
			t.Fatalf("%s: %v %d %v, want %v %d %v", o.ID, typ, size, err, wt, ws, werr)
		}
	}
	var absent object.ID
	absent[0] = 0xfe
	if _, _, err := p.ReadHeader(absent); !errors.Is(err, object.ErrNotFound) {
		t.Fatalf("absent id: %v", err)
	}
	// A record that does not describe the index is refused.
	short := *res
	short.Objects = res.Objects[1:]
	if p2, err := OpenIndexed(&short); err == nil {
		p2.Close()
		t.Fatal("OpenIndexed accepted a record missing an object")
	}
	moved := *res
	moved.Objects = append([]IndexedObject(nil), res.Objects...)
	moved.Objects[0].Offset++
	if p2, err := OpenIndexed(&moved); err == nil {
		p2.Close()
		t.Fatal("OpenIndexed accepted a record with a wrong offset")
	}
}

// Pass 1 resolves a delta while the pipe holds its base, inflates a whole
// base it dropped again from the file, and leaves a delta whose base was a
// dropped delta to pass 2, which rebuilds that base along its chain (and
// counts the chain's depth from the whole object).
func TestIndexPackDroppedBases(t *testing.T) {
	a := "base blob\n" + strings.Repeat("a", 1000)
	a1, a3 := a+"one\n", a+"three\n"
	a2 := a1 + "two\n"
	entries := []tEntry{whole(object.Blob, a), ofsD(0, makeDelta([]byte(a), []byte(a1)))}
	// Incompressible blobs beyond the pipe's blob budget push 0 and 1 out.
	rnd := rand.NewChaCha8([32]byte{})
	var fillers []string
	for range pipedBlobBases/(900<<10) + 2 {
		b := make([]byte, 900<<10)
		rnd.Read(b)
		fillers = append(fillers, string(b))
		entries = append(entries, whole(object.Blob, string(b)))
	}
	d2, d3 := len(entries), len(entries)+1
	entries = append(entries, ofsD(1, makeDelta([]byte(a1), []byte(a2))), ofsD(0, makeDelta([]byte(a), []byte(a3))))
	packBytes := buildPack(entries...)
	want := append([]string{a, a1}, fillers...)
	want = append(want, a2, a3)

	run := func(opts IndexOptions) (*indexer, error) {
		f, err := os.CreateTemp(t.TempDir(), "pack")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ix := newIndexer(context.Background(), f, opts)
		if _, err := ix.receive(bytes.NewReader(packBytes)); err != nil {
			t.Fatal(err)
		}
		for i, r := range map[int]object.Type{1: object.Blob, d2: 0, d3: object.Blob} {
			if got := ix.entries[i].rtype; got != r {
				t.Fatalf("after pass 1, entry %d resolved as %v, want %v", i, got, r)
			}
		}
		_, err = ix.resolveAll()
		return ix, err
	}
	ix, err := run(IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if got := ix.entries[i].id; got != object.Hash(object.Blob, []byte(w)) {
			t.Fatalf("entry %d: id %s, want %s", i, got, object.Hash(object.Blob, []byte(w)))
		}
	}
	if _, err := run(IndexOptions{MaxDeltaDepth: 1}); !errors.Is(err, ErrDeltaDepth) {
		t.Fatalf("depth 2 with limit 1: got %v, want ErrDeltaDepth", err)
	}
}
