package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// TestGetParallelStaysWithinBudget runs more concurrent reads than the
// budget has room for, with their ranged reads held at first so that all
// of them want buffers at once: together they never hold more than the
// budget, every read still completes with the right bytes, and all room
// is returned.
func TestGetParallelStaysWithinBudget(t *testing.T) {
	ctx := context.Background()
	fs := faultstore.New(memstore.New(), 1)
	const reads = 4
	var objs [reads][]byte
	for i := range objs {
		objs[i] = randomBytes(1<<20 + i*1000)
		if err := fs.Put(ctx, fmt.Sprint("k", i), bytes.NewReader(objs[i]), int64(len(objs[i]))); err != nil {
			t.Fatal(err)
		}
	}
	const chunk = 64 << 10
	budget := objstore.NewChunkBudget(3 * chunk) // less than one read's 4 streams
	opt := objstore.ParallelOptions{Chunk: chunk, Streams: 4, Budget: budget}
	gate := fs.Hold(faultstore.OpGetRange, "k")
	defer gate.Release()
	errs := make(chan error, reads)
	for i := range reads {
		go func() {
			rc, _, err := objstore.GetParallel(ctx, fs, fmt.Sprint("k", i), opt)
			if err != nil {
				errs <- err
				return
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err == nil && !bytes.Equal(got, objs[i]) {
				err = fmt.Errorf("read %d: got %d bytes, not the object's %d", i, len(got), len(objs[i]))
			}
			errs <- err
		}()
	}
	if err := gate.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	gate.Release()
	for range reads {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if p := budget.Peak(); p > 3*chunk || p == 0 {
		t.Fatalf("peak chunk memory %d bytes, budget %d", p, 3*chunk)
	}
	if n := budget.InUse(); n != 0 {
		t.Fatalf("%d bytes of the budget still held after every read closed", n)
	}
}

// TestGetParallelCloseFreesBudget closes reads mid-object: their chunks'
// room returns to the budget.
func TestGetParallelCloseFreesBudget(t *testing.T) {
	ctx := context.Background()
	fs := faultstore.New(memstore.New(), 1)
	data := randomBytes(1 << 20)
	if err := fs.Put(ctx, "k", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	budget := objstore.NewChunkBudget(2 << 20)
	rc, _, err := objstore.GetParallel(ctx, fs, "k", objstore.ParallelOptions{Chunk: 64 << 10, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100<<10)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if n := budget.InUse(); n != 0 {
		t.Fatalf("%d bytes of the budget held after Close", n)
	}
}
