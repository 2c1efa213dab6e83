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
// LRU order) and removes its unfinished temporary files.
//
// With WithStore the packs are shared between nodes through the object
// store: a node that builds a pack uploads it after its client has it, and
// a node whose disk lacks a pack (a cold node, a new owner) looks there
// before building it, streaming it to its client while it arrives. The
// package imports storage/objstore, zap and the standard library.
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
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/objstore"
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

	store   objstore.Store // nil: packs stay on this node
	log     *zap.Logger
	uploads sync.WaitGroup
}

// Option tunes a Cache.
type Option func(*Cache)

// WithStore shares packs through st (see the package doc): ServeShared
// looks there before building, and uploads what it built. Failures to read
// or store a shared pack only cost a build; they are logged to log.
func WithStore(st objstore.Store, log *zap.Logger) Option {
	return func(c *Cache) { c.store, c.log = st, log }
}

type entry struct {
	key  string
	size int64
}

// Stats counts what the cache did. Misses are the packs this node built;
// SharedHits the packs it took from the store instead; Uploads the packs
// it stored for other nodes (UploadErrors: attempts that failed).
type Stats struct {
	Hits, Misses, Waits, Evictions int64
	SharedHits, Uploads            int64
	UploadErrors                   int64
	Entries                        int
	Bytes                          int64
}

// New returns a cache in dir (created if needed) holding at most maxBytes
// of packs; a single pack larger than that is streamed but not kept.
// Finished packs found in dir are adopted, unfinished ones removed.
func New(dir string, maxBytes int64, opts ...Option) (*Cache, error) {
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
	for _, o := range opts {
		o(c)
	}
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
	return c.ServeShared(ctx, key, "", w, produce)
}

// ServeShared is Serve for a pack that may be shared through the store
// (WithStore) under place, a key prefix ending in '/' that holds the
// packs of one repository (so deleting the repository deletes them). On a
// local miss the store is asked first; the pack is built only when it is
// not there (or cannot be read), and a built pack is uploaded in the
// background after the call returns, when the older packs under place are
// pruned too. With place "" (or no store) it is Serve.
func (c *Cache) ServeShared(ctx context.Context, key, place string, w io.Writer, produce func(io.Writer) error) (hit bool, err error) {
	if c.store == nil {
		place = ""
	}
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
		c.mu.Unlock()
		var err error
		if rc := c.openShared(ctx, place, key); rc != nil {
			err = c.produce(key, "", w, func(tw io.Writer) error {
				defer rc.Close()
				if _, err := io.Copy(tw, rc); err != nil {
					return fmt.Errorf("clone cache: read the shared pack: %w", err)
				}
				return nil
			})
			c.count(&c.stats.SharedHits)
		} else {
			c.count(&c.stats.Misses)
			err = c.produce(key, place, w, produce)
		}
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

func (c *Cache) count(n *int64) {
	c.mu.Lock()
	*n++
	c.mu.Unlock()
}

// produce runs fn through a tee into a temporary file and, if fn succeeds
// and the file is complete, adds it to the cache and, with a place, starts
// its upload to the store.
func (c *Cache) produce(key, place string, w io.Writer, fn func(io.Writer) error) error {
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
		if place != "" {
			// Opened before add can evict it; the upload reads the open file.
			if f, err := os.Open(c.path(key)); err == nil {
				c.upload(f, place+key+fileSuffix, t.n, place)
			}
		}
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

// sharedOptions reads shared packs in parallel ranges, as the pack cache
// reads packs, but within a chunk budget of their own: these reads go at
// their clients' pace, and slow clients holding chunks must not stall the
// pack downloads that share objstore's default budget (whose consumer is
// the disk).
var sharedOptions = objstore.ParallelOptions{Budget: objstore.NewChunkBudget(64 << 20)}

// openShared opens the shared copy of key, or returns nil when there is
// none or the store cannot be read (the pack is then built here).
func (c *Cache) openShared(ctx context.Context, place, key string) io.ReadCloser {
	if place == "" {
		return nil
	}
	rc, _, err := objstore.GetParallel(ctx, c.store, place+key+fileSuffix, sharedOptions)
	if err != nil {
		if !errors.Is(err, objstore.ErrNotFound) && ctx.Err() == nil {
			c.log.Warn("clone cache: cannot read a shared clone pack, building it", zap.String("key", place+key+fileSuffix), zap.Error(err))
		}
		return nil
	}
	return rc
}

// uploadTimeout bounds one background upload.
const uploadTimeout = 30 * time.Minute

// upload stores the built pack f for other nodes and then prunes older
// packs under place; it runs in the background and closes f.
func (c *Cache) upload(f *os.File, storeKey string, size int64, place string) {
	c.uploads.Add(1)
	go func() {
		defer c.uploads.Done()
		defer f.Close()
		ctx, cancel := context.WithTimeout(context.Background(), uploadTimeout)
		defer cancel()
		err := c.store.PutIfAbsent(ctx, storeKey, f, size)
		if errors.Is(err, objstore.ErrExists) {
			err = nil // another node stored the same pack
		}
		if err == nil {
			err = c.prune(ctx, place, storeKey)
		}
		if err != nil {
			c.log.Warn("clone cache: cannot share a clone pack through the store", zap.String("key", storeKey), zap.Error(err))
			c.count(&c.stats.UploadErrors)
			return
		}
		c.count(&c.stats.Uploads)
	}()
}

// prune deletes the shared packs under place that stale chooses.
func (c *Cache) prune(ctx context.Context, place, stored string) error {
	var infos []objstore.ObjectInfo
	for info, err := range c.store.List(ctx, place, "") {
		if err != nil {
			return err
		}
		infos = append(infos, info)
	}
	for _, k := range stale(infos, stored, time.Now()) {
		if err := c.store.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// sharedKeep is how many of a repository's shared packs are kept, newest
// first; sharedMinAge protects younger ones, which a node may be reading.
const (
	sharedKeep   = 1
	sharedMinAge = 10 * time.Minute
)

// stale picks the shared packs of one repository to delete: all but the
// sharedKeep newest and the one just stored, unless younger than
// sharedMinAge. A push changes the pack list and so every key, so older
// packs are never asked for again; they cost store space only.
func stale(infos []objstore.ObjectInfo, stored string, now time.Time) []string {
	sorted := slices.Clone(infos)
	slices.SortFunc(sorted, func(a, b objstore.ObjectInfo) int {
		return cmp.Or(b.ModTime.Compare(a.ModTime), strings.Compare(a.Key, b.Key))
	})
	var out []string
	for i, info := range sorted {
		if i < sharedKeep || info.Key == stored || now.Sub(info.ModTime) < sharedMinAge {
			continue
		}
		out = append(out, info.Key)
	}
	return out
}

// Close waits for the background uploads to finish.
func (c *Cache) Close() error {
	c.uploads.Wait()
	return nil
}
