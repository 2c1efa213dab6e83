package faultstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
)

func put(ctx context.Context, s objstore.Store, key, val string) error {
	return s.Put(ctx, key, strings.NewReader(val), int64(len(val)))
}

func exists(t *testing.T, s objstore.Store, key string) bool {
	t.Helper()
	_, err := s.Head(context.Background(), key)
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func TestPassThroughAndCounts(t *testing.T) {
	ctx := context.Background()
	fs := New(memstore.New(), 1)
	if err := put(ctx, fs, "a/1", "one"); err != nil {
		t.Fatal(err)
	}
	if err := fs.PutIfAbsent(ctx, "a/1", strings.NewReader("x"), 1); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent over existing: %v", err)
	}
	rc, _, err := fs.Get(ctx, "a/1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "one" {
		t.Fatalf("got %q", b)
	}
	if err := fs.Copy(ctx, "a/1", "a/2"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range fs.List(ctx, "a/", "") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("listed %d", n)
	}
	if err := fs.Delete(ctx, "a/2"); err != nil {
		t.Fatal(err)
	}
	want := map[Op]int64{OpPut: 1, OpPutIfAbsent: 1, OpGet: 1, OpCopy: 1, OpList: 1, OpDelete: 1, OpHead: 0}
	for op, c := range want {
		if got := fs.Count(op); got != c {
			t.Errorf("Count(%s) = %d, want %d", op, got, c)
		}
	}
	if got := fs.Count(WriteOps); got != 4 {
		t.Errorf("Count(WriteOps) = %d", got)
	}
	fs.ResetCounts()
	if fs.Count(AllOps) != 0 {
		t.Error("ResetCounts left counts")
	}
}

func TestFailBeforeAndAfter(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	fs := New(mem, 1)
	fs.FailNext(OpPutIfAbsent, "wal/", 1, false)
	err := fs.PutIfAbsent(ctx, "wal/1", strings.NewReader("x"), 1)
	if !errors.Is(err, ErrInjected) || errors.Is(err, ErrApplied) {
		t.Fatalf("fail-before: %v", err)
	}
	if exists(t, mem, "wal/1") {
		t.Fatal("fail-before reached the store")
	}
	fs.FailNext(OpPutIfAbsent, "wal/", 1, true)
	if err := fs.PutIfAbsent(ctx, "wal/1", strings.NewReader("x"), 1); !errors.Is(err, ErrApplied) {
		t.Fatalf("fail-after: %v", err)
	}
	if !exists(t, mem, "wal/1") {
		t.Fatal("fail-after did not reach the store")
	}
	// One-shot rules are gone; prefix and op filters hold.
	fs.FailNext(OpPut, "other/", 1, false)
	if err := fs.PutIfAbsent(ctx, "wal/2", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, fs, "wal/3", "x"); err != nil {
		t.Fatalf("rule for other/ hit wal/: %v", err)
	}
	if err := put(ctx, fs, "other/1", "x"); !errors.Is(err, ErrInjected) {
		t.Fatalf("rule for other/: %v", err)
	}
	// Reads: fail-after closes the reader and reports the fault.
	fs.FailNext(OpGet, "", 1, true)
	if _, _, err := fs.Get(ctx, "wal/1"); !errors.Is(err, ErrApplied) {
		t.Fatalf("get fail-after: %v", err)
	}
	fs.FailNext(OpList, "wal/", 1, false)
	var lerr error
	for _, err := range fs.List(ctx, "wal/", "") {
		lerr = err
	}
	if !errors.Is(lerr, ErrInjected) {
		t.Fatalf("list: %v", lerr)
	}
}

func TestSeededProbabilitiesReproduce(t *testing.T) {
	run := func(seed int64) []bool {
		fs := New(memstore.New(), seed)
		fs.AddRule(Rule{Ops: OpPut, FailBefore: 0.3, FailAfter: 0.2})
		var out []bool
		for range 200 {
			out = append(out, put(context.Background(), fs, "k", "v") != nil)
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	fails := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 diverged at call %d", i)
		}
		if a[i] {
			fails++
		}
	}
	if fails < 60 || fails > 140 { // expected 0.3 + 0.7*0.2 = 0.44
		t.Fatalf("%d/200 failures, want about 88", fails)
	}
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("different seeds gave identical fault sequences")
	}
}

func TestOutage(t *testing.T) {
	ctx := context.Background()
	fs := New(memstore.New(), 1)
	fs.SetOutage(true)
	if err := put(ctx, fs, "k", "v"); !errors.Is(err, ErrOutage) {
		t.Fatalf("put during outage: %v", err)
	}
	if _, err := fs.Head(ctx, "k"); !errors.Is(err, ErrOutage) {
		t.Fatalf("head during outage: %v", err)
	}
	fs.SetOutage(false)
	if err := put(ctx, fs, "k", "v"); err != nil {
		t.Fatal(err)
	}
}

