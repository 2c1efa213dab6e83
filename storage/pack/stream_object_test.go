package pack

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/rgit/rgit/storage/object"
)

// TestOpenObjectMatchesReadObject: every object of a pack with deltas
// streams to the same type and bytes ReadObject returns, whole objects
// straight from the pack file; an unknown id is ErrNotFound.
func TestOpenObjectMatchesReadObject(t *testing.T) {
	p := openFixture(t, sharedFixture(t))
	set := NewSet(p)
	for i := range p.Index().Count() {
		id := p.Index().ID(i)
		wt, want, err := set.ReadObject(id)
		if err != nil {
			t.Fatal(err)
		}
		typ, size, rc, err := set.OpenObject(id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || typ != wt || size != int64(len(want)) || !bytes.Equal(got, want) {
			t.Fatalf("%s: OpenObject = %v %d %d bytes, %v; ReadObject = %v %d bytes", id, typ, size, len(got), err, wt, len(want))
		}
	}
	if _, _, _, err := set.OpenObject(object.ID{1}); !errors.Is(err, object.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}
