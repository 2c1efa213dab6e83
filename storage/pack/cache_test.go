package pack

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/storage/object"
)

// TestBaseCacheSharedAcrossPacks: packs opened with one BaseCache keep
// their bases within its budget together, and read correctly meanwhile.
func TestBaseCacheSharedAcrossPacks(t *testing.T) {
	fx := sharedFixture(t)
	const limit = 64 << 10
	bases := NewBaseCache(limit, time.Hour)
	want := catFileAll(t, fx.dir)
	var wg sync.WaitGroup
	for range 3 {
		p, err := OpenWith(fx.packPath, fx.idxPath, OpenOptions{Bases: bases})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id, o := range want {
				if _, data, err := p.ReadObject(id); err != nil || !bytes.Equal(data, o.data) {
					t.Errorf("read %s: %v (content equal: %t)", id, err, bytes.Equal(data, o.data))
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := bases.Bytes(); got == 0 || got > limit {
		t.Fatalf("shared cache holds %d bytes, want some and at most %d", got, limit)
	}
}

// TestReadShared: ReadShared reads what ReadObject does, keeps every
// object it read (within the budget) so that the next read of it is the
// kept slice itself, and a missing id is ErrNotFound.
func TestReadShared(t *testing.T) {
	fx := sharedFixture(t)
	bases := NewBaseCache(DefaultCacheBytes, time.Hour)
	p, err := OpenWith(fx.packPath, fx.idxPath, OpenOptions{Bases: bases})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	set := NewSet(p)
	for id, o := range catFileAll(t, fx.dir) {
		typ, data, err := set.ReadShared(id)
		if err != nil || typ != o.typ || !bytes.Equal(data, o.data) {
			t.Fatalf("read %s: %v (type %v, want %v; content equal: %t)", id, err, typ, o.typ, bytes.Equal(data, o.data))
		}
		if len(data) == 0 {
			continue
		}
		if _, again, err := set.ReadShared(id); err != nil || &again[0] != &data[0] {
			t.Fatalf("read %s again: %v; the kept slice: %t", id, err, err == nil && &again[0] == &data[0])
		}
	}
	if _, _, err := set.ReadShared(object.ID{1}); !errors.Is(err, object.ErrNotFound) {
		t.Errorf("a missing id: %v", err)
	}
}

// TestBaseCacheIdleRelease: a base unused for the idle time is dropped by
// the cache's timer, with no read to trigger it; one used meanwhile stays
// for the idle time after that use.
func TestBaseCacheIdleRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewBaseCache(1<<20, time.Minute)
		a, b := baseKey{1, 12}, baseKey{2, 12}
		c.put(a, object.Blob, make([]byte, 100))
		c.put(b, object.Blob, make([]byte, 200))
		time.Sleep(40 * time.Second)
		if _, _, ok := c.get(a); !ok {
			t.Fatal("base dropped before its idle time")
		}
		time.Sleep(30 * time.Second) // b idle 70 s, a 30 s
		synctest.Wait()
		if _, _, ok := c.get(b); ok || c.Bytes() != 100 {
			t.Fatalf("after b's idle time: b cached %t, %d bytes, want only a's 100", ok, c.Bytes())
		}
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if n := c.Bytes(); n != 0 {
			t.Fatalf("%d bytes cached after everything went idle", n)
		}
		// Reads of a pack fill it again and it empties again.
		fx := sharedFixture(t)
		p, err := OpenWith(fx.packPath, fx.idxPath, OpenOptions{Bases: c})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for id := range catFileAll(t, fx.dir) {
			if _, _, err := p.ReadObject(id); err != nil {
				t.Fatal(err)
			}
		}
		if c.Bytes() == 0 {
			t.Fatal("reading the pack cached no base")
		}
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if n := c.Bytes(); n != 0 {
			t.Fatalf("%d bytes cached a minute after the last read", n)
		}
	})
}

// TestOwnBaseCacheEmptiedOnClose: a pack with a cache of its own (no
// shared one) frees its bases when closed, not an idle period later.
func TestOwnBaseCacheEmptiedOnClose(t *testing.T) {
	fx := sharedFixture(t)
	p, err := OpenWith(fx.packPath, fx.idxPath, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for id := range catFileAll(t, fx.dir) {
		if _, _, err := p.ReadObject(id); err != nil {
			t.Fatal(err)
		}
	}
	if p.cache.Bytes() == 0 {
		t.Fatal("reading the pack cached no base")
	}
	p.Close()
	if n := p.cache.Bytes(); n != 0 {
		t.Fatalf("%d bytes of bases left after Close", n)
	}
}
