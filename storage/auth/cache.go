package auth

import (
	"sync"
	"time"
)

// ttlCache remembers credential lookups for a short time so that a clone
// (several HTTP requests, or an SSH handshake offering several keys) costs
// one object-store read, not one per request. Keys are hashes, never raw
// secrets. Positive and negative answers have separate TTLs; the TTLs bound
// how stale a revocation or a new credential can be on one node.
type ttlCache struct {
	mu       sync.Mutex
	pos, neg time.Duration
	max      int
	now      func() time.Time
	m        map[string]cacheEntry
}

type cacheEntry struct {
	owner   string
	known   bool
	expires time.Time
}

func newTTLCache(pos, neg time.Duration, max int, now func() time.Time) *ttlCache {
	return &ttlCache{pos: pos, neg: neg, max: max, now: now, m: make(map[string]cacheEntry)}
}

// get returns (owner, known, hit).
func (c *ttlCache) get(k string) (string, bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return "", false, false
	}
	if !c.now().Before(e.expires) {
		delete(c.m, k)
		return "", false, false
	}
	return e.owner, e.known, true
}

func (c *ttlCache) put(k, owner string, known bool) {
	ttl := c.neg
	if known {
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
		// Still full of live entries (a flood of distinct bad tokens):
		// start over rather than grow; the cost is a few extra reads.
		if len(c.m) >= c.max {
			clear(c.m)
		}
	}
	c.m[k] = cacheEntry{owner: owner, known: known, expires: now.Add(ttl)}
}

func (c *ttlCache) drop(k string) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}
