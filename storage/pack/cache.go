package pack

import (
	"container/list"
	"sync"
	"time"

	"github.com/rgit/rgit/storage/object"
)

// baseCache is a byte-bounded LRU of inflated delta bases keyed by pack
// offset. Cached slices are shared and must never be modified.
type baseCache struct {
	mu    sync.Mutex
	limit int64
	used  int64
	last  time.Time // of the last hit or insert
	ll    list.List // front = most recent; values are *cacheEntry
	byOff map[int64]*list.Element
}

type cacheEntry struct {
	off  int64
	typ  object.Type
	data []byte
}

func newBaseCache(limit int64) *baseCache {
	return &baseCache{limit: limit, byOff: make(map[int64]*list.Element)}
}

func (c *baseCache) get(off int64) (object.Type, []byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byOff[off]
	if !ok {
		return 0, nil, false
	}
	c.ll.MoveToFront(el)
	c.last = time.Now()
	e := el.Value.(*cacheEntry)
	return e.typ, e.data, true
}

func (c *baseCache) put(off int64, t object.Type, data []byte) {
	size := int64(len(data))
	// One object may not take more than a quarter of the budget, so a
	// single huge blob cannot flush every useful base.
	if size > c.limit/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byOff[off]; ok {
		return
	}
	c.byOff[off] = c.ll.PushFront(&cacheEntry{off: off, typ: t, data: data})
	c.last = time.Now()
	c.used += size
	for c.used > c.limit {
		el := c.ll.Back()
		e := el.Value.(*cacheEntry)
		c.ll.Remove(el)
		delete(c.byOff, e.off)
		c.used -= int64(len(e.data))
	}
}

// clear drops every cached base, unless the cache was used within
// unusedFor, and returns the bytes dropped.
func (c *baseCache) clear(unusedFor time.Duration) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.last) < unusedFor {
		return 0
	}
	n := c.used
	c.ll.Init()
	clear(c.byOff)
	c.used = 0
	return n
}