func TestLatencyHonoursContext(t *testing.T) {
	fs := New(memstore.New(), 1)
	id := fs.AddRule(Rule{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := put(ctx, fs, "k", "v"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put under an hour of latency: %v", err)
	}
	if exists(t, fs.Inner(), "k") {
		t.Fatal("latency before the call let the write through")
	}
	fs.RemoveRule(id)
	// Latency after: the write lands, the caller times out.
	fs.AddRule(Rule{Ops: OpPut, LatencyAfter: time.Hour})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if err := put(ctx2, fs, "k", "v"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put with latency after: %v", err)
	}
	if !exists(t, fs.Inner(), "k") {
		t.Fatal("latency after blocked the write")
	}
	fs.ClearRules()
	// Real latency is applied (lower bound only: no upper-bound timing).
	fs.AddRule(Rule{Ops: OpHead, Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond})
	start := time.Now()
	if _, err := fs.Head(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("head took %v, want >= 20ms", d)
	}
}

func TestGateInterleaves(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	fs := New(mem, 1)
	g := fs.Hold(OpPutIfAbsent, "wal/")
	errc := make(chan error, 1)
	go func() { errc <- fs.PutIfAbsent(ctx, "wal/1", bytes.NewReader([]byte("first")), 5) }()
	if err := g.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if g.Parked() != 1 {
		t.Fatalf("parked = %d", g.Parked())
	}
	// A call the gate does not match passes while the first is parked.
	if err := put(ctx, fs, "other", "x"); err != nil {
		t.Fatal(err)
	}
	// The second writer wins the key while the first is parked.
	if err := mem.PutIfAbsent(ctx, "wal/1", strings.NewReader("second"), 6); err != nil {
		t.Fatal(err)
	}
	g.Release()
	g.Release() // idempotent
	if err := <-errc; !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("parked writer after release: %v", err)
	}
	// Released gates no longer block.
	if err := fs.PutIfAbsent(ctx, "wal/2", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	// A parked call gives up with its context.
	g2 := fs.Hold(OpGet, "")
	defer g2.Release()
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _, err := fs.Get(cctx, "wal/2")
		errc <- err
	}()
	if err := g2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled parked call: %v", err)
	}
}

// HoldKeys parks only the keys with the suffix under the prefix.
func TestHoldKeysMatchesSuffix(t *testing.T) {
	ctx := context.Background()
	fs := New(memstore.New(), 1)
	g := fs.HoldKeys(OpPut, "pack/", ".bitmap")
	defer g.Release()
	for _, k := range []string{"pack/p.pack", "pack/p.idx", "other/p.bitmap"} {
		if err := put(ctx, fs, k, "x"); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- put(ctx, fs, "pack/p.bitmap", "x") }()
	if err := g.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	g.Release()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentRulesAndCalls(t *testing.T) {
	ctx := context.Background()
	fs := New(memstore.New(), 1)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				if i%2 == 0 {
					id := fs.AddRule(Rule{Ops: OpPut, FailBefore: 0.5, Jitter: time.Microsecond})
					fs.RemoveRule(id)
					g := fs.Hold(OpDelete, "never/")
					g.Release()
					fs.SetOutage(j%50 == 0)
					fs.SetOutage(false)
					continue
				}
				put(ctx, fs, "k", "v")
				for range fs.List(ctx, "", "") {
				}
			}
		}()
	}
	wg.Wait()
	if fs.Count(OpPut) != 4*200 || fs.Count(OpList) != 4*200 {
		t.Fatalf("counts: put %d list %d", fs.Count(OpPut), fs.Count(OpList))
	}
}

// readTimed reads key's whole body in the synctest bubble and returns the
// (fake) time it took.
func readTimed(t *testing.T, s *Store, key string, ranged bool) (time.Duration, []byte) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	var rc io.ReadCloser
	var err error
	if ranged {
		rc, err = s.GetRange(ctx, key, 0, -1)
	} else {
		rc, _, err = s.Get(ctx, key)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return time.Since(start), b
}

func TestBandwidthPerBodyAndShared(t *testing.T) {
	val := strings.Repeat("x", 1<<20)
	for _, tc := range []struct {
		name   string
		shared bool
		want   time.Duration // for two bodies read at once at 1 MiB/s
	}{
		{"per body", false, time.Second},
		{"shared link", true, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(memstore.New(), 1)
				if err := put(context.Background(), s, "p/a", val); err != nil {
					t.Fatal(err)
				}
				s.AddRule(Rule{Ops: OpGet | OpGetRange, Prefix: "p/", Bandwidth: 1 << 20, SharedBandwidth: tc.shared})
				start := time.Now()
				var wg sync.WaitGroup
				for _, ranged := range []bool{false, true} {
					wg.Go(func() {
						if _, b := readTimed(t, s, "p/a", ranged); string(b) != val {
							t.Error("body changed by the limit")
						}
					})
				}
				wg.Wait()
				// Paced from the first byte (a new limiter has no credit),
				// rounded to nanoseconds per read.
				if got := time.Since(start); got < tc.want-time.Millisecond || got > tc.want+time.Millisecond {
					t.Fatalf("two 1 MiB bodies at 1 MiB/s took %v, want %v", got, tc.want)
				}
			})
		})
	}
}

func TestCutBodyAfter(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New(), 1)
	if err := put(ctx, s, "p/a", "0123456789"); err != nil {
		t.Fatal(err)
	}
	s.AddRule(Rule{Ops: OpGetRange, Prefix: "p/", CutBodyAfter: 4, Times: 1})
	rc, err := s.GetRange(ctx, "p/a", 2, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, ErrInjected) || string(b) != "2345" {
		t.Fatalf("cut body: got %q, %v; want \"2345\" and ErrInjected", b, err)
	}
	// Times: 1 — the next body is whole.
	rc, err = s.GetRange(ctx, "p/a", 2, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, err = io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "23456789" {
		t.Fatalf("after the cut: got %q, %v", b, err)
	}
}
