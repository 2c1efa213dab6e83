package packcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/testkit/gitrun"
	"github.com/rgit/rgit/testkit/tmpfs"
)

// countingStore counts Gets and can hold them until released.
type countingStore struct {
	objstore.Store
	gets atomic.Int64
	hold chan struct{} // when non-nil, Get waits for it to close
}

func (s *countingStore) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	s.gets.Add(1)
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return nil, objstore.ObjectInfo{}, ctx.Err()
		}
	}
	return s.Store.Get(ctx, key)
}

type fixture struct {
	name     string
	pack     []byte
	idx      []byte
	blobs    map[object.ID][]byte
	packPath string // a local copy of the pair, for Adopt
	idxPath  string
}

// makePack builds a small repository whose content depends on seed and
// packs all of it with git.
func makePack(t *testing.T, seed string) fixture {
	t.Helper()
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("t", "t@t", "2020-01-01T00:00:00Z")})
	fx := fixture{blobs: map[object.ID][]byte{}}
	for i := 0; i < 3; i++ {
		content := []byte(strings.Repeat(seed+" line\n", 50+i))
		g.Write("f.txt", string(content))
		fx.blobs[object.Hash(object.Blob, content)] = content
		g.Run("add", ".")
		g.Run("commit", "-q", "-m", seed)
	}
	list := g.Output(nil, "rev-list", "--objects", "--all")
	out := t.TempDir()
	hash := strings.TrimSpace(string(g.Output(list, "pack-objects", "-q", filepath.Join(out, "pack"))))
	fx.name = "pack-" + hash
	fx.packPath = filepath.Join(out, fx.name+".pack")
	fx.idxPath = filepath.Join(out, fx.name+".idx")
	var err error
	if fx.pack, err = os.ReadFile(fx.packPath); err != nil {
		t.Fatal(err)
	}
	if fx.idx, err = os.ReadFile(fx.idxPath); err != nil {
		t.Fatal(err)
	}
	return fx
}

func keys(fx fixture) (string, string) {
	return "objects/o/r/pack/" + fx.name + ".pack", "objects/o/r/pack/" + fx.name + ".idx"
}

func upload(t *testing.T, st objstore.Store, fx fixture) {
	t.Helper()
	pk, ik := keys(fx)
	ctx := context.Background()
	if err := st.Put(ctx, pk, bytes.NewReader(fx.pack), int64(len(fx.pack))); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, ik, bytes.NewReader(fx.idx), int64(len(fx.idx))); err != nil {
		t.Fatal(err)
	}
}

