// Package ttlcache is a small bounded cache of lookups against the object
// store, with separate lifetimes for positive and negative answers. The
// credential store and the repository name index use it so that repeated
// requests cost one store read, and a flood of made-up keys costs at most
// a few extra reads, never unbounded memory. It imports only the standard
// library.
//
// A cache may serve stale answers (ServeStale): when the store cannot be
// read, an expired answer up to a bound older is better than a failure,
// since nothing can have changed it through the store meanwhile.
//
// Found and missing answers are kept in two least-recently-used lists of
// their own, the missing one smaller: made-up keys (random tokens, names
// that do not exist) push out only other misses, never a found entry, so
// a flood of them cannot make every honest request cost a store read.
//
// Load closes the race between a lookup and a Drop: an answer read from
// the store before a Drop of its key (a revoked token, a removed key)
// completes after it and must not be cached, or the dropped value would
// live on for a whole TTL. Each key being loaded carries a generation
// that Drop advances; the answer is kept only if it did not move.
package ttlcache

import (
	"container/list"
	"sync"
	"time"
)

// Cache maps keys to answers: found ones live Pos, missing ones Neg.
type Cache[V any] struct {
	pos, neg time.Duration
	now      func() time.Time

	mu    sync.Mutex
	m     map[string]*list.Element // of *entry[V], in found or miss
	found lru
	miss  lru
	loads map[string]*flight // keys with a Load in progress

	// Stale answers (ServeStale): kept staleFor past expiry, served by
	// Load when its load fails with an error staleWhen accepts.
	staleFor  time.Duration
	staleWhen func(error) bool
}

// lru is one class of entries, most recently used first.
type lru struct {
	l   list.List
	max int
}

type entry[V any] struct {
	key     string
	v       V
	found   bool
	expires time.Time
}

// flight is the state of the loads in progress for one key.
type flight struct {
	n   int    // loads running
	gen uint64 // advanced by every Drop of the key
}

// New returns a cache of at most max found entries and a quarter as many
// (at least 1) missing ones; now nil means time.Now.
func New[V any](pos, neg time.Duration, max int, now func() time.Time) *Cache[V] {
	return NewSized[V](pos, neg, max, max/4, now)
}

// NewSized returns a cache of at most maxFound found entries and
// maxMissing missing ones (each at least 1); now nil means time.Now.
func NewSized[V any](pos, neg time.Duration, maxFound, maxMissing int, now func() time.Time) *Cache[V] {
	if now == nil {
		now = time.Now
	}
	c := &Cache[V]{pos: pos, neg: neg, now: now, m: make(map[string]*list.Element), loads: make(map[string]*flight)}
	c.found.max, c.miss.max = max(maxFound, 1), max(maxMissing, 1)
	return c
}

// ServeStale makes Load answer from an entry that expired less than
// maxAge ago when its load fails with an error when accepts (the store is
// unavailable). It returns c.
func (c *Cache[V]) ServeStale(maxAge time.Duration, when func(error) bool) *Cache[V] {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.staleFor, c.staleWhen = maxAge, when
	return c
}

// Get returns the cached answer for k: its value, whether it was found,
// and whether there was a live entry at all.
func (c *Cache[V]) Get(k string) (v V, found, hit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.get(k)
}

func (c *Cache[V]) get(k string) (v V, found, hit bool) {
	el, ok := c.m[k]
	if !ok {
		return v, false, false
	}
	e := el.Value.(*entry[V])
	if now := c.now(); !now.Before(e.expires) {
		if !now.Before(e.expires.Add(c.staleFor)) {
			c.remove(el)
		}
		return v, false, false
	}
	c.class(e.found).l.MoveToFront(el)
	return e.v, e.found, true
}

// Put records an answer for k, pushing out the least recently used answer
// of the same kind (found or missing) when that list is full.
func (c *Cache[V]) Put(k string, v V, found bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(k, v, found)
}

func (c *Cache[V]) put(k string, v V, found bool) {
	ttl := c.neg
	if found {
		ttl = c.pos
	}
	if el, ok := c.m[k]; ok {
		c.remove(el)
	}
	cl := c.class(found)
	for cl.l.Len() >= cl.max {
		c.remove(cl.l.Back())
	}
	c.m[k] = cl.l.PushFront(&entry[V]{key: k, v: v, found: found, expires: c.now().Add(ttl)})
}

// Drop forgets k. A Load of k in progress will not cache what it read.
func (c *Cache[V]) Drop(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[k]; ok {
		c.remove(el)
	}
	if f, ok := c.loads[k]; ok {
		f.gen++
	}
}

// Load returns k's cached answer, or runs load and caches what it
// answers: v and found, unless err is set (a failure is never cached, so
// an outage does not linger). An answer is not cached either when k was
// dropped while load ran. load runs without the cache's lock; concurrent
// Loads of one key each run it.
func (c *Cache[V]) Load(k string, load func() (v V, found bool, err error)) (V, bool, error) {
	c.mu.Lock()
	if v, found, hit := c.get(k); hit {
		c.mu.Unlock()
		return v, found, nil
	}
	f := c.loads[k]
	if f == nil {
		f = &flight{}
		c.loads[k] = f
	}
	f.n++
	gen := f.gen
	c.mu.Unlock()

	v, found, err := load()

	c.mu.Lock()
	defer c.mu.Unlock()
	if f.n--; f.n == 0 {
		delete(c.loads, k)
	}
	if err == nil && f.gen == gen {
		c.put(k, v, found)
	}
	if err != nil && c.staleWhen != nil && c.staleWhen(err) {
		if sv, sfound, ok := c.stale(k); ok {
			return sv, sfound, nil
		}
	}
	return v, found, err
}

// stale returns k's entry if it expired less than staleFor ago.
func (c *Cache[V]) stale(k string) (v V, found, ok bool) {
	el, ok := c.m[k]
	if !ok {
		return v, false, false
	}
	e := el.Value.(*entry[V])
	if !c.now().Before(e.expires.Add(c.staleFor)) {
		return v, false, false
	}
	return e.v, e.found, true
}

func (c *Cache[V]) class(found bool) *lru {
	if found {
		return &c.found
	}
	return &c.miss
}

func (c *Cache[V]) remove(el *list.Element) {
	e := el.Value.(*entry[V])
	c.class(e.found).l.Remove(el)
	delete(c.m, e.key)
}
