package packcache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/pack"
)

// bitmapState is what the cache knows about a pack's bitmap.
type bitmapState uint8

const (
	bitmapUnknown bitmapState = iota // not looked for since the pack was opened
	bitmapLoaded                     // entry.bm is set
	bitmapAbsent                     // none in the store, or unusable
)

// Bitmap returns the reachability bitmap of the pack name, which the
// caller must hold (from Get) for as long as it uses the index. The index
// is loaded once per opened pack, from dir/packs/name.bitmap or else from
// bitmapKey in the store, and shared by every caller.
//
// nil means "walk instead": the pack has no bitmap, the bitmap is corrupt
// or belongs to other bytes (logged and counted as corrupt; bitmap.Open
// checks its checksum and the pack's), or the store failed (logged; a
// later call tries again). A missing or bad bitmap is remembered while the
// pack stays cached (also across closing and reopening it under the
// open-file budget) or until AdoptBitmap installs one, so the store is
// asked once; a pack adopted from this node (Adopt) is known to have none.
func (c *Cache) Bitmap(ctx context.Context, bitmapKey, name string) *bitmap.Index {
	c.mu.Lock()
	e := c.entries[name]
	if e == nil || e.p == nil {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()

	e.bmMu.Lock()
	defer e.bmMu.Unlock()
	c.mu.Lock()
	p, state, bm := e.p, e.bmState, e.bm
	c.mu.Unlock()
	switch {
	case p == nil:
		return nil
	case state == bitmapLoaded:
		return bm
	case state == bitmapAbsent:
		return nil
	}

	bm, size, err := c.loadBitmap(ctx, bitmapKey, name, p)
	if err != nil {
		// Transient (store or context): leave the state unknown.
		c.log.Warn("packcache: bitmap unavailable, walking", zap.String("pack", name), zap.Error(err))
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.p != p {
		// The pack was closed meanwhile; the index would point at it.
		return nil
	}
	if bm == nil {
		e.bmState = bitmapAbsent
		return nil
	}
	e.bm, e.bmState, e.bmSize = bm, bitmapLoaded, size
	if !e.detached {
		e.size += size
		c.bytes += size
	}
	return bm
}

// loadBitmap opens the cached bitmap file of p, downloading it first if
// there is none. A nil index with a nil error means there is no usable
// bitmap; an error is transient.
func (c *Cache) loadBitmap(ctx context.Context, key, name string, p *pack.Pack) (*bitmap.Index, int64, error) {
	path := c.bitmapPath(name)
	bm, size, err := openBitmapFile(path, p)
	switch {
	case err == nil:
		return bm, size, nil
	case !errors.Is(err, fs.ErrNotExist):
		// Corrupt on disk: the store's copy may still be good.
		c.noteCorrupt()
		c.log.Warn("packcache: cached bitmap unusable, downloading again", zap.String("pack", name), zap.Error(err))
		_ = os.Remove(path)
	}
	tmp, _, err := c.fetch(ctx, key, nil)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("fetch bitmap of %s: %w", name, err)
	}
	defer os.Remove(tmp) // no-op once renamed
	bm, size, err = openBitmapFile(tmp, p)
	if err != nil {
		c.noteCorrupt()
		c.log.Warn("packcache: ignoring bitmap from the store", zap.String("pack", name), zap.String("key", key), zap.Error(err))
		return nil, 0, nil
	}
	if err := os.Rename(tmp, path); err != nil {
		// The index is in memory already; only the next process re-downloads.
		c.log.Warn("packcache: keep bitmap", zap.String("pack", name), zap.Error(err))
	}
	return bm, size, nil
}

func openBitmapFile(path string, p *pack.Pack) (*bitmap.Index, int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	bm, err := bitmap.Open(path, p)
	if err != nil {
		return nil, 0, err
	}
	return bm, st.Size(), nil
}

// AdoptBitmap moves a bitmap file built on this node for the cached pack
// name into the cache (renamed, or copied across filesystems), so the next
// Bitmap call loads it without a download, also when an earlier call found
// none. The file is gone from path afterwards. A pack not in the cache
// needs no bitmap here: the file is just removed.
func (c *Cache) AdoptBitmap(path, name string) error {
	if _, err := nameHash(name); err != nil {
		return fmt.Errorf("packcache: adopt bitmap: %w", err)
	}
	c.mu.Lock()
	e := c.entries[name]
	if c.closed || e == nil {
		c.mu.Unlock()
		return removeIfExists(path)
	}
	c.mu.Unlock()

	// Under bmMu no Bitmap call is reading the file we replace.
	e.bmMu.Lock()
	defer e.bmMu.Unlock()
	if _, err := adoptFile(path, c.bitmapPath(name), c.tmpDir); err != nil {
		return fmt.Errorf("packcache: adopt bitmap of %s: %w", name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.bmState == bitmapLoaded && !e.detached {
		e.size -= e.bmSize
		c.bytes -= e.bmSize
	}
	e.bm, e.bmState, e.bmSize = nil, bitmapUnknown, 0
	if c.entries[name] != e {
		// Removed meanwhile: its files must not outlive it.
		_ = removeIfExists(c.bitmapPath(name))
	}
	return nil
}
