package pack

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/object"
)

// Drop gives back the inflated bases a read cached, unless they were used
// too recently, and the pack reads the same objects afterwards.
func TestBaseCacheDrop(t *testing.T) {
	base := bytes.Repeat([]byte("base line\n"), 100)
	result := append(bytes.Clone(base), "one more line\n"...)
	ix, err := IndexPack(context.Background(), bytes.NewReader(buildPack(whole(object.Blob, string(base)), ofsD(0, makeDelta(base, result)))), t.TempDir(), IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bases := NewBaseCache(0, 0)
	p, err := OpenWith(ix.PackPath, ix.IdxPath, OpenOptions{Bases: bases})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	id := object.Hash(object.Blob, result)
	read := func() {
		t.Helper()
		if typ, data, err := p.ReadObject(id); err != nil || typ != object.Blob || !bytes.Equal(data, result) {
			t.Fatalf("ReadObject(%s) = %v, %d bytes, %v", id, typ, len(data), err)
		}
	}
	read() // caches the delta's base
	if n := bases.Drop(time.Hour); n != 0 {
		t.Fatalf("Drop of bases just used = %d bytes, want 0 (kept)", n)
	}
	if n := bases.Drop(0); n != int64(len(base)) {
		t.Fatalf("Drop after a delta read = %d bytes, want the base's %d", n, len(base))
	}
	if n := bases.Drop(0); n != 0 {
		t.Fatalf("second Drop = %d bytes, want 0", n)
	}
	read()
}
