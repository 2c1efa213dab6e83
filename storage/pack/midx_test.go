package pack

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// blobPacks writes nPacks packs of perPack distinct blobs each, plus a
// blob every pack holds (its content differs by pack only in the set
// order that must win: it is the same object), and opens them.
func blobPacks(t testing.TB, nPacks, perPack int) ([]*Pack, [][]object.ID) {
	t.Helper()
	dir := t.TempDir()
	var packs []*Pack
	var ids [][]object.ID
	for pi := range nPacks {
		entries := []tEntry{whole(object.Blob, "shared by every pack\n")}
		pids := []object.ID{object.Hash(object.Blob, []byte("shared by every pack\n"))}
		for i := range perPack {
			data := fmt.Sprintf("pack %d blob %d\n", pi, i)
			entries = append(entries, whole(object.Blob, data))
			pids = append(pids, object.Hash(object.Blob, []byte(data)))
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
		ids = append(ids, pids)
	}
	return packs, ids
}

// TestMultiIndexMatchesPerPackLookup: the merged index finds every object
// in the pack a per-pack walk finds it in (the first in set order for an
// object in several packs), and misses what no pack holds.
func TestMultiIndexMatchesPerPackLookup(t *testing.T) {
	packs, ids := blobPacks(t, 5, 300)
	s := NewSet(packs...)
	mi := buildMultiIndex(s.packs)
	if want := 5*300 + 1; len(mi.ents) != want {
		t.Fatalf("multi-index has %d entries, want %d (duplicates once)", len(mi.ents), want)
	}
	for _, pids := range ids {
		for _, id := range pids {
			pi, pos, ok := mi.find(s.packs, id)
			wpi, wpos, wok := s.findEach(id)
			if !ok || pi != wpi || pos != wpos || !wok {
				t.Fatalf("find(%s) = %d %d %v, per pack %d %d %v", id, pi, pos, ok, wpi, wpos, wok)
			}
		}
	}
	if pi, _, _ := mi.find(s.packs, ids[3][0]); pi != 0 {
		t.Fatalf("object in every pack found in pack %d, want the first", pi)
	}
	for _, miss := range []object.ID{{}, object.Hash(object.Blob, []byte("absent")), object.MustID("ffffffffffffffffffffffffffffffffffffffff")} {
		if _, _, ok := mi.find(s.packs, miss); ok {
			t.Fatalf("found absent %s", miss)
		}
	}
	// Through the Set: past the threshold the lookups use the multi-index.
	for _, pids := range ids {
		for _, id := range pids {
			if _, data, err := s.ReadObject(id); err != nil || !bytes.HasSuffix(data, []byte("\n")) {
				t.Fatalf("ReadObject(%s): %v", id, err)
			}
		}
	}
	if s.multi.Load() == nil {
		t.Fatal("the Set never built its multi-index")
	}
}

// BenchmarkSetLookup compares finding objects across 12 packs (the most
// maintenance leaves) one search per pack and with the multi-index, for
// objects present (spread over the packs) and absent (a negotiation's
// haves the server lacks).
func BenchmarkSetLookup(b *testing.B) {
	packs, ids := blobPacks(b, 12, 20000)
	s := NewSet(packs...)
	mi := buildMultiIndex(s.packs)
	var present []object.ID
	for _, pids := range ids {
		present = append(present, pids...)
	}
	absent := make([]object.ID, 4096)
	for i := range absent {
		absent[i] = object.Hash(object.Blob, []byte(fmt.Sprint("absent ", i)))
	}
	for _, c := range []struct {
		name string
		ids  []object.ID
	}{{"present", present}, {"absent", absent}} {
		b.Run(c.name+"/per-pack", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				s.findEach(c.ids[i%len(c.ids)])
			}
		})
		b.Run(c.name+"/multi-index", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				mi.find(s.packs, c.ids[i%len(c.ids)])
			}
		})
	}
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			buildMultiIndex(s.packs)
		}
	})
}
