package pack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/gitrun"
)

// TestDeltaEncode: every delta encode makes applies back to its target,
// similar inputs give small deltas, and the limit is honoured.
func TestDeltaEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	text := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog\n", 300))
	big := random(300 << 10) // copies longer than one instruction
	edit := func(b []byte, at int, ins string, del int) []byte {
		out := append(bytes.Clone(b[:at]), ins...)
		return append(out, b[at+del:]...)
	}
	for _, c := range []struct {
		name      string
		base, trg []byte
		small     bool // the delta must be under a tenth of trg
	}{
		{"identical", text, text, true},
		{"appended", text, append(bytes.Clone(text), "one more line\n"...), true},
		{"prepended", text, append([]byte("first line\n"), text...), true},
		{"inserted", text, edit(text, 5000, "an insertion in the middle", 0), true},
		{"deleted", text, edit(text, 5000, "", 700), true},
		{"large copy", big, edit(big, 100<<10, "x", 1), true},
		{"unrelated", random(4000), random(4000), false},
		{"empty target", text, nil, false},
		{"short base", []byte("abc"), text, false},
		{"short target", text, []byte("the quick"), false},
	} {
		x := newDeltaIndex(c.base)
		d := x.encode(c.trg, 1<<30)
		if d == nil {
			t.Fatalf("%s: no delta under an unlimited limit", c.name)
		}
		got, err := ApplyDelta(c.base, d)
		if err != nil || !bytes.Equal(got, c.trg) {
			t.Fatalf("%s: delta applies to %d bytes (%v), want %d", c.name, len(got), err, len(c.trg))
		}
		if c.small && len(d) > len(c.trg)/10 {
			t.Errorf("%s: delta of %d bytes for a %d-byte target", c.name, len(d), len(c.trg))
		}
		if x.encode(c.trg, len(d)-1) != nil {
			t.Errorf("%s: a delta longer than the limit %d", c.name, len(d)-1)
		}
	}
	// Random edits of random data.
	for i := range 200 {
		base := random(rng.IntN(3000))
		trg := bytes.Clone(base)
		for range rng.IntN(6) {
			at := rng.IntN(len(trg) + 1)
			del := rng.IntN(len(trg)-at+1) / 4
			trg = edit(trg, at, string(random(rng.IntN(50))), del)
		}
		d := newDeltaIndex(base).encode(trg, 1<<30)
		if got, err := ApplyDelta(base, d); err != nil || !bytes.Equal(got, trg) {
			t.Fatalf("random case %d: delta does not apply back (%v)", i, err)
		}
	}
}

