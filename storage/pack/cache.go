package pack

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rgit/rgit/storage/object"
)

// DefaultBaseIdle is how long a delta base may stay cached unused. The
// cache serves the reads of one walk or pack write and of the requests
// that follow it on the same repository; a base nobody asked for in that
// long belongs to a pass that is over (a bitmap build reading every tree,
// the thin-pack completion of a push) or to a repository gone quiet, and
// holding it would make the node's memory follow the size of everything
// it ever read, up to the budget, instead of its current work.
const DefaultBaseIdle = 30 * time.Second

// BaseCache is a byte-bounded LRU of inflated delta bases, shared by every
// Pack opened with it (OpenOptions.Bases), so a node bounds the bases of
// all its packs together rather than each pack's. A base unused for the
// idle time is dropped, also when nothing reads any more (a timer runs
// while the cache holds anything). Cached slices are shared and must
// never be modified. Safe for concurrent use.
type BaseCache struct {
	limit int64
	idle  time.Duration

	mu    sync.Mutex
	used  int64
	ll    list.List // front = most recent; values are *cacheEntry
	byKey map[baseKey]*list.Element
	timer *time.Timer // armed while ll is not empty
}

// baseKey is an entry's pack (Pack.id) and offset in it.
type baseKey struct {
	pack uint64
	off  int64
}

type cacheEntry struct {
	key  baseKey
	typ  object.Type
	data []byte
	used time.Time // last get or put
}

// NewBaseCache returns a cache of at most limit bytes of bases (0:
// DefaultCacheBytes), each dropped after idle unused (0: DefaultBaseIdle).
func NewBaseCache(limit int64, idle time.Duration) *BaseCache {
	if limit <= 0 {
		limit = DefaultCacheBytes
	}
	if idle <= 0 {
		idle = DefaultBaseIdle
	}
	return &BaseCache{limit: limit, idle: idle, byKey: make(map[baseKey]*list.Element)}
}

// packIDs numbers the Packs of the process for their cache keys.
var packIDs atomic.Uint64

// Bytes reports the bytes of bases cached now.
func (c *BaseCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

func (c *BaseCache) get(k baseKey) (object.Type, []byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return 0, nil, false
	}
	c.ll.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	e.used = time.Now()
	return e.typ, e.data, true
}

func (c *BaseCache) put(k baseKey, t object.Type, data []byte) {
	size := int64(len(data))
	// One object may not take more than a quarter of the budget, so a
	// single huge blob cannot flush every useful base.
	if size > c.limit/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; ok {
		return
	}
	c.byKey[k] = c.ll.PushFront(&cacheEntry{key: k, typ: t, data: data, used: time.Now()})
	c.used += size
	for c.used > c.limit {
		c.removeLocked(c.ll.Back())
	}
	if c.timer == nil {
		c.timer = time.AfterFunc(c.idle, c.expire)
	}
}

func (c *BaseCache) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.ll.Remove(el)
	delete(c.byKey, e.key)
	c.used -= int64(len(e.data))
}

// clear drops every base and stops the timer.
func (c *BaseCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	clear(c.byKey)
	c.used = 0
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// Drop drops the bases unused for at least unusedFor and returns the
// bytes they held. An idle node calls it before returning memory to the
// OS rather than wait out the idle time; unusedFor spares the bases of
// work still running (a background bitmap build is not counted as work).
func (c *BaseCache) Drop(unusedFor time.Duration) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.used
	c.dropLocked(time.Now(), unusedFor)
	return before - c.used
}

// dropLocked removes the bases unused for age at now, least recently used
// first, and returns how long until the oldest one left reaches that age
// (0: none left).
func (c *BaseCache) dropLocked(now time.Time, age time.Duration) time.Duration {
	for el := c.ll.Back(); el != nil; el = c.ll.Back() {
		if wait := el.Value.(*cacheEntry).used.Add(age).Sub(now); wait > 0 {
			return wait
		}
		c.removeLocked(el)
	}
	return 0
}

// expire drops the bases unused for the idle time and rearms the timer for
// the oldest one left.
func (c *BaseCache) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = nil
	if wait := c.dropLocked(time.Now(), c.idle); wait > 0 {
		c.timer = time.AfterFunc(wait, c.expire)
	}
}
