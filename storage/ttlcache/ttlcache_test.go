package ttlcache

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestBounded(t *testing.T) {
	clk := &clock{t: time.Unix(1e9, 0)}
	c := New[string](time.Minute, time.Minute, 4, clk.now)
	for i := range 10 {
		c.Put(fmt.Sprint(i), "o", true)
		if len(c.m) > 4 {
			t.Fatalf("cache grew to %d", len(c.m))
		}
	}
	if _, _, hit := c.Get("9"); !hit {
		t.Fatal("latest entry missing")
	}
}

func TestTTLs(t *testing.T) {
	clk := &clock{t: time.Unix(1e9, 0)}
	c := New[int](10*time.Second, 2*time.Second, 8, clk.now)
	c.Put("found", 7, true)
	c.Put("missing", 0, false)
	clk.t = clk.t.Add(3 * time.Second)
	if v, found, hit := c.Get("found"); !hit || !found || v != 7 {
		t.Fatalf("found entry after 3s: %v %v %v", v, found, hit)
	}
	if _, _, hit := c.Get("missing"); hit {
		t.Fatal("negative entry outlived its 2s TTL")
	}
	c.Drop("found")
	if _, _, hit := c.Get("found"); hit {
		t.Fatal("dropped entry still cached")
	}
}

// TestLRU: a full list pushes out its least recently used entry, and a
// Get counts as a use.
func TestLRU(t *testing.T) {
	clk := &clock{t: time.Unix(1e9, 0)}
	c := NewSized[int](time.Minute, time.Minute, 3, 1, clk.now)
	for i := range 3 {
		c.Put(fmt.Sprint(i), i, true)
	}
	c.Get("0") // 1 is now the least recently used
	c.Put("3", 3, true)
	if _, _, hit := c.Get("1"); hit {
		t.Error("least recently used entry 1 survived")
	}
	for _, k := range []string{"0", "2", "3"} {
		if _, _, hit := c.Get(k); !hit {
			t.Errorf("entry %s was pushed out", k)
		}
	}
}

// TestMissFloodKeepsFound: any number of distinct missing keys pushes out
// only other misses; found entries stay and keep answering.
func TestMissFloodKeepsFound(t *testing.T) {
	clk := &clock{t: time.Unix(1e9, 0)}
	c := New[string](time.Minute, time.Minute, 8, clk.now)
	c.Put("good", "alice", true)
	for i := range 10000 {
		c.Put(fmt.Sprintf("junk%d", i), "", false)
	}
	if v, found, hit := c.Get("good"); !hit || !found || v != "alice" {
		t.Fatalf("found entry after a flood of misses: %q %v %v", v, found, hit)
	}
	if n := len(c.m); n > 8+2 {
		t.Fatalf("cache holds %d entries, want at most 10", n)
	}
	if _, _, hit := c.Get("junk9999"); !hit {
		t.Error("the newest miss is not cached")
	}
}

// TestLoadDropRace: a Drop while a Load of the same key runs (a token
// revoked while its lookup is in flight) keeps the loaded answer out of
// the cache; the next Load reads again.
func TestLoadDropRace(t *testing.T) {
	c := New[string](time.Minute, time.Minute, 8, nil)
	reads := 0
	v, found, err := c.Load("tok", func() (string, bool, error) {
		reads++
		c.Drop("tok") // revoked after the store answered, before the load returns
		return "alice", true, nil
	})
	if err != nil || !found || v != "alice" {
		t.Fatalf("first load: %q %v %v", v, found, err)
	}
	if _, _, hit := c.Get("tok"); hit {
		t.Fatal("an answer loaded across a Drop was cached")
	}
	c.Load("tok", func() (string, bool, error) { reads++; return "", false, nil })
	if reads != 2 {
		t.Fatalf("%d reads, want 2", reads)
	}
	// Without a Drop the answer is cached as usual; a failure never is.
	if _, _, hit := c.Get("tok"); !hit {
		t.Fatal("an undisturbed load was not cached")
	}
	c.Load("other", func() (string, bool, error) { return "", false, fmt.Errorf("store down") })
	if _, _, hit := c.Get("other"); hit {
		t.Fatal("a failed load was cached")
	}
}

// TestLoadDropOtherKey: a Drop of another key does not stop a load from
// being cached.
func TestLoadDropOtherKey(t *testing.T) {
	c := New[string](time.Minute, time.Minute, 8, nil)
	c.Load("a", func() (string, bool, error) {
		c.Drop("b")
		return "x", true, nil
	})
	if _, _, hit := c.Get("a"); !hit {
		t.Fatal("load of a not cached after a Drop of b")
	}
	if len(c.loads) != 0 {
		t.Fatalf("%d loads still registered", len(c.loads))
	}
}

// TestServeStale: a load that fails with an accepted error is answered
// from an expired entry within the stale bound; other errors, entries
// past the bound and dropped keys are not.
func TestServeStale(t *testing.T) {
	clk := &clock{t: time.Unix(1e9, 0)}
	down := errors.New("store down")
	c := New[int](5*time.Second, 5*time.Second, 8, clk.now).ServeStale(time.Minute, func(err error) bool { return errors.Is(err, down) })
	c.Put("tok", 7, true)
	c.Put("gone", 0, false)
	c.Put("dropped", 9, true)
	c.Drop("dropped")
	clk.t = clk.t.Add(30 * time.Second)
	fail := func(err error) func() (int, bool, error) { return func() (int, bool, error) { return 0, false, err } }
	if v, found, err := c.Load("tok", fail(down)); err != nil || !found || v != 7 {
		t.Errorf("stale found entry while down: %v %v %v, want 7", v, found, err)
	}
	if _, found, err := c.Load("gone", fail(down)); err != nil || found {
		t.Errorf("stale missing entry while down: found=%v err=%v, want a miss", found, err)
	}
	if _, _, err := c.Load("dropped", fail(down)); !errors.Is(err, down) {
		t.Errorf("dropped key served stale: %v", err)
	}
	other := errors.New("corrupt record")
	if _, _, err := c.Load("tok", fail(other)); !errors.Is(err, other) {
		t.Errorf("stale answer for an error that is not an outage: %v", err)
	}
	if _, _, hit := c.Get("tok"); hit {
		t.Error("Get answered from an expired entry")
	}
	clk.t = clk.t.Add(time.Minute)
	if _, _, err := c.Load("tok", fail(down)); !errors.Is(err, down) {
		t.Errorf("entry past the stale bound served: %v", err)
	}
}