func openCache(t *testing.T, dir string, st objstore.Store, opts ...Option) *Cache {
	t.Helper()
	c, err := Open(dir, st, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func get(t *testing.T, c *Cache, fx fixture) func() {
	t.Helper()
	pk, ik := keys(fx)
	p, release, err := c.Get(context.Background(), pk, ik, fx.name)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != fx.name {
		t.Fatalf("pack name %q, want %q", p.Name(), fx.name)
	}
	for id, want := range fx.blobs {
		typ, data, err := p.ReadObject(id)
		if err != nil || typ != object.Blob || !bytes.Equal(data, want) {
			t.Fatalf("ReadObject(%s) = %v, %d bytes, %v", id, typ, len(data), err)
		}
	}
	return release
}

func TestGetDownloadsOnceAndReusesAcrossRestarts(t *testing.T) {
	fx := makePack(t, "a")
	st := &countingStore{Store: memstore.New()}
	upload(t, st, fx)
	dir := t.TempDir()
	c := openCache(t, dir, st)
	get(t, c, fx)()
	get(t, c, fx)()
	if n := st.gets.Load(); n != 2 {
		t.Fatalf("store Gets after two cache Gets = %d, want 2 (pack + idx once)", n)
	}
	if s := c.Stats(); s.Misses != 1 || s.Hits != 1 {
		t.Fatalf("stats = %+v, want 1 miss 1 hit", s)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := openCache(t, dir, st)
	get(t, c2, fx)()
	if n := st.gets.Load(); n != 2 {
		t.Fatalf("store Gets after restart = %d, want still 2", n)
	}
}

func TestCorruptCachedFileIsDownloadedAgain(t *testing.T) {
	fx := makePack(t, "b")
	st := &countingStore{Store: memstore.New()}
	upload(t, st, fx)
	dir := t.TempDir()
	c := openCache(t, dir, st)
	get(t, c, fx)()
	c.Close()
	// Flip one byte inside the pack body: only a full re-hash notices.
	path := filepath.Join(dir, "packs", fx.name+".pack")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c2 := openCache(t, dir, st)
	get(t, c2, fx)()
	if n := st.gets.Load(); n != 4 {
		t.Fatalf("store Gets = %d, want 4 (downloaded again)", n)
	}
	if s := c2.Stats(); s.Corrupt != 1 || s.Misses != 1 {
		t.Fatalf("stats = %+v, want 1 corrupt, 1 miss", s)
	}
}

func TestCorruptStoreObjectIsRejected(t *testing.T) {
	fx := makePack(t, "c")
	st := memstore.New()
	bad := fx
	bad.pack = append([]byte(nil), fx.pack...)
	bad.pack[20] ^= 0xff
	upload(t, st, bad)
	c := openCache(t, t.TempDir(), st)
	pk, ik := keys(fx)
	_, _, err := c.Get(context.Background(), pk, ik, fx.name)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get of corrupt pack: %v, want ErrCorrupt", err)
	}
	if des, _ := os.ReadDir(filepath.Join(c.Dir(), "packs")); len(des) != 0 {
		t.Fatalf("corrupt download left files: %v", des)
	}
	if des, _ := os.ReadDir(c.TempDir()); len(des) != 0 {
		t.Fatalf("corrupt download left temp files: %v", des)
	}
	// A pack stored under the wrong name is rejected as well.
	other := makePack(t, "d")
	pk2, ik2 := keys(other)
	if _, _, err := c.Get(context.Background(), pk2, ik2, fx.name); err == nil {
		t.Fatal("Get with missing keys succeeded")
	}
}

func TestSecondOpenOfDirFails(t *testing.T) {
	dir := t.TempDir()
	openCache(t, dir, memstore.New())
	_, err := Open(dir, memstore.New(), nil)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("error %q should name the dir and the holder", err)
	}
}

func TestConcurrentGetsDownloadOnce(t *testing.T) {
	fx := makePack(t, "e")
	st := &countingStore{Store: memstore.New(), hold: make(chan struct{})}
	upload(t, st, fx)
	const n = 8
	var waiting sync.WaitGroup
	waiting.Add(n - 1)
	c := openCache(t, t.TempDir(), st, WithOnWait(waiting.Done))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk, ik := keys(fx)
			p, release, err := c.Get(context.Background(), pk, ik, fx.name)
			if err == nil {
				if _, _, err = p.ReadObject(firstID(fx)); err == nil {
					release()
				}
			}
			errs <- err
		}()
	}
	// Every Get but the leader is parked on the flight: now let the
	// download proceed.
	waiting.Wait()
	close(st.hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if g := st.gets.Load(); g != 2 {
		t.Fatalf("store Gets = %d, want 2", g)
	}
	if s := c.Stats(); s.Misses != 1 || s.InUse != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func firstID(fx fixture) object.ID {
	for id := range fx.blobs {
		return id
	}
	return object.ID{}
}

func TestAdoptAvoidsDownload(t *testing.T) {
	fx := makePack(t, "f")
	st := &countingStore{Store: memstore.New()}
	c := openCache(t, t.TempDir(), st)
	if err := c.Adopt(fx.packPath, fx.idxPath, fx.name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fx.packPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("adopted pack still at its old path: %v", err)
	}
	get(t, c, fx)() // nothing uploaded: a download would fail
	if n := st.gets.Load(); n != 0 {
		t.Fatalf("store Gets = %d, want 0", n)
	}
	if err := c.Adopt(fx.packPath, fx.idxPath, "pack-"+strings.Repeat("0", 40)); err == nil {
		t.Fatal("Adopt of missing files succeeded")
	}
}

func TestAdoptRejectsWrongName(t *testing.T) {
	fx := makePack(t, "g")
	c := openCache(t, t.TempDir(), memstore.New())
	err := c.Adopt(fx.packPath, fx.idxPath, "pack-"+strings.Repeat("1", 40))
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Adopt under a wrong name: %v, want ErrCorrupt", err)
	}
}

