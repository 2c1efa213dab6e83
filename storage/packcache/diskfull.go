package packcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/pack"
)

// A cache disk that is full (or over quota) must not fail reads: a pack
// that cannot be stored is reserved space for first (so the failure comes
// before any reader depends on the file), then room is made by evicting
// unheld packs, and failing that the pack is served from memory for its
// holders only, not cached. Only when that too is impossible does a Get
// fail, with ErrDiskFull.

// ErrDiskFull: the cache's disk has no room for a pack and it could not be
// served from memory either. A client is told to retry (the condition is
// the node's, and passes as space is freed).
var ErrDiskFull = errors.New("packcache: cache disk full")

// DefaultMemoryFallback is how many bytes of packs a cache serves from
// memory at once while its disk is full (WithMemoryFallback).
const DefaultMemoryFallback = 256 << 20

// WithMemoryFallback bounds the bytes of packs served from memory at once
// while the cache disk is full; 0 turns the fallback off.
func WithMemoryFallback(n int64) Option { return func(o *options) { o.memFallback = n } }

// NoSpace reports whether err is a local filesystem out of space or over
// quota.
func NoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// noRoom is a download the cache disk could not take: no room for its
// need bytes (full, over quota), or failing to create or reserve a file.
type noRoom struct {
	need int64
	err  error
}

func (e *noRoom) Error() string { return e.err.Error() }
func (e *noRoom) Unwrap() error { return e.err }

// createTemp creates a download's temp file for key with n bytes reserved
// (see reserve); its errors are *noRoom.
func (c *Cache) createTemp(key string, n int64) (*os.File, error) {
	f, err := os.CreateTemp(c.tmpDir, "dl-*")
	if err != nil {
		return nil, &noRoom{need: n, err: fmt.Errorf("create temp for %s: %w", key, err)}
	}
	if err := reserve(f, n); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, &noRoom{need: n, err: fmt.Errorf("%s: %w", key, err)}
	}
	return f, nil
}

// reserve allocates n bytes for f up front (without changing its size),
// so a full disk fails here rather than midway through a download that
// readers already use. A filesystem that cannot preallocate is not
// reserved on; a write there may still fail later.
func reserve(f *os.File, n int64) error {
	if n <= 0 {
		return nil
	}
	if err := preallocate(f, n); err != nil {
		return fmt.Errorf("reserve %d bytes in %s: %w", n, f.Name(), err)
	}
	return nil
}

// DiskFull is the cause while the cache's disk has had no room for the
// last pack it had to store, nil once a pack was stored again.
func (c *Cache) DiskFull() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.diskFull
}

// Uncached reports whether p is served from memory because the cache disk
// had no room for it: it is meant for the requests at hand only, and whoever
// holds it across requests should let it go and Get it again.
func (c *Cache) Uncached(p *pack.Pack) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.uncached[p]
}

// noteDiskFull records a pack the disk had no room for: counted every
// time, logged when the disk becomes full.
func (c *Cache) noteDiskFull(err error) {
	c.mu.Lock()
	was := c.diskFull != nil
	c.diskFull = err
	c.stats.WriteErrors++
	c.mu.Unlock()
	if c.opt.metrics != nil {
		c.opt.metrics.WriteError()
	}
	if !was {
		c.log.Warn("packcache: cache disk full: packs that do not fit are served from memory, uncached, until space is freed",
			zap.String("dir", c.dir), zap.Error(err))
	}
}

// noteStored clears the disk-full state once a pack was stored.
func (c *Cache) noteStored() {
	c.mu.Lock()
	was := c.diskFull != nil
	c.diskFull = nil
	c.mu.Unlock()
	if was {
		c.log.Info("packcache: cache disk has room again", zap.String("dir", c.dir))
	}
}

// loadWithoutRoom is load after the disk had no room for a download:
// unheld packs are evicted to make room and the download tried again
// once; failing that the pack is read from the store into memory for its
// holders (direct: the caller must not cache it).
func (c *Cache) loadWithoutRoom(ctx context.Context, packKey, idxKey, name string, want object.ID, full *noRoom) (p *pack.Pack, size int64, dl *arriving, direct bool, err error) {
	c.noteDiskFull(full)
	if NoSpace(full) && c.freeFor(full.need) {
		p, size, dl, err = c.load(ctx, packKey, idxKey, name, want, false, false)
		var again *noRoom
		if !errors.As(err, &again) {
			return p, size, dl, false, err
		}
		c.noteDiskFull(again)
	}
	p, size, err = c.fromStore(ctx, packKey, idxKey, want)
	if err != nil {
		return nil, 0, nil, false, fmt.Errorf("%w: %s: %w (and not served from memory: %w)", ErrDiskFull, name, full, err)
	}
	return p, size, nil, true, nil
}

// freeFor evicts unheld packs, least recently used first and regardless
// of WithMinIdle, until need bytes are freed; it reports whether they were.
func (c *Cache) freeFor(need int64) bool {
	c.mu.Lock()
	victims := pickVictims(c.entries, c.bytes, c.bytes-need, c.opt.now())
	var freed int64
	for _, e := range victims {
		freed += e.size
	}
	c.mu.Unlock()
	if freed < need {
		return false
	}
	c.mu.Lock()
	c.evictLocked(victims)
	c.mu.Unlock()
	c.metricEvict(victims)
	return true
}

// fromStore reads a pack and its index from the store into memory and
// opens it there, within the memory fallback's budget; the caller's entry
// gives the bytes back when the pack closes (entry.mem).
func (c *Cache) fromStore(ctx context.Context, packKey, idxKey string, want object.ID) (*pack.Pack, int64, error) {
	info, err := c.store.Head(ctx, packKey)
	if err != nil {
		return nil, 0, fmt.Errorf("head %s: %w", packKey, err)
	}
	c.mu.Lock()
	ok := c.memUsed+info.Size <= c.opt.memFallback
	if ok {
		c.memUsed += info.Size
	}
	c.mu.Unlock()
	if !ok {
		return nil, 0, fmt.Errorf("%d bytes are more than the memory fallback has left of %d", info.Size, c.opt.memFallback)
	}
	p, err := c.readToMemory(ctx, packKey, idxKey, want, info.Size)
	if err != nil {
		c.mu.Lock()
		c.memUsed -= info.Size
		c.mu.Unlock()
		return nil, 0, err
	}
	return p, info.Size, nil
}

func (c *Cache) readToMemory(ctx context.Context, packKey, idxKey string, want object.ID, size int64) (*pack.Pack, error) {
	rc, _, err := c.store.Get(ctx, idxKey)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", idxKey, err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", idxKey, err)
	}
	if err := verifyIdx(data, want); err != nil {
		return nil, fmt.Errorf("%s: %w", idxKey, err)
	}
	idx, err := pack.ParseIndex(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", idxKey, err)
	}
	f, err := memFile(packKey)
	if err != nil {
		return nil, err
	}
	rc, info, err := objstore.GetParallel(ctx, c.store, packKey, c.opt.parallel)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("get %s: %w", packKey, err)
	}
	th := newTrailerHasher()
	n, err := io.Copy(io.MultiWriter(f, th), rc)
	rc.Close()
	if err == nil && n != size {
		err = fmt.Errorf("%w: %s: got %d bytes, store says %d (%d at first)", ErrCorrupt, packKey, n, info.Size, size)
	}
	if err == nil {
		err = th.check(want)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("download %s into memory: %w", packKey, err)
	}
	p, err := pack.OpenFile(f, idx, pack.OpenOptions{Bases: c.bases})
	if err != nil {
		f.Close()
		return nil, err
	}
	return p, nil
}
