// Package clonecache keeps recently produced clone packs on local disk so
// that identical requests (the same wants over the same pack list) are
// answered by streaming a file instead of walking the repository and
// assembling the pack again: GitLab's pack-objects cache.
//
// The first request for a key produces the pack and tees it to a file
// while it streams to its own client; identical requests that arrive
// meanwhile wait for it and then stream the file (one walk for a burst of
// clones). The total size is bounded, least recently used files are
// evicted, and a key names the inputs that determine the pack, so a stale
// entry is never served: it just stops being asked for.
//
// Packs are immutable and keys name their inputs, so files survive a
// restart: New adopts the packs an earlier process left (newest first in
// LRU order) and removes its unfinished temporary files. The package
// imports only the standard library.
package clonecache

import (
	"cmp"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

const (
	fileSuffix = ".pack"
	tempMarker = ".tmp-"
)

// Cache is a size-bounded directory of cached packs. It is safe for
// concurrent use.
type Cache struct {
	dir      string
	maxBytes int64

	mu      sync.Mutex
	entries map[string]*list.Element // of *entry
	lru     list.List                // front = most recently used
	bytes   int64
	flights map[string]chan struct{} // closed when the producer finishes
	stats   Stats
}

type entry struct {
	key  string
	size int64
}

// Stats counts what the cache did.
type Stats struct {
	Hits, Misses, Waits, Evictions int64
	Entries                        int
	Bytes                          int64
}

// New returns a cache in dir (created if needed) holding at most maxBytes
// of packs; a single pack larger than that is streamed but not kept.
// Finished packs found in dir are adopted, unfinished ones removed.
func New(dir string, maxBytes int64) (*Cache, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("clone cache %s: size bound must be positive, got %d", dir, maxBytes)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("clone cache: %w", err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("clone cache: %w", err)
	}
	c := &Cache{dir: dir, maxBytes: maxBytes, entries: map[string]*list.Element{}, flights: map[string]chan struct{}{}}
	type found struct {
		key   string
		size  int64
		mtime int64
	}
	var keep []found
	for _, n := range names {
		name := n.Name()
		if strings.Contains(name, tempMarker) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("clone cache: remove unfinished %s: %w", name, err)
			}
			continue
		}
		key, ok := strings.CutSuffix(name, fileSuffix)
		if !ok || !validKey(key) || !n.Type().IsRegular() {
			continue
		}
		info, err := n.Info()
		if err != nil {
			continue // removed meanwhile
		}
		keep = append(keep, found{key, info.Size(), info.ModTime().UnixNano()})
	}
	slices.SortFunc(keep, func(a, b found) int { return cmp.Compare(a.mtime, b.mtime) })
	for _, f := range keep { // oldest first, so the newest ends at the front
		c.add(f.key, f.size)
	}
	return c, nil
}

// Key derives a cache key from the inputs that determine a pack. Parts
// are length-prefixed, so no two different lists collide by
// concatenation.
func Key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Serve writes the pack for key to w. If it is cached, the file is
// streamed (hit = true). Otherwise, if another call is producing it, Serve
// waits for that call and streams its file; if nobody is, this call runs
// produce with a writer that goes both to w and to the cache file.
//
// A failure of w does not stop the cache file from being completed (the
// waiters still need it); produce's own error discards the file. The error
// of produce or of w is returned, wrapped.
func (c *Cache) Serve(ctx context.Context, key string, w io.Writer, produce func(io.Writer) error) (hit bool, err error) {
	if !validKey(key) {
		return false, fmt.Errorf("clone cache: invalid key %q", key)
	}
	for {
		c.mu.Lock()
		if el, ok := c.entries[key]; ok {
			c.lru.MoveToFront(el)
			// Opened under the lock so eviction cannot remove the file
			// first; once open, removal does not disturb the read.
			f, err := os.Open(c.path(key))
			if err == nil {
				c.stats.Hits++
				c.mu.Unlock()
				return true, c.stream(f, w)
			}
			// The file vanished behind our back: forget it, produce again.
			c.remove(el)
		}
		if done, ok := c.flights[key]; ok {
			c.stats.Waits++
			c.mu.Unlock()
			select {
			case <-done:
				continue // cached now, or the producer failed and we retry
			case <-ctx.Done():
				return false, fmt.Errorf("clone cache: wait for pack: %w", ctx.Err())
			}
		}
		done := make(chan struct{})
		c.flights[key] = done
		c.stats.Misses++
		c.mu.Unlock()
		err := c.produce(key, w, produce)
		c.mu.Lock()
		delete(c.flights, key)
		close(done)
		c.mu.Unlock()
		return false, err
	}
}

