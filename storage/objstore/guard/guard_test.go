package guard_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/guard"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/testkit/faultstore"
)

type counts struct {
	mu sync.Mutex
	n  map[guard.Kind]int
}

func (c *counts) Request(_ string, k guard.Kind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[guard.Kind]int{}
	}
	c.n[k]++
}

func (c *counts) get(k guard.Kind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

func put(ctx context.Context, s objstore.Store, key string) error {
	return s.Put(ctx, key, strings.NewReader("x"), 1)
}

// TestHungStoreFailsWithinDeadline: a store that accepts a request and
// never answers fails it after the operation deadline, with an error
// wrapping objstore.ErrUnavailable that names the setting.
func TestHungStoreFailsWithinDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := faultstore.New(memstore.New(), 1)
		g := guard.New(fs, guard.Options{OpTimeout: 2 * time.Second, OpTimeoutVar: "RGIT_STORE_OP_TIMEOUT_MS"})
		gate := fs.Hold(faultstore.AllOps, "")
		defer gate.Release()
		start := time.Now()
		err := put(t.Context(), g, "k")
		if took := time.Since(start); took != 2*time.Second {
			t.Errorf("hung put failed after %v, want the 2s deadline", took)
		}
		if !errors.Is(err, objstore.ErrUnavailable) || !strings.Contains(err.Error(), "RGIT_STORE_OP_TIMEOUT_MS") {
			t.Errorf("hung put: %v, want ErrUnavailable naming RGIT_STORE_OP_TIMEOUT_MS", err)
		}
		if st := g.Status(); st.State != guard.Degraded || st.LastError == "" {
			t.Errorf("after one timeout: %+v, want degraded with the error", st)
		}
	})
}

// TestSlowBodyIsNotAStall: the deadline counts waiting on the store only;
// a caller that takes its time between reads of a body is not cut off.
func TestSlowBodyIsNotAStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := guard.New(memstore.New(), guard.Options{OpTimeout: time.Second})
		if err := g.Put(t.Context(), "k", strings.NewReader("abc"), 3); err != nil {
			t.Fatal(err)
		}
		rc, _, err := g.Get(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b := make([]byte, 1)
		for range 3 {
			time.Sleep(5 * time.Second)
			if _, err := rc.Read(b); err != nil {
				t.Fatalf("read after a pause of the caller's: %v", err)
			}
		}
	})
}

// TestDownFailsFastAndRecovers: after three failures in a row the store is
// down; requests fail at once without reaching it, and probes reach it at
// most once a second; when the store answers again the first probe makes
// it healthy.
func TestDownFailsFastAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := faultstore.New(memstore.New(), 1)
		obs := &counts{}
		g := guard.New(fs, guard.Options{OpTimeout: time.Second, Observer: obs})
		fs.SetOutage(true)
		for range 3 {
			if err := put(t.Context(), g, "k"); !errors.Is(err, objstore.ErrUnavailable) {
				t.Fatalf("put during outage: %v", err)
			}
		}
		if st := g.Status(); st.State != guard.Down {
			t.Fatalf("after 3 failures: %v, want down", st.State)
		}
		fs.ResetCounts()
		// A request and a probe every 10 ms for 10 s: all fail, the
		// requests at once, and the store sees one probe a second.
		probe := guard.Probe(t.Context())
		for range 1000 {
			start := time.Now()
			if _, err := g.Head(t.Context(), "k"); !errors.Is(err, objstore.ErrUnavailable) {
				t.Fatalf("head while down: %v", err)
			}
			if time.Since(start) != 0 {
				t.Fatalf("a request to a down store waited %v", time.Since(start))
			}
			if _, err := g.Head(probe, "k"); !errors.Is(err, objstore.ErrUnavailable) {
				t.Fatalf("probe while down: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n := fs.Count(faultstore.AllOps); n > 10 {
			t.Errorf("a down store was sent %d requests in 10 s, want at most 10", n)
		}
		if obs.get(guard.FailedFast) < 1990 {
			t.Errorf("failed fast %d times, want ≥ 1990", obs.get(guard.FailedFast))
		}
		fs.SetOutage(false)
		if err := put(t.Context(), g, "k"); !errors.Is(err, objstore.ErrUnavailable) {
			t.Fatalf("a request before any probe found the store back: %v", err)
		}
		time.Sleep(time.Second)
		if err := put(probe, g, "k"); err != nil {
			t.Fatalf("first probe a second after the store returned: %v", err)
		}
		if err := put(t.Context(), g, "k"); err != nil {
			t.Fatalf("request after a successful probe: %v", err)
		}
		if st := g.Status(); st.State != guard.Healthy || st.LastError != "" {
			t.Errorf("after a success: %+v, want healthy", st)
		}
	})
}

// TestCallerGoneIsNotAFault: a caller that cancels its own request says
// nothing about the store.
func TestCallerGoneIsNotAFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := faultstore.New(memstore.New(), 1)
		g := guard.New(fs, guard.Options{OpTimeout: time.Minute})
		gate := fs.Hold(faultstore.AllOps, "")
		defer gate.Release()
		for range 5 {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			err := put(ctx, g, "k")
			cancel()
			if errors.Is(err, objstore.ErrUnavailable) {
				t.Errorf("caller's own deadline reported as a store fault: %v", err)
			}
		}
		if st := g.Status(); st.State != guard.Healthy {
			t.Errorf("after callers gave up: %v, want healthy", st.State)
		}
	})
}

// TestListStallsOnlyOnTheStore: a listing is cut off when the store hangs
// mid-way, not while the caller handles an entry.
func TestListStallsOnlyOnTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := guard.New(memstore.New(), guard.Options{OpTimeout: time.Second})
		for _, k := range []string{"a", "b", "c"} {
			if err := put(t.Context(), g, k); err != nil {
				t.Fatal(err)
			}
		}
		n := 0
		for _, err := range g.List(t.Context(), "", "") {
			if err != nil {
				t.Fatal(err)
			}
			n++
			time.Sleep(3 * time.Second)
		}
		if n != 3 {
			t.Errorf("listed %d, want 3", n)
		}
	})
}
