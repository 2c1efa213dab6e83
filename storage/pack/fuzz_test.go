package pack

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// FuzzApplyDelta: ApplyDelta must never panic, and a successful result has
// exactly the declared size.
func FuzzApplyDelta(f *testing.F) {
	f.Add([]byte("abcdef"), makeDelta([]byte("abcdef"), []byte("abcxyz")))
	f.Add([]byte("abc"), []byte{3, 3, 0x90, 3})
	f.Add([]byte{}, []byte{0, 1, 1, 'x'})
	f.Add([]byte("0123456789"), append([]byte{10, 6}, appendCopy(nil, 2, 6)...))
	f.Fuzz(func(t *testing.T, base, delta []byte) {
		out, err := applyDelta(base, delta, 1<<20)
		if err != nil {
			return
		}
		_, rs, _, _ := DeltaSizes(delta)
		if int64(len(out)) != rs {
			t.Fatalf("result %d bytes, declared %d", len(out), rs)
		}
	})
}

// FuzzIndexPack: the indexer must reject bad input with an error, never a
// panic or a hang, and whatever it accepts must read back consistently.
func FuzzIndexPack(f *testing.F) {
	const base = "some base content for the delta\n"
	f.Add(buildPack(whole(object.Blob, base), ofsD(0, deltaOf(base, base+"tail\n"))))
	f.Add(buildPack(whole(object.Commit, "tree 0\n"), refD(object.Hash(object.Commit, []byte("tree 0\n")), deltaOf("tree 0\n", "tree 1\n"))))
	f.Add(buildPack(whole(object.Tree, ""), whole(object.Tag, "t")))
	f.Add(buildPack())
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, pack []byte) {
		res, err := IndexPack(context.Background(), bytes.NewReader(pack), dir, IndexOptions{MaxObjectSize: 1 << 20, MaxDeltaDepth: 50})
		if err != nil {
			return
		}
		defer os.Remove(res.PackPath)
		defer os.Remove(res.IdxPath)
		p, err := Open(res.PackPath, res.IdxPath)
		if err != nil {
			t.Fatalf("indexed pack does not open: %v", err)
		}
		defer p.Close()
		for _, o := range res.Objects {
			typ, data, err := p.ReadObject(o.ID)
			if err != nil || typ != o.Type || int64(len(data)) != o.Size || object.Hash(typ, data) != o.ID {
				t.Fatalf("%s: read back %v %d bytes: %v", o.ID, typ, len(data), err)
			}
		}
	})
}
