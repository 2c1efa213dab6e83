package packcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/testkit/tmpfs"
)

// fullCache opens a cache on a small tmpfs holding fx in its store, then
// fills the tmpfs; removing the returned filler frees the space again.
func fullCache(t *testing.T, fx fixture, opts ...Option) (c *Cache, dir, filler string) {
	t.Helper()
	dir = tmpfs.Mount(t, 1<<20)
	st := memstore.New()
	upload(t, st, fx)
	c = openCache(t, dir, st, opts...)
	filler = filepath.Join(dir, "filler")
	tmpfs.Fill(t, filler)
	return c, dir, filler
}

// TestFullDiskServesFromStore: with no room on the cache disk a Get is
// served anyway, from memory and uncached: no file and no descriptor in
// the cache directory, the disk reported full and the write error
// counted; once space is freed the next Get caches the pack again.
func TestFullDiskServesFromStore(t *testing.T) {
	fx := makePack(t, "full")
	c, dir, filler := fullCache(t, fx)
	release := get(t, c, fx)
	pk, ik := keys(fx)
	p, release2, err := c.Get(context.Background(), pk, ik, fx.name)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Uncached(p) {
		t.Fatal("a pack served around a full disk is not reported Uncached")
	}
	release2()
	if err := c.DiskFull(); !NoSpace(err) {
		t.Fatalf("DiskFull() = %v, want the cause (no space)", err)
	}
	if st := c.Stats(); st.WriteErrors != 2 || st.Packs != 0 || st.Misses != 2 {
		t.Fatalf("stats = %+v, want 2 write errors, 2 misses (each Get its own copy) and nothing cached", st)
	}
	if fds := tmpfs.OpenUnder(t, filepath.Join(dir, "tmp")); len(fds) != 0 {
		t.Fatalf("descriptors left open in the cache's temp dir: %v", fds)
	}
	release()
	if c.memUsed != 0 || c.Uncached(p) {
		t.Fatalf("memory fallback holds %d bytes (pack still uncached: %v) after the last release", c.memUsed, c.Uncached(p))
	}
	for _, sub := range []string{"tmp", "packs"} {
		if n := dirNames(t, filepath.Join(dir, sub)); len(n) != 0 {
			t.Fatalf("files left in %s: %v", sub, n)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	get(t, c, fx)()
	if st := c.Stats(); st.Packs != 1 || c.DiskFull() != nil {
		t.Fatalf("after freeing space: stats %+v, disk full %v; want the pack cached", st, c.DiskFull())
	}
}

// TestFullDiskWithoutFallbackFails: with the memory fallback off (or
// spent) the Get fails with ErrDiskFull, leaving nothing behind.
func TestFullDiskWithoutFallbackFails(t *testing.T) {
	fx := makePack(t, "nofallback")
	c, dir, _ := fullCache(t, fx, WithMemoryFallback(0))
	pk, ik := keys(fx)
	if _, _, err := c.Get(context.Background(), pk, ik, fx.name); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Get on a full disk without fallback: %v, want ErrDiskFull", err)
	}
	if fds := tmpfs.OpenUnder(t, filepath.Join(dir, "tmp")); len(fds) != 0 {
		t.Fatalf("descriptors left open in the cache's temp dir: %v", fds)
	}
	if n := dirNames(t, filepath.Join(dir, "tmp")); len(n) != 0 {
		t.Fatalf("files left in tmp: %v", n)
	}
}

// TestFullDiskEvictsUnheldPacks: a pack that does not fit makes room by
// evicting unheld packs (regardless of WithMinIdle) and is cached.
func TestFullDiskEvictsUnheldPacks(t *testing.T) {
	big, small := makePack(t, "a much longer seed so that this pack is the bigger one"), makePack(t, "s")
	dir := tmpfs.Mount(t, 1<<20)
	st := memstore.New()
	upload(t, st, big)
	upload(t, st, small)
	c := openCache(t, dir, st, WithMinIdle(1<<40))
	get(t, c, big)()
	tmpfs.Fill(t, filepath.Join(dir, "filler"))
	get(t, c, small)()
	if s := c.Stats(); s.Packs != 1 || s.Evictions != 1 || s.WriteErrors != 1 {
		t.Fatalf("stats = %+v, want the big pack evicted for the small one", s)
	}
	if !c.fileExists(small.name) || c.fileExists(big.name) {
		t.Fatalf("cached: small %v, big %v; want only the small pack", c.fileExists(small.name), c.fileExists(big.name))
	}
}
