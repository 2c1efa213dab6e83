package pack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// revFixture copies the shared fixture's pack and index into a fresh
// directory, so tests can put reverse index files next to them.
func revFixture(t *testing.T) (packPath, idxPath string) {
	t.Helper()
	f := sharedFixture(t)
	dir := t.TempDir()
	packPath, idxPath = filepath.Join(dir, "x.pack"), filepath.Join(dir, "x.idx")
	for src, dst := range map[string]string{f.packPath: packPath, f.idxPath: idxPath} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return packPath, idxPath
}

// sortedOrder is the offset order by a plain comparison sort.
func sortedOrder(idx *Index) []uint32 {
	order := make([]uint32, idx.Count())
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return cmpInt64(idx.Offset(int(a)), idx.Offset(int(b))) })
	return order
}

func openRev(t *testing.T, packPath, idxPath, revPath string) *Pack {
	t.Helper()
	p, err := OpenWith(packPath, idxPath, OpenOptions{RevPath: revPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// checkEntries asserts that p serves the true offset order.
func checkEntries(t *testing.T, p *Pack) {
	t.Helper()
	es, err := p.Entries()
	if err != nil {
		t.Fatal(err)
	}
	want := sortedOrder(p.Index())
	if len(es) != len(want) {
		t.Fatalf("%d entries, want %d", len(es), len(want))
	}
	for i, pos := range want {
		if es[i].ID != p.Index().ID(int(pos)) {
			t.Fatalf("entry %d is %s, want %s", i, es[i].ID, p.Index().ID(int(pos)))
		}
	}
}

// The file written on first use is byte-identical to the one git writes
// (`git index-pack --rev-index`), and git accepts it.
func TestRevIndexWrittenLikeGit(t *testing.T) {
	packPath, idxPath := revFixture(t)
	revPath := RevPathFor(packPath)
	if revPath != filepath.Join(filepath.Dir(packPath), "x.rev") {
		t.Fatalf("RevPathFor = %s", revPath)
	}
	checkEntries(t, openRev(t, packPath, idxPath, revPath))
	ours, err := os.ReadFile(revPath)
	if err != nil {
		t.Fatalf("reverse index not written: %v", err)
	}
	gitDir := t.TempDir()
	gp := filepath.Join(gitDir, "g.pack")
	b, _ := os.ReadFile(packPath)
	if err := os.WriteFile(gp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, gitDir, nil, "index-pack", "--rev-index", gp)
	theirs, err := os.ReadFile(filepath.Join(gitDir, "g.rev"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, theirs) {
		t.Fatalf("reverse index differs from git's (%d vs %d bytes)", len(ours), len(theirs))
	}
}

// A valid file is read, not rebuilt: the second open leaves it alone.
func TestRevIndexReused(t *testing.T) {
	packPath, idxPath := revFixture(t)
	revPath := RevPathFor(packPath)
	checkEntries(t, openRev(t, packPath, idxPath, revPath))
	before, err := os.Stat(revPath)
	if err != nil {
		t.Fatal(err)
	}
	p := openRev(t, packPath, idxPath, revPath)
	checkEntries(t, p)
	after, err := os.Stat(revPath)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("valid reverse index was replaced")
	}
	order, err := readRevIndex(revPath, p)
	if err != nil || !slices.Equal(order, sortedOrder(p.Index())) {
		t.Fatalf("readRevIndex: %v", err)
	}
}

// Every kind of damage is detected on load; the pack still serves the
// true order and the file is replaced by a good one.
func TestRevIndexCorrupt(t *testing.T) {
	packPath, idxPath := revFixture(t)
	revPath := RevPathFor(packPath)
	p := openRev(t, packPath, idxPath, revPath)
	checkEntries(t, p)
	good, err := os.ReadFile(revPath)
	if err != nil {
		t.Fatal(err)
	}
	n := p.Index().Count()
	pos := func(b []byte, i int) []byte { return b[revHeaderLen+4*i:] }
	for name, damage := range map[string]func(b []byte) []byte{
		"empty":         func([]byte) []byte { return nil },
		"truncated":     func(b []byte) []byte { return b[:len(b)-1] },
		"one entry cut": func(b []byte) []byte { return append(b[:revHeaderLen+4*(n-1)], b[revHeaderLen+4*n:]...) },
		"signature":     func(b []byte) []byte { b[0] ^= 1; return b },
		"version":       func(b []byte) []byte { b[7] = 2; return b },
		"hash id":       func(b []byte) []byte { b[11] = 2; return b },
		"other pack":    func(b []byte) []byte { b[len(b)-2*20] ^= 1; return b },
		"swapped": func(b []byte) []byte {
			x, y := binary.BigEndian.Uint32(pos(b, 3)), binary.BigEndian.Uint32(pos(b, 4))
			binary.BigEndian.PutUint32(pos(b, 3), y)
			binary.BigEndian.PutUint32(pos(b, 4), x)
			return b
		},
		"duplicate": func(b []byte) []byte { copy(pos(b, 5), pos(b, 4)[:4]); return b },
		"past count": func(b []byte) []byte {
			binary.BigEndian.PutUint32(pos(b, n-1), uint32(n))
			return b
		},
	} {
		t.Run(name, func(t *testing.T) {
			bad := damage(bytes.Clone(good))
			if err := os.WriteFile(revPath, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := readRevIndex(revPath, p); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("damaged file loaded: %v", err)
			}
			checkEntries(t, openRev(t, packPath, idxPath, revPath))
			if got, _ := os.ReadFile(revPath); !bytes.Equal(got, good) {
				t.Fatal("damaged reverse index not replaced")
			}
		})
	}
}

// A reverse index that cannot be written costs a sort, not the read.
func TestRevIndexUnwritable(t *testing.T) {
	packPath, idxPath := revFixture(t)
	revPath := filepath.Join(t.TempDir(), "missing-dir", "x.rev")
	checkEntries(t, openRev(t, packPath, idxPath, revPath))
	if _, err := os.Stat(revPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat %s: %v", revPath, err)
	}
}

// Processes (here: Packs) opening the same pack at once race to write the
// file; every one serves the true order and the file ends up whole.
func TestRevIndexConcurrentOpen(t *testing.T) {
	packPath, idxPath := revFixture(t)
	revPath := RevPathFor(packPath)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := OpenWith(packPath, idxPath, OpenOptions{RevPath: revPath})
			if err != nil {
				errs <- err
				return
			}
			defer p.Close()
			for range 2 { // and callers of one Pack race on the Once
				if _, err := p.Entries(); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	p := openRev(t, packPath, idxPath, revPath)
	if _, err := readRevIndex(revPath, p); err != nil {
		t.Fatalf("file after concurrent writers: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(revPath), ".tmp-rev-*"))
	if len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
}

// Loading the reverse index must be cheaper than the sort it replaces.
// RGIT_BENCH_PACK names a real pack (see bench_test.go).
func BenchmarkOffsetOrder(b *testing.B) {
	packPath, idxPath := benchPack(b)
	revPath := filepath.Join(b.TempDir(), "x.rev")
	open := func(rev string) *Pack {
		p, err := OpenWith(packPath, idxPath, OpenOptions{RevPath: rev})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	for _, bc := range []struct {
		name string
		rev  string
	}{{"sort", ""}, {"revfile", revPath}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				p := open(bc.rev)
				if _, err := p.offsetOrder(); err != nil {
					b.Fatal(err)
				}
				p.Close()
			}
		})
	}
}
