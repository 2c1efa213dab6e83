package pack

import (
	"bytes"
	"crypto"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/go-git/go-git/v6/plumbing"
	"github.com/go-git/go-git/v6/plumbing/format/idxfile"
	ghash "github.com/go-git/go-git/v6/plumbing/hash"
	"github.com/rgit/rgit/storage/object"
)

func openFixture(t *testing.T, fx *fixture) *Pack {
	t.Helper()
	p, err := Open(fx.packPath, fx.idxPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestIndexMatchesGoGit(t *testing.T) {
	fx := sharedFixture(t)
	idx, err := OpenIndex(fx.idxPath)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	if err := idx.Verify(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(fx.idxPath)
	defer f.Close()
	oracle := idxfile.NewMemoryIndex(20)
	if err := idxfile.NewDecoder(f, ghash.New(crypto.SHA1)).Decode(oracle); err != nil {
		t.Fatal(err)
	}
	n, _ := oracle.Count()
	if int64(idx.Count()) != n {
		t.Fatalf("count %d, go-git %d", idx.Count(), n)
	}
	for i := 0; i < idx.Count(); i++ {
		id := idx.ID(i)
		h := plumbing.NewHash(id.String())
		off, err := oracle.FindOffset(h)
		if err != nil {
			t.Fatalf("go-git lacks %s", id)
		}
		crc, _ := oracle.FindCRC32(h)
		if got, _ := idx.Lookup(id); got != off || idx.Offset(i) != off || idx.CRC(i) != crc {
			t.Fatalf("%s: offset %d crc %08x, go-git %d %08x", id, got, idx.CRC(i), off, crc)
		}
	}
	if _, ok := idx.Lookup(object.ID{0xff, 0xff}); ok {
		t.Fatal("lookup of absent id succeeded")
	}
}

func TestReadObjectMatchesCatFile(t *testing.T) {
	fx := sharedFixture(t)
	p := openFixture(t, fx)
	want := catFileAll(t, fx.dir)
	if len(want) != p.Index().Count() {
		t.Fatalf("pack has %d objects, git %d", p.Index().Count(), len(want))
	}
	for id, o := range want {
		typ, data, err := p.ReadObject(id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if typ != o.typ || !bytes.Equal(data, o.data) {
			t.Fatalf("%s: got %v/%d bytes, want %v/%d", id, typ, len(data), o.typ, len(o.data))
		}
		ht, hs, err := p.ReadHeader(id)
		if err != nil || ht != o.typ || hs != int64(len(o.data)) {
			t.Fatalf("ReadHeader %s: %v %d %v, want %v %d", id, ht, hs, err, o.typ, len(o.data))
		}
	}
	set := NewSet(p)
	if _, _, err := set.ReadObject(object.ID{1}); !errors.Is(err, object.ErrNotFound) {
		t.Fatalf("absent object: %v", err)
	}
}

// A tiny cache forces evictions and re-reads; concurrent readers must still
// get correct content (run with -race).
func TestReadObjectConcurrentSmallCache(t *testing.T) {
	fx := sharedFixture(t)
	p, err := OpenWith(fx.packPath, fx.idxPath, OpenOptions{CacheBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := catFileAll(t, fx.dir)
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id, o := range want {
				_, data, err := p.ReadObject(id)
				if err != nil {
					errc <- err
					return
				}
				if !bytes.Equal(data, o.data) {
					errc <- errors.New("content mismatch for " + id.String())
					return
				}
				if len(data) > 0 {
					data[0] ^= 0xff // callers own the slice; must not poison the cache
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func TestOpenRejectsMismatchedIndex(t *testing.T) {
	fx := sharedFixture(t)
	dir := t.TempDir()
	data, _ := os.ReadFile(fx.packPath)
	data[len(data)-1] ^= 1
	bad := dir + "/bad.pack"
	os.WriteFile(bad, data, 0o644)
	if _, err := Open(bad, fx.idxPath); !errors.Is(err, ErrChecksum) {
		t.Fatalf("got %v, want ErrChecksum", err)
	}
	idx, _ := os.ReadFile(fx.idxPath)
	badIdx := dir + "/bad.idx"
	os.WriteFile(badIdx, idx[:len(idx)/2], 0o644)
	if _, err := OpenIndex(badIdx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated idx: got %v, want ErrCorrupt", err)
	}
}
