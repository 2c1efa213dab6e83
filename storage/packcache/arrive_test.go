package packcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/testkit/tmpfs"
)

// TestGetArrivingReadsWhileDownloading holds every ranged read of the
// pack: GetArriving returns the pack anyway (its index is whole), a
// second caller shares it without a second download, and once the rest
// arrives the reads succeed and the files are published.
func TestGetArrivingReadsWhileDownloading(t *testing.T) {
	fx, fs, _, c := chunkedCache(t, "arriving")
	pk, ik := keys(fx)
	gate := fs.HoldKeys(faultstore.OpGetRange, pk, "")
	defer gate.Release()
	ctx := context.Background()
	p, release, err := c.GetArriving(ctx, pk, ik, fx.name)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := gate.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	pp, _ := c.paths(fx.name)
	if _, err := os.Stat(pp); !errors.Is(err, os.ErrNotExist) || p.Arrival() == nil {
		t.Fatalf("pack published (%v) or not arriving while its ranged reads are held", err)
	}
	p2, release2, err := c.GetArriving(ctx, pk, ik, fx.name)
	if err != nil {
		t.Fatal(err)
	}
	release2()
	if p2 != p || fs.Count(faultstore.OpGet) != 2 {
		t.Fatalf("second caller: same pack %v, store Gets %d; want the shared download (2 Gets)", p2 == p, fs.Count(faultstore.OpGet))
	}
	gate.Release()
	// Get waits for the whole file; the blobs lie past the first chunk.
	get(t, c, fx)()
	if got, err := os.ReadFile(pp); err != nil || len(got) != len(fx.pack) {
		t.Fatalf("published pack: %d bytes, %v; want %d", len(got), err, len(fx.pack))
	}
	if err := p.Arrival().Err(); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Misses != 1 || s.Packs != 1 {
		t.Fatalf("stats = %+v, want one download of one pack", s)
	}
}

// TestGetArrivingFailureMidPack breaks every ranged read of the pack after
// GetArriving returned it: reads past the first chunk fail with the
// store's error, the cache keeps no file, and once the store heals the
// next Get downloads the pack whole.
func TestGetArrivingFailureMidPack(t *testing.T) {
	fx, fs, dir, c := chunkedCache(t, "arriving-broken")
	pk, ik := keys(fx)
	id := fs.AddRule(faultstore.Rule{Ops: faultstore.OpGetRange, Prefix: pk, CutBodyAfter: 5})
	// The ranged reads break only once the pack is open.
	gate := fs.HoldKeys(faultstore.OpGetRange, pk, "")
	p, release, err := c.GetArriving(context.Background(), pk, ik, fx.name)
	gate.Release()
	if err != nil {
		t.Fatal(err)
	}
	for id := range fx.blobs {
		if _, _, err := p.ReadObject(id); !errors.Is(err, faultstore.ErrInjected) {
			t.Fatalf("reading %s from a pack whose download broke: %v, want the injected error", id, err)
		}
	}
	release()
	// Get sees the failure too (this download's, or its own retry's).
	if _, _, err := c.Get(context.Background(), pk, ik, fx.name); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("Get through a broken store: %v, want the injected error", err)
	}
	for _, sub := range []string{"tmp", "packs"} {
		if n := dirNames(t, filepath.Join(dir, sub)); len(n) != 0 {
			t.Fatalf("files left in %s by failed downloads: %v", sub, n)
		}
		if fds := tmpfs.OpenUnder(t, filepath.Join(dir, sub)); len(fds) != 0 {
			t.Fatalf("descriptors left open in %s by failed downloads: %v", sub, fds)
		}
	}
	if st := c.Stats(); st.Packs != 0 || st.Bytes != 0 || st.InUse != 0 {
		t.Fatalf("a failed download is counted: %+v", st)
	}
	fs.RemoveRule(id)
	get(t, c, fx)()
}
