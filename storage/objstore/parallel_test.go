package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/testkit/faultstore"
)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestGetParallel(t *testing.T) {
	ctx := context.Background()
	data := randomBytes(1<<20 + 12345)
	opt := objstore.ParallelOptions{Chunk: 64 << 10, Streams: 4}
	chunks := int64(len(data)+int(opt.Chunk)-1) / opt.Chunk
	for _, tc := range []struct {
		name   string
		rule   *faultstore.Rule
		ranged int64 // GetRange calls expected
		fail   bool
	}{
		{name: "clean", ranged: chunks - 1},
		{name: "one open fails", rule: &faultstore.Rule{Ops: faultstore.OpGetRange, Times: 1}, ranged: chunks},
		{name: "one body cut mid-chunk", rule: &faultstore.Rule{Ops: faultstore.OpGetRange, CutBodyAfter: 1000, Times: 1}, ranged: chunks},
		{name: "first body cut", rule: &faultstore.Rule{Ops: faultstore.OpGet, CutBodyAfter: 1000, Times: 1}, ranged: chunks},
		{name: "store broken", rule: &faultstore.Rule{Ops: faultstore.OpGetRange, FailBefore: 1}, fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := faultstore.New(memstore.New(), 1)
			if err := fs.Put(ctx, "k", bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			if tc.rule != nil {
				fs.AddRule(*tc.rule)
			}
			rc, info, err := objstore.GetParallel(ctx, fs, "k", opt)
			if err != nil {
				t.Fatal(err)
			}
			if info.Size != int64(len(data)) {
				t.Fatalf("size %d, want %d", info.Size, len(data))
			}
			got, err := io.ReadAll(rc)
			if cerr := rc.Close(); cerr != nil {
				t.Fatal(cerr)
			}
			if tc.fail {
				if !errors.Is(err, faultstore.ErrInjected) {
					t.Fatalf("read through a broken store: %v, want the injected error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("got %d bytes, not the object's %d", len(got), len(data))
			}
			if n := fs.Count(faultstore.OpGetRange); n != tc.ranged {
				t.Fatalf("%d ranged reads, want %d", n, tc.ranged)
			}
		})
	}
}

func TestGetParallelSmallIsOneGet(t *testing.T) {
	ctx := context.Background()
	fs := faultstore.New(memstore.New(), 1)
	if err := fs.Put(ctx, "k", bytes.NewReader([]byte("small")), 5); err != nil {
		t.Fatal(err)
	}
	rc, _, err := objstore.GetParallel(ctx, fs, "k", objstore.ParallelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "small" || fs.Count(faultstore.OpGetRange) != 0 {
		t.Fatalf("got %q with %d ranged reads", b, fs.Count(faultstore.OpGetRange))
	}
}

func TestGetParallelCloseEarly(t *testing.T) {
	ctx := context.Background()
	data := randomBytes(1 << 20)
	fs := faultstore.New(memstore.New(), 1)
	if err := fs.Put(ctx, "k", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	// Held reads: Close must cancel them rather than wait for the store.
	g := fs.Hold(faultstore.OpGetRange, "k")
	defer g.Release()
	rc, _, err := objstore.GetParallel(ctx, fs, "k", objstore.ParallelOptions{Chunk: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(rc, buf); err != nil || !bytes.Equal(buf, data[:10]) {
		t.Fatalf("first bytes: %v", err)
	}
	rc.Close()
}
