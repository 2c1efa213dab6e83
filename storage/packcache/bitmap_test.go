package packcache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/pack"
)

func bitmapKey(fx fixture) string { return "objects/o/r/pack/" + fx.name + ".bitmap" }

// encodedBitmap builds fx's bitmap for the pack's commits.
func encodedBitmap(t *testing.T, p *pack.Pack) []byte {
	t.Helper()
	var tips []object.ID
	ix := p.Index()
	for i := 0; i < ix.Count(); i++ {
		if typ, _, err := p.ReadHeader(ix.ID(i)); err == nil && typ == object.Commit {
			tips = append(tips, ix.ID(i))
		}
	}
	x, err := bitmap.Build(context.Background(), p, tips, bitmap.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := x.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Bitmap downloads once, shares the index, survives a restart on disk, is
// looked for once when absent, and goes with the pack on Remove.
func TestBitmapLoadShareAndRemove(t *testing.T) {
	ctx := context.Background()
	fx := makePack(t, "bm")
	st := &countingStore{Store: memstore.New()}
	upload(t, st, fx)
	dir := t.TempDir()
	c := openCache(t, dir, st)
	release := get(t, c, fx)
	pk, ik := keys(fx)
	p, rel2, err := c.Get(ctx, pk, ik, fx.name)
	if err != nil {
		t.Fatal(err)
	}
	rel2()

	gets := st.gets.Load()
	// Asked twice: the absence is remembered, so the store is asked once.
	first, second := c.Bitmap(ctx, bitmapKey(fx), fx.name), c.Bitmap(ctx, bitmapKey(fx), fx.name)
	if first != nil || second != nil {
		t.Fatal("bitmap from nowhere")
	}
	if n := st.gets.Load() - gets; n != 1 {
		t.Fatalf("absent bitmap looked for %d times, want 1", n)
	}
	data := encodedBitmap(t, p)
	if err := st.Put(ctx, bitmapKey(fx), bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if c.Bitmap(ctx, bitmapKey(fx), fx.name) != nil {
		t.Fatal("absence not remembered while the pack is open")
	}
	release()
	before := c.Stats().Bytes

	// A new process: the pack reopens and the bitmap is fetched.
	c.Close()
	c = openCache(t, dir, st)
	release = get(t, c, fx)
	bm := c.Bitmap(ctx, bitmapKey(fx), fx.name)
	if bm == nil || bm.Pack().Name() != fx.name {
		t.Fatal("no bitmap after it was stored")
	}
	if c.Bitmap(ctx, bitmapKey(fx), fx.name) != bm {
		t.Fatal("bitmap index not shared")
	}
	if got := c.Stats().Bytes; got != before+int64(len(data)) {
		t.Fatalf("cache bytes = %d, want %d + bitmap %d", got, before, len(data))
	}
	release()

	// Another restart reads the local file: no store access.
	c.Close()
	c = openCache(t, dir, st)
	release = get(t, c, fx)
	gets = st.gets.Load()
	if c.Bitmap(ctx, bitmapKey(fx), fx.name) == nil || st.gets.Load() != gets {
		t.Fatal("cached bitmap file not used")
	}
	release()

	if err := c.Remove(fx.name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "packs", fx.name+".bitmap")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bitmap file survived Remove: %v", err)
	}
}

// A corrupt bitmap file in the cache is replaced from the store; a
// corrupt one in the store is ignored; AdoptBitmap installs a local one.
func TestBitmapCorruptAndAdopt(t *testing.T) {
	ctx := context.Background()
	fx := makePack(t, "bc")
	st := memstore.New()
	upload(t, st, fx)
	dir := t.TempDir()
	c := openCache(t, dir, st)
	release := get(t, c, fx)
	pk, ik := keys(fx)
	p, rel2, err := c.Get(ctx, pk, ik, fx.name)
	if err != nil {
		t.Fatal(err)
	}
	rel2()
	good := encodedBitmap(t, p)
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0xff
	if err := st.Put(ctx, bitmapKey(fx), bytes.NewReader(bad), int64(len(bad))); err != nil {
		t.Fatal(err)
	}
	if c.Bitmap(ctx, bitmapKey(fx), fx.name) != nil {
		t.Fatal("corrupt bitmap from the store used")
	}
	if s := c.Stats(); s.Corrupt != 1 {
		t.Fatalf("corrupt = %d, want 1", s.Corrupt)
	}

	local := filepath.Join(t.TempDir(), "built.bitmap")
	if err := os.WriteFile(local, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.AdoptBitmap(local, fx.name); err != nil {
		t.Fatal(err)
	}
	if c.Bitmap(ctx, bitmapKey(fx), fx.name) == nil {
		t.Fatal("adopted bitmap not used")
	}
	release()

	// Damage the cached file; the next process falls back to the store,
	// which now holds a good copy.
	if err := st.Put(ctx, bitmapKey(fx), bytes.NewReader(good), int64(len(good))); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := os.WriteFile(filepath.Join(dir, "packs", fx.name+".bitmap"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	c = openCache(t, dir, st)
	defer get(t, c, fx)()
	if c.Bitmap(ctx, bitmapKey(fx), fx.name) == nil {
		t.Fatal("good store copy not used after a corrupt local file")
	}
}

// A bitmap file whose pack is not cached is a stray.
func TestStrayBitmapRemovedAtOpen(t *testing.T) {
	fx := makePack(t, "sb")
	dir := t.TempDir()
	c := openCache(t, dir, memstore.New())
	c.Close()
	stray := filepath.Join(dir, "packs", fx.name+".bitmap")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	openCache(t, dir, memstore.New())
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stray bitmap survived Open: %v", err)
	}
}

// TestBitmapAbsenceKept: fetches ask for the bitmap of every pack of a
// repository, so a known absence outlives the open-file budget closing
// the pack, and a pack adopted from this node is known to have none: the
// store is not asked again.
func TestBitmapAbsenceKept(t *testing.T) {
	ctx := context.Background()
	st := &countingStore{Store: memstore.New()}
	a, b, adopted := makePack(t, "ka"), makePack(t, "kb"), makePack(t, "kc")
	upload(t, st, a)
	upload(t, st, b)
	now := time.Unix(1000, 0)
	c := openCache(t, t.TempDir(), st, WithMaxOpen(1), WithClock(func() time.Time { return now }))
	release := get(t, c, a)
	gets := st.gets.Load()
	if c.Bitmap(ctx, bitmapKey(a), a.name) != nil || st.gets.Load() != gets+1 {
		t.Fatal("absent bitmap not looked for once")
	}
	release()
	now = now.Add(time.Second)
	get(t, c, b)() // closes a: one open pack at most
	if s := c.Stats(); s.Open != 1 {
		t.Fatalf("stats = %+v, want 1 open", s)
	}
	now = now.Add(time.Second)
	release = get(t, c, a)
	gets = st.gets.Load()
	if c.Bitmap(ctx, bitmapKey(a), a.name) != nil || st.gets.Load() != gets {
		t.Fatalf("reopened pack: store asked %d times for its bitmap, want 0", st.gets.Load()-gets)
	}
	release()

	if err := c.Adopt(adopted.packPath, adopted.idxPath, adopted.name); err != nil {
		t.Fatal(err)
	}
	release = get(t, c, adopted)
	gets = st.gets.Load()
	if c.Bitmap(ctx, bitmapKey(adopted), adopted.name) != nil || st.gets.Load() != gets {
		t.Fatalf("adopted pack: store asked %d times for its bitmap, want 0", st.gets.Load()-gets)
	}
	release()
}
