// Package ttlcache is a small bounded cache of lookups against the object
// store, with separate lifetimes for positive and negative answers. The
// credential store and the repository name index use it so that repeated
// requests cost one store read, and a flood of made-up keys costs at most
// a few extra reads, never unbounded memory. It imports only the standard
// library.
package ttlcache

import (
	"sync"
	"time"
)

// Cache maps keys to answers: found ones live Pos, missing ones Neg.
type Cache[V any] struct {
	pos, neg time.Duration
	max      int
	now      func() time.Time

	mu sync.Mutex
	m  map[string]entry[V]
}

type entry[V any] struct {
	v       V
	found   bool
	expires time.Time
}

// New returns a cache of at most max entries; now nil means time.Now.
func New[V any](pos, neg time.Duration, max int, now func() time.Time) *Cache[V] {
	if now == nil {
		now = time.Now
	}
	return &Cache[V]{pos: pos, neg: neg, max: max, now: now, m: make(map[string]entry[V])}
}

// Get returns the cached answer for k: its value, whether it was found,
// and whether there was a live entry at all.
func (c *Cache[V]) Get(k string) (v V, found, hit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return v, false, false
	}
	if !c.now().Before(e.expires) {
		delete(c.m, k)
		return v, false, false
	}
	return e.v, e.found, true
}

// Put records an answer for k.
func (c *Cache[V]) Put(k string, v V, found bool) {
	ttl := c.neg
	if found {
		ttl = c.pos
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.m) >= c.max {
		for key, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, key)
			}
		}
		// Still full of live entries (a flood of distinct made-up keys):
		// start over rather than grow; the cost is a few extra reads.
		if len(c.m) >= c.max {
			clear(c.m)
		}
	}
	c.m[k] = entry[V]{v: v, found: found, expires: now.Add(ttl)}
}

// Drop forgets k.
func (c *Cache[V]) Drop(k string) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}