func TestRemoveWhileInUse(t *testing.T) {
	fx := makePack(t, "h")
	st := &countingStore{Store: memstore.New()}
	upload(t, st, fx)
	c := openCache(t, t.TempDir(), st)
	pk, ik := keys(fx)
	p, release, err := c.Get(context.Background(), pk, ik, fx.name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(fx.name); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.ReadObject(firstID(fx)); err != nil {
		t.Fatalf("read from a removed but held pack: %v", err)
	}
	release()
	release() // idempotent
	get(t, c, fx)()
	if n := st.gets.Load(); n != 4 {
		t.Fatalf("store Gets = %d, want 4 (downloaded again after Remove)", n)
	}
}

func TestEvictionKeepsBudgetAndSparesHeldPacks(t *testing.T) {
	a, b := makePack(t, "i"), makePack(t, "j")
	st := memstore.New()
	upload(t, st, a)
	upload(t, st, b)
	now := time.Unix(1000, 0)
	budget := int64(len(a.pack)+len(a.idx)) + 1 // room for one pair
	c := openCache(t, t.TempDir(), st, WithMaxBytes(budget), WithClock(func() time.Time { return now }))
	relA := get(t, c, a)
	now = now.Add(time.Second)
	relB := get(t, c, b) // over budget, but both are held
	if s := c.Stats(); s.Packs != 2 || s.Evictions != 0 {
		t.Fatalf("stats = %+v, want both kept while held", s)
	}
	now = now.Add(time.Second)
	relA()
	if s := c.Stats(); s.Packs != 1 || s.Evictions != 1 {
		t.Fatalf("stats after release = %+v, want a evicted", s)
	}
	relB()
	if _, err := os.Stat(filepath.Join(c.Dir(), "packs", a.name+".pack")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("evicted pack file still present: %v", err)
	}
}

func TestPickVictimsOrder(t *testing.T) {
	t0 := time.Unix(0, 0)
	es := map[string]*entry{
		"old":    {name: "old", size: 10, lastUsed: t0},
		"mid":    {name: "mid", size: 10, lastUsed: t0.Add(time.Minute)},
		"held":   {name: "held", size: 10, lastUsed: t0, refs: 1},
		"recent": {name: "recent", size: 10, lastUsed: t0.Add(time.Hour)},
	}
	got := pickVictims(es, 40, 20, t0.Add(30*time.Minute))
	var names []string
	for _, e := range got {
		names = append(names, e.name)
	}
	// "held" is in use and "recent" not idle long enough: only two fit the
	// rules, and both are needed to get from 40 to 20.
	if strings.Join(names, ",") != "old,mid" {
		t.Fatalf("victims = %v, want old,mid", names)
	}
	if got := pickVictims(es, 40, 35, t0.Add(2*time.Hour)); len(got) != 1 || got[0].name != "old" {
		t.Fatalf("victims for a small overshoot = %v, want [old]", got)
	}
}

func TestStrayFilesRemovedAtOpen(t *testing.T) {
	fx := makePack(t, "k")
	dir := t.TempDir()
	c := openCache(t, dir, memstore.New())
	c.Close()
	stray := filepath.Join(dir, "packs", fx.name+".pack")
	if err := os.WriteFile(stray, fx.pack, 0o644); err != nil {
		t.Fatal(err)
	}
	c2 := openCache(t, dir, memstore.New())
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pack without idx survived Open: %v", err)
	}
	if s := c2.Stats(); s.Packs != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

// TestReverseIndexKeptBesideThePack: the pack's offset order is written
// once next to the cached pack, survives a restart, and goes with the pack.
func TestReverseIndexKeptBesideThePack(t *testing.T) {
	fx := makePack(t, "rev")
	st := memstore.New()
	upload(t, st, fx)
	dir := t.TempDir()
	c := openCache(t, dir, st)
	pk, ik := keys(fx)
	p, release, err := c.Get(context.Background(), pk, ik, fx.name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Entries(); err != nil { // needs the offset order
		t.Fatal(err)
	}
	release()
	rev := filepath.Join(dir, "packs", fx.name+".rev")
	if _, err := os.Stat(rev); err != nil {
		t.Fatalf("reverse index not written beside the pack: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := openCache(t, dir, st)
	if _, err := os.Stat(rev); err != nil {
		t.Fatalf("reverse index removed at restart as a stray: %v", err)
	}
	if err := c2.Remove(fx.name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(rev); !os.IsNotExist(err) {
		t.Fatalf("reverse index outlived its pack: %v", err)
	}
}

func TestMaxOpenClosesUnheldPacks(t *testing.T) {
	var fxs []fixture
	st := &countingStore{Store: memstore.New()}
	for _, seed := range []string{"m1", "m2", "m3", "m4", "m5"} {
		fx := makePack(t, seed)
		upload(t, st, fx)
		fxs = append(fxs, fx)
	}
	now := time.Unix(1000, 0)
	c := openCache(t, t.TempDir(), st, WithMaxOpen(2), WithClock(func() time.Time { return now }))
	held := get(t, c, fxs[0])
	for _, fx := range fxs[1:] {
		now = now.Add(time.Second)
		get(t, c, fx)()
	}
	// The held pack stays open; of the others only the newest fits.
	if s := c.Stats(); s.Open != 2 || s.Packs != 5 {
		t.Fatalf("stats = %+v, want 2 open of 5 cached", s)
	}
	held()
	// Closed packs are reopened from disk, not downloaded again.
	for _, fx := range fxs {
		get(t, c, fx)()
	}
	if s := c.Stats(); s.Open > 2 || s.Misses != 5 {
		t.Fatalf("stats after reopening = %+v, want at most 2 open and no new download", s)
	}
}

// TestMaxOpenTrims: the packs nobody holds (repositories gone cold) stay
// open within a quarter of the budget, so a node cycling through many
// repositories keeps a bounded number mapped; and over the budget the
// cache trims an eighth below it, so the scan of the open packs (a
// quarter of a node's CPU with 10,000 repositories when it ran on every
// release) does not repeat on the next release.
func TestMaxOpenTrims(t *testing.T) {
	const budget = 16
	st := &countingStore{Store: memstore.New()}
	now := time.Unix(1000, 0)
	c := openCache(t, t.TempDir(), st, WithMaxOpen(budget), WithClock(func() time.Time { return now }))
	next := 0
	getNew := func() func() {
		fx := makePack(t, fmt.Sprint("t", next))
		next++
		upload(t, st, fx)
		now = now.Add(time.Second)
		return get(t, c, fx)
	}
	for i := range budget {
		getNew()()
		if s := c.Stats(); s.Open > budget/4 {
			t.Fatalf("after %d unheld packs: %d open, want at most %d", i+1, s.Open, budget/4)
		}
	}
	if s := c.Stats(); s.Open != budget/4 {
		t.Fatalf("%d unheld packs open, want %d", s.Open, budget/4)
	}
	for range budget - budget/4 { // held: the budget is full
		defer getNew()()
	}
	getNew()() // over: trimmed to an eighth below
	if s := c.Stats(); s.Open != budget-budget/8 {
		t.Fatalf("after going over the budget: %d open, want %d", s.Open, budget-budget/8)
	}
}

// TestMaxOpenBoundsHeldPacks holds every pack, as a live pack set does,
// and reads them all in turn: the open descriptors stay within the
// budget, counted both by the cache and in /proc/self/fd, and a held
// pack removed from the cache (its files deleted) stays readable.
func TestMaxOpenBoundsHeldPacks(t *testing.T) {
	const budget = 2
	var fxs []fixture
	st := &countingStore{Store: memstore.New()}
	for i := range 6 {
		fx := makePack(t, fmt.Sprint("h", i))
		upload(t, st, fx)
		fxs = append(fxs, fx)
	}
	dir := t.TempDir()
	c := openCache(t, dir, st, WithMaxOpen(budget))
	var releases []func()
	for _, fx := range fxs {
		releases = append(releases, get(t, c, fx))
	}
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	for round := range 3 {
		for _, fx := range fxs {
			get(t, c, fx)() // reads every blob while all are held
		}
		if s := c.Stats(); s.Open != len(fxs) || s.Files > budget {
			t.Fatalf("round %d: stats = %+v, want %d packs open with at most %d files", round, s, len(fxs), budget)
		}
		if n := openFilesUnder(t, dir); n > budget {
			t.Fatalf("round %d: %d descriptors open under the cache dir, budget %d", round, n, budget)
		}
	}
	pk, ik := keys(fxs[0])
	p, release, err := c.Get(context.Background(), pk, ik, fxs[0].name)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := c.Remove(fxs[0].name); err != nil {
		t.Fatal(err)
	}
	for _, fx := range fxs[1:] {
		get(t, c, fx)() // pushes the removed pack's file out of the budget if it could
	}
	if _, _, err := p.ReadObject(firstID(fxs[0])); err != nil {
		t.Fatalf("read from a removed but held pack under a file budget: %v", err)
	}
}

// openFilesUnder counts this process's descriptors open on cached pack
// files under dir.
func openFilesUnder(t *testing.T, dir string) int {
	t.Helper()
	return len(tmpfs.OpenUnder(t, filepath.Join(dir, "packs")))
}

// dirNames lists a directory's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

func TestRangedDownloadIsByteIdentical(t *testing.T) {
	fx := makePack(t, "ranged")
	// Chunks far smaller than the pack: many ranged reads in flight.
	opt := WithParallel(objstore.ParallelOptions{Chunk: 64, Streams: 3})
	for _, tc := range []struct {
		name string
		rule *faultstore.Rule
	}{
		{"clean", nil},
		{"a ranged read fails to open", &faultstore.Rule{Ops: faultstore.OpGetRange, Times: 2}},
		{"a body breaks mid-chunk", &faultstore.Rule{Ops: faultstore.OpGetRange, CutBodyAfter: 10, Times: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := faultstore.New(memstore.New(), 1)
			upload(t, fs, fx)
			if tc.rule != nil {
				fs.AddRule(*tc.rule)
			}
			dir := t.TempDir()
			c := openCache(t, dir, fs, opt)
			get(t, c, fx)()
			if fs.Count(faultstore.OpGetRange) == 0 {
				t.Fatal("the pack was not read in ranges")
			}
			pp, ip := c.paths(fx.name)
			for path, want := range map[string][]byte{pp: fx.pack, ip: fx.idx} {
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s differs from the stored object", filepath.Base(path))
				}
			}
		})
	}
}

// chunkedCache stores a pack made from seed in a fault store, and opens a
// cache in dir that downloads it in 64-byte ranged reads over 3 streams.
func chunkedCache(t *testing.T, seed string) (fixture, *faultstore.Store, string, *Cache) {
	t.Helper()
	fx := makePack(t, seed)
	fs := faultstore.New(memstore.New(), 1)
	upload(t, fs, fx)
	dir := t.TempDir()
	return fx, fs, dir, openCache(t, dir, fs, WithParallel(objstore.ParallelOptions{Chunk: 64, Streams: 3}))
}

func TestRangedDownloadFailureLeavesNothing(t *testing.T) {
	fx, fs, dir, c := chunkedCache(t, "broken")
	// Every ranged read of the pack breaks after a few bytes: the retries
	// cannot cure it.
	id := fs.AddRule(faultstore.Rule{Ops: faultstore.OpGetRange, Prefix: "objects/o/r/pack/" + fx.name + ".pack", CutBodyAfter: 5})
	pk, ik := keys(fx)
	if _, _, err := c.Get(context.Background(), pk, ik, fx.name); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("Get through a broken store: %v, want the injected error", err)
	}
	if n := dirNames(t, filepath.Join(dir, "tmp")); len(n) != 0 {
		t.Fatalf("partial downloads left in tmp: %v", n)
	}
	if n := dirNames(t, filepath.Join(dir, "packs")); len(n) != 0 {
		t.Fatalf("files published from a failed download: %v", n)
	}
	if st := c.Stats(); st.Packs != 0 || st.Bytes != 0 {
		t.Fatalf("a failed download is counted: %+v", st)
	}
	// The store heals: the next Get downloads the pack whole.
	fs.RemoveRule(id)
	get(t, c, fx)()
	pp, _ := c.paths(fx.name)
	if got, err := os.ReadFile(pp); err != nil || !bytes.Equal(got, fx.pack) {
		t.Fatalf("pack after recovery: %v", err)
	}
}

// DropBaseCaches empties the delta base cache of every open pack, held or
// not, unless it was used too recently, and reads go on working.
func TestDropBaseCaches(t *testing.T) {
	st := memstore.New()
	a, b := makePack(t, "a"), makePack(t, "b")
	upload(t, st, a)
	upload(t, st, b)
	c := openCache(t, t.TempDir(), st)
	release := get(t, c, a) // held
	defer release()
	get(t, c, b)() // released, still open
	if n := c.DropBaseCaches(time.Hour); n != 0 {
		t.Fatalf("DropBaseCaches dropped %d bytes just used", n)
	}
	if n := c.DropBaseCaches(0); n == 0 {
		t.Fatal("DropBaseCaches after delta reads freed nothing")
	}
	if n := c.DropBaseCaches(0); n != 0 {
		t.Fatalf("second DropBaseCaches freed %d bytes, want 0", n)
	}
	get(t, c, a)()
}
