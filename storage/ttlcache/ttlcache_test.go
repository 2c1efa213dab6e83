package ttlcache

import (
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
