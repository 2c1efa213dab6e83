package admission

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestShouldTrim(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name            string
		idle            bool
		retained, after uint64
		want            bool
	}{
		{"idle after a big push", true, 300 * mib, 40 * mib, true},
		{"work still running", false, 300 * mib, 40 * mib, false},
		{"idle, nothing grew", true, 41 * mib, 40 * mib, false},
		{"idle, large caches kept since the last trim", true, 180 * mib, 170 * mib, false},
		{"idle, large caches grown by a quarter", true, 213 * mib, 170 * mib, true},
		{"idle, grown by exactly the slack", true, 20*mib + TrimSlack, 20 * mib, true},
		{"idle, grown by less than a quarter", true, 49 * mib, 40 * mib, false},
		{"idle, grown by a quarter", true, 50 * mib, 40 * mib, true},
	} {
		if got := ShouldTrim(tc.idle, tc.retained, tc.after); got != tc.want {
			t.Errorf("%s: ShouldTrim(%v, %d, %d) = %v, want %v", tc.name, tc.idle, tc.retained, tc.after, got, tc.want)
		}
	}
}

// TestTrimmerReturnsMemoryWhenWorkEnds: a node that grew during pack work
// trims within one interval of the work ending, not while it runs, and
// not again while nothing grows.
func TestTrimmerReturnsMemoryWhenWorkEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(Limits{}, nil)
		var retained atomic.Uint64
		var frees atomic.Int32
		retained.Store(20 << 20)
		tr := &Trimmer{Every: time.Second, Idle: c.Idle,
			Retained: retained.Load,
			Free:     func() { frees.Add(1); retained.Store(25 << 20) },
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go tr.Run(ctx)
		synctest.Wait() // it has read the starting level

		release, ok := c.Reserve(Push, 1)
		if !ok {
			t.Fatal("push refused")
		}
		retained.Store(400 << 20) // the push's heap
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		if n := frees.Load(); n != 0 {
			t.Fatalf("trimmed %d times during the push", n)
		}
		release()
		time.Sleep(time.Second)
		synctest.Wait()
		if n, r := frees.Load(), retained.Load(); n != 1 || r != 25<<20 {
			t.Fatalf("after the push: %d trims, retained %d MiB; want 1 trim", n, r>>20)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := frees.Load(); n != 1 {
			t.Fatalf("idle without growth: %d trims, want still 1", n)
		}
	})
}

// TestTrimmerCheckTrimsAtOnce: work admission does not count (background
// maintenance) ends with Check, and the trimmer looks then instead of at
// its next tick; a Check with nothing grown trims nothing.
func TestTrimmerCheckTrimsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var retained atomic.Uint64
		var frees atomic.Int32
		retained.Store(20 << 20)
		tr := NewTrimmer(nil)
		tr.Every, tr.Retained = time.Hour, retained.Load
		tr.Free = func() { frees.Add(1); retained.Store(21 << 20) }
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go tr.Run(ctx)
		synctest.Wait()
		tr.Check()
		synctest.Wait()
		if n := frees.Load(); n != 0 {
			t.Fatalf("Check with nothing grown: %d trims", n)
		}
		retained.Store(60 << 20) // a roll-up's heap
		tr.Check()
		tr.Check() // merged with the first
		synctest.Wait()
		if n := frees.Load(); n != 1 {
			t.Fatalf("after Check: %d trims, want 1 before the hourly tick", n)
		}
	})
}