// similarBlobs stores 30 versions each of two growing files, every blob
// whole and every version in a pack of its own (as separate pushes
// without deltas leave them), and returns the set, the ids and the
// contents.
func similarBlobs(t *testing.T) (*Set, []object.ID, map[object.ID][]byte) {
	dir := t.TempDir()
	var packs []*Pack
	var ids []object.ID
	want := map[object.ID][]byte{}
	var lines []string
	for v := range 30 {
		lines = append(lines, fmt.Sprintf("line %d of a file that grows by one line per version %s", v, strings.Repeat("-", 40)))
		var entries []tEntry
		for f := range 2 { // two files, so the name hash matters
			data := []byte(fmt.Sprintf("file %d\n%s\n", f, strings.Join(lines, "\n")))
			entries = append(entries, whole(object.Blob, string(data)))
			id := object.Hash(object.Blob, data)
			ids = append(ids, id)
			want[id] = data
		}
		ix, err := IndexPack(context.Background(), bytes.NewReader(buildPack(entries...)), dir, IndexOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := Open(ix.PackPath, ix.IdxPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		packs = append(packs, p)
	}
	return NewSet(packs...), ids, want
}

// TestWriteRepackDeltas: over packs that store similar blobs whole (as
// separate pushes without deltas leave them), WriteRepack can only copy
// them, while WriteRepackDeltas finds deltas: its pack is much smaller,
// git index-pack --strict accepts it, every object reads back, and no
// chain is longer than the depth asked for.
func TestWriteRepackDeltas(t *testing.T) {
	set, ids, want := similarBlobs(t)
	var stored, fresh bytes.Buffer
	if _, err := set.WriteRepack(context.Background(), &stored, ids, 0, nil); err != nil {
		t.Fatal(err)
	}
	const depth = 4
	names := func(id object.ID) uint32 { return NameHash(fmt.Sprintf("f%d.txt", want[id][5]-'0')) }
	st, err := set.WriteRepackDeltas(context.Background(), &fresh, ids, DeltaSearchOptions{MaxDepth: depth, NameHash: names})
	if err != nil {
		t.Fatal(err)
	}
	if st.Objects != len(ids) || int64(fresh.Len()) != st.Bytes {
		t.Fatalf("stats %+v for %d objects and %d bytes", st, len(ids), fresh.Len())
	}
	t.Logf("fresh deltas: %d bytes (%+v); stored copies: %d bytes", fresh.Len(), st, stored.Len())
	if fresh.Len()*3 > stored.Len() {
		t.Errorf("fresh deltas: %d bytes, stored copies: %d; want under a third", fresh.Len(), stored.Len())
	}
	repo := gitrun.Scratch(t, gitrun.Env{}).Dir
	git(t, repo, fresh.Bytes(), "index-pack", "--stdin", "--strict")
	for id, data := range want {
		if got := git(t, repo, nil, "cat-file", "blob", id.String()); !bytes.Equal(got, data) {
			t.Fatalf("%s reads back %d bytes, want %d", id, len(got), len(data))
		}
	}
	written, _ := filepath.Glob(filepath.Join(repo, ".git/objects/pack/pack-*.pack"))
	if len(written) != 1 {
		t.Fatalf("%d packs after index-pack, want 1", len(written))
	}
	out := git(t, repo, nil, "verify-pack", "-v", "--", written[0])
	for _, m := range regexp.MustCompile(`chain length = (\d+)`).FindAllSubmatch(out, -1) {
		if n, _ := strconv.Atoi(string(m[1])); n > depth {
			t.Errorf("a delta chain of %d, want at most %d", n, depth)
		}
	}
	if !bytes.Contains(out, []byte("chain length = 1")) {
		t.Errorf("no deltas in the fresh pack:\n%s", out)
	}
}

// TestWriteRepackDeltasCancel: the search stops when its context ends.
func TestWriteRepackDeltasCancel(t *testing.T) {
	set, ids, _ := similarBlobs(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := set.WriteRepackDeltas(ctx, &bytes.Buffer{}, ids, DeltaSearchOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled search: %v, want context.Canceled", err)
	}
}

// TestWriteRepackDeltasKeepsCallerOrder: objects that tie on type, name
// and size (a history's root trees: one entry changes per commit) are
// compared in the caller's order, which is the walk's, newest first; in
// id order neighbours in the window are unrelated versions that share
// little, and most would be written whole.
func TestWriteRepackDeltasKeepsCallerOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	slots := make([][]byte, 40)
	for i := range slots {
		slots[i] = make([]byte, 35)
		for j := range slots[i] {
			slots[i][j] = byte(rng.IntN(256))
		}
	}
	var entries []tEntry
	var history []object.ID
	for v := range 200 {
		s := slots[v%len(slots)]
		for j := 15; j < len(s); j++ { // a new "id" in one entry
			s[j] = byte(rng.IntN(256))
		}
		data := bytes.Join(slots, nil)
		entries = append(entries, whole(object.Blob, string(data)))
		history = append(history, object.Hash(object.Blob, data))
	}
	ix, err := IndexPack(context.Background(), bytes.NewReader(buildPack(entries...)), t.TempDir(), IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Open(ix.PackPath, ix.IdxPath)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	write := func(objs []object.ID) int {
		var buf bytes.Buffer
		if _, err := NewSet(p).WriteRepackDeltas(context.Background(), &buf, objs, DeltaSearchOptions{}); err != nil {
			t.Fatal(err)
		}
		return buf.Len()
	}
	shuffled := slices.Clone(history)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	inOrder, random := write(history), write(shuffled)
	t.Logf("history order: %d bytes; shuffled: %d bytes", inOrder, random)
	if inOrder*3 > random {
		t.Fatalf("history order gives %d bytes, shuffled %d: want under a third", inOrder, random)
	}
}
