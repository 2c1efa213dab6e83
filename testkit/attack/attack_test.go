package attack

import (
	"bytes"
	"context"
	"testing"

	"github.com/rgit/rgit/storage/pack"
)

// The bomb is a valid pack that declares what it says: with no limit the
// indexer resolves it to a blob of copies×baseSize bytes.
func TestDeltaBomb(t *testing.T) {
	const baseSize, copies = 1<<24 + 5, 3 // two copy instructions per copy
	p, blob := DeltaBomb(baseSize, copies)
	if len(p) > 64<<10 {
		t.Fatalf("bomb pack is %d bytes", len(p))
	}
	ix, err := pack.IndexPack(context.Background(), bytes.NewReader(p), t.TempDir(), pack.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Objects) != 2 || ix.Objects[0].ID != blob || ix.Objects[0].Size != baseSize || ix.Objects[1].Size != baseSize*copies {
		t.Fatalf("indexed %+v, want the %d-byte blob %s and a %d-byte result", ix.Objects, baseSize, blob, baseSize*copies)
	}
}