func (c *Cache) stream(f *os.File, w io.Writer) error {
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("clone cache: stream %s: %w", filepath.Base(f.Name()), err)
	}
	return nil
}

// produce runs fn through a tee into a temporary file and, if fn succeeds
// and the file is complete, adds it to the cache.
func (c *Cache) produce(key string, w io.Writer, fn func(io.Writer) error) error {
	tmp, err := os.CreateTemp(c.dir, key+tempMarker+"*")
	if err != nil {
		// The cache is an optimization: serve uncached.
		if ferr := fn(w); ferr != nil {
			return ferr
		}
		return nil
	}
	t := &tee{client: w, file: tmp, limit: c.maxBytes}
	ferr := fn(t)
	cerr := tmp.Close()
	keep := ferr == nil && t.fileErr == nil && cerr == nil
	if keep {
		if err := os.Rename(tmp.Name(), c.path(key)); err != nil {
			keep = false
		}
	}
	if !keep {
		os.Remove(tmp.Name())
	} else {
		c.add(key, t.n)
	}
	if ferr != nil {
		return ferr
	}
	if t.clientErr != nil {
		return fmt.Errorf("clone cache: write to client: %w", t.clientErr)
	}
	return nil
}

// add records a finished file and evicts least recently used files until
// the bound holds.
func (c *Cache) add(key string, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok { // cannot happen while we held the flight
		c.remove(el)
	}
	c.entries[key] = c.lru.PushFront(&entry{key: key, size: size})
	c.bytes += size
	for c.bytes > c.maxBytes {
		c.stats.Evictions++
		c.remove(c.lru.Back())
	}
}

// remove drops an entry and its file; c.mu is held.
func (c *Cache) remove(el *list.Element) {
	e := el.Value.(*entry)
	c.lru.Remove(el)
	delete(c.entries, e.key)
	c.bytes -= e.size
	os.Remove(c.path(e.key))
}

// Stats returns the counters and current occupancy.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes = len(c.entries), c.bytes
	return s
}

func (c *Cache) path(key string) string { return filepath.Join(c.dir, key+fileSuffix) }

// validKey admits what Key produces (and any other plain file name stem),
// so a key can never escape the directory.
func validKey(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for _, r := range k {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// tee writes to the client and the cache file. A client failure is
// latched and the client dropped, while the file continues; a file
// failure (or exceeding the size bound) is latched and the file dropped,
// while the client continues. Write fails only when both are gone.
type tee struct {
	client    io.Writer
	file      *os.File
	limit     int64
	n         int64
	clientErr error
	fileErr   error
}

var errTooLarge = errors.New("pack exceeds the cache size bound")

func (t *tee) Write(p []byte) (int, error) {
	if t.fileErr == nil {
		if t.n+int64(len(p)) > t.limit {
			t.fileErr = errTooLarge
		} else if _, err := t.file.Write(p); err != nil {
			t.fileErr = err
		}
		t.n += int64(len(p))
	}
	if t.clientErr == nil {
		if _, err := t.client.Write(p); err != nil {
			t.clientErr = err
		}
	}
	if t.clientErr != nil && t.fileErr != nil {
		return 0, t.clientErr
	}
	return len(p), nil
}
