package packcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/pack"
)

// Sentinel errors callers branch on.
var (
	// ErrLocked: another process holds the cache directory.
	ErrLocked = errors.New("packcache: cache directory locked by another process")
	// ErrClosed: the cache was closed.
	ErrClosed = errors.New("packcache: closed")
)

// Metrics receives cache events. Implementations must be safe for
// concurrent use and fast (they are called on the read path). Storage keeps
// no global registry: the server adapts this to Prometheus counters.
type Metrics interface {
	// Hit: a Get was served without downloading.
	Hit()
	// Miss: a Get downloaded the pack; bytes is what was fetched.
	Miss(bytes int64)
	// Evict: a pack was dropped to stay within the size budget.
	Evict(bytes int64)
	// Corrupt: a cached or downloaded file failed verification.
	Corrupt()
	// WriteError: the cache disk had no room for a pack (or failed to
	// take it); the pack was served from memory or not at all.
	WriteError()
}

// Stats is a point-in-time view of the cache.
type Stats struct {
	Hits, Misses, Evictions, Corrupt uint64
	WriteErrors                      uint64 // packs the disk had no room for
	DownloadedBytes                  int64
	Bytes                            int64 // on disk, pack + idx
	Packs                            int   // cached pairs
	Open                             int   // packs currently opened
	Files                            int   // pack file descriptors open (with WithMaxOpen)
	InUse                            int   // packs with references
}

// Option tunes a Cache.
type Option func(*options)

type options struct {
	maxBytes       int64
	maxOpen        int
	minIdle        time.Duration
	now            func() time.Time
	metrics        Metrics
	verifyExisting bool
	parallel       objstore.ParallelOptions
	onWait         func()
	memFallback    int64
}

// WithMaxBytes sets the size budget (pack + idx bytes on disk). Zero, the
// default, means unlimited.
func WithMaxBytes(n int64) Option { return func(o *options) { o.maxBytes = n } }

// WithMaxOpen bounds the open pack files of the node to n: a pack's file
// descriptor is closed, least recently used first, whenever more than n
// are open and it has no read in flight, and reopened on its next read,
// also while a pack set holds the pack (see pack.FileBudget). Packs
// nobody holds are closed as a whole (their index mappings too) beyond n
// open packs, or beyond n/4 unheld ones, and reopened on their next Get.
// Zero, the default, keeps every pack open.
func WithMaxOpen(n int) Option { return func(o *options) { o.maxOpen = n } }

// WithMinIdle keeps a pack released less than d ago from being evicted.
func WithMinIdle(d time.Duration) Option { return func(o *options) { o.minIdle = d } }

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithOnWait calls f whenever a Get starts waiting on another Get's
// download of the same pack (tests use it to know every Get is parked).
func WithOnWait(f func()) Option { return func(o *options) { o.onWait = f } }

// WithMetrics installs an event sink.
func WithMetrics(m Metrics) Option { return func(o *options) { o.metrics = m } }

// WithVerifyExisting controls whether pack files found on disk from a
// previous run are fully re-hashed on first use (default true). With false
// only their trailers and the index checksum are checked.
func WithVerifyExisting(full bool) Option { return func(o *options) { o.verifyExisting = full } }

// WithParallel tunes the ranged reads that download a large pack
// (objstore.GetParallel's defaults otherwise).
func WithParallel(o objstore.ParallelOptions) Option { return func(opt *options) { opt.parallel = o } }

// Cache is the node-local pack cache. All methods are safe for concurrent use.
type Cache struct {
	dir, packDir, tmpDir string
	store                objstore.Store
	log                  *zap.Logger
	opt                  options
	lock                 *os.File
	files                *pack.FileBudget // nil without WithMaxOpen
	bases                *pack.BaseCache  // the delta bases of every pack opened here

	mu      sync.Mutex
	closed  bool
	entries map[string]*entry
	flights map[string]*flight
	bytes   int64
	// openPacks counts the entries whose pack is open (p != nil), so that
	// trimOpenLocked scans them only when over the budget.
	openPacks int
	// releases counts the releases since trimOpenLocked last scanned.
	releases int
	stats    Stats
	// diskFull is why the last pack that had to be stored was not, until
	// one is (DiskFull); memUsed is what packs served from memory
	// meanwhile hold.
	diskFull error
	memUsed  int64
	uncached map[*pack.Pack]bool // the packs served from memory, open

	// Downloads outlive the Get that started them (a pack is read while
	// it arrives); Close cancels them and waits.
	bg       context.Context
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup
}

// entry is one cached pack pair. p is nil until first opened in this process.
type entry struct {
	name     string
	size     int64
	p        *pack.Pack
	verified bool // content checked in this process (downloaded or re-hashed)
	refs     int
	lastUsed time.Time
	detached bool // removed from the map; close p once refs reach zero

	// The pack's reachability bitmap (see bitmap.go). bmMu serializes its
	// loading; bm, bmState and bmSize are guarded by Cache.mu and belong
	// to p: they are reset whenever p is, except that a known absence
	// stays.
	bmMu    sync.Mutex
	bm      *bitmap.Index
	bmState bitmapState
	bmSize  int64 // counted in size while the bitmap is loaded

	dl *arriving // while p's file is still arriving (GetArriving); guarded by Cache.mu

	mem int64 // bytes of memory p holds: a pack served around a full disk, never cached
}

// flight is one in-progress download or open of a pack; concurrent Gets for
// the same name wait on it instead of fetching again.
type flight struct {
	done  chan struct{}
	err   error
	stale bool // Remove was called meanwhile: do not publish the result
}

// Open opens (creating if needed) the cache in dir and locks it for this
// process. A second process opening the same dir gets an error wrapping
// ErrLocked that names the dir and the holder.
func Open(dir string, store objstore.Store, log *zap.Logger, opts ...Option) (*Cache, error) {
	if log == nil {
		log = zap.NewNop()
	}
	c := &Cache{
		dir:      dir,
		packDir:  filepath.Join(dir, "packs"),
		tmpDir:   filepath.Join(dir, "tmp"),
		store:    store,
		log:      log,
		opt:      options{now: time.Now, verifyExisting: true, memFallback: DefaultMemoryFallback},
		entries:  make(map[string]*entry),
		flights:  make(map[string]*flight),
		uncached: make(map[*pack.Pack]bool),
		bases:    pack.NewBaseCache(0, 0),
	}
	c.bg, c.bgCancel = context.WithCancel(context.Background())
	for _, o := range opts {
		o(&c.opt)
	}
	if c.opt.maxOpen > 0 {
		c.files = pack.NewFileBudget(c.opt.maxOpen)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("packcache: create %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	c.lock = lock
	if err := c.scan(); err != nil {
		_ = unlockDir(lock)
		return nil, err
	}
	return c, nil
}

func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("packcache: open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := io.ReadAll(io.LimitReader(f, 256))
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			h := strings.TrimSpace(string(holder))
			if h == "" {
				h = "holder unknown"
			}
			return nil, fmt.Errorf("%w: %s (%s)", ErrLocked, dir, h)
		}
		return nil, fmt.Errorf("packcache: lock %s: %w", path, err)
	}
	// Best effort: the holder note only improves the error another process sees.
	host, _ := os.Hostname()
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d on %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))), 0)
	}
	return f, nil
}

func unlockDir(f *os.File) error {
	// Closing the descriptor releases the flock.
	return f.Close()
}

// scan wipes partial downloads and registers the complete pairs on disk.
func (c *Cache) scan() error {
	if err := os.RemoveAll(c.tmpDir); err != nil {
		return fmt.Errorf("packcache: clear %s: %w", c.tmpDir, err)
	}
	for _, d := range []string{c.packDir, c.tmpDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("packcache: create %s: %w", d, err)
		}
	}
	des, err := os.ReadDir(c.packDir)
	if err != nil {
		return fmt.Errorf("packcache: list %s: %w", c.packDir, err)
	}
	files := make(map[string]os.FileInfo)
	for _, de := range des {
		if info, err := de.Info(); err == nil && info.Mode().IsRegular() {
			files[de.Name()] = info
		}
	}
	for fname := range files {
		name, ext, ok := splitFile(fname)
		pk, hasPack := files[name+".pack"]
		idx, hasIdx := files[name+".idx"]
		if !ok || !hasPack || !hasIdx {
			// A stray file: a crash between the two renames, a bitmap or
			// reverse index whose pack is gone, or foreign junk.
			c.log.Info("packcache: removing stray file", zap.String("file", fname))
			_ = os.Remove(filepath.Join(c.packDir, fname))
			continue
		}
		if ext != ".pack" {
			continue
		}
		mt := pk.ModTime()
		if idx.ModTime().After(mt) {
			mt = idx.ModTime()
		}
		// A bitmap file found here is counted once it is loaded.
		e := &entry{name: name, size: pk.Size() + idx.Size(), lastUsed: mt}
		c.entries[name] = e
		c.bytes += e.size
	}
	return nil
}

// splitFile splits "pack-<hex>.pack" (or .idx, .bitmap, .rev) into name
// and extension.
func splitFile(fname string) (name, ext string, ok bool) {
	ext = filepath.Ext(fname)
	name = strings.TrimSuffix(fname, ext)
	if ext != ".pack" && ext != ".idx" && ext != ".bitmap" && ext != ".rev" {
		return "", "", false
	}
	if _, err := nameHash(name); err != nil {
		return "", "", false
	}
	return name, ext, true
}

func (c *Cache) paths(name string) (packPath, idxPath string) {
	base := filepath.Join(c.packDir, name)
	return base + ".pack", base + ".idx"
}

func (c *Cache) bitmapPath(name string) string {
	return filepath.Join(c.packDir, name+".bitmap")
}

// removeFiles deletes a pack's cached files: pack, idx, bitmap and the
// reverse index built from them.
func (c *Cache) removeFiles(name string) error {
	pp, ip := c.paths(name)
	return errors.Join(removeIfExists(pp), removeIfExists(ip), removeIfExists(c.bitmapPath(name)),
		removeIfExists(pack.RevPathFor(pp)))
}

// open opens a cached pack within the node's file budget and delta base
// cache, with its reverse index (the pack's offset order) kept beside it so it is
// computed once per pack, not per open.
func (c *Cache) open(pp, ip string) (*pack.Pack, error) {
	return pack.OpenWith(pp, ip, pack.OpenOptions{RevPath: pack.RevPathFor(pp), Files: c.files, Bases: c.bases})
}

// TempDir is a directory on the cache's filesystem for files that will be
// handed to Adopt (so adoption is a rename, not a copy).
func (c *Cache) TempDir() string { return c.tmpDir }

// Dir is the cache directory.
func (c *Cache) Dir() string { return c.dir }

// Get returns the open pack named name ("pack-<hex>"), downloading
// packKey and idxKey from the store on first use; it returns once the
// pack's files are whole, verified and in the cache. The caller must call
// release exactly once when done with the pack (further calls are no-ops);
// the pack stays open while anyone holds it.
func (c *Cache) Get(ctx context.Context, packKey, idxKey, name string) (*pack.Pack, func(), error) {
	p, release, dl, err := c.get(ctx, packKey, idxKey, name)
	if err != nil || dl == nil {
		return p, release, err
	}
	select {
	case <-dl.done:
	case <-ctx.Done():
		release()
		return nil, nil, fmt.Errorf("packcache: wait for %s: %w", name, ctx.Err())
	}
	if dl.err != nil {
		release()
		return nil, nil, dl.err
	}
	return p, release, nil
}

// GetArriving is Get, but a pack that must be downloaded is returned as
// soon as its index is verified: its file is still arriving (in order,
// from its start) and reads wait for the bytes they need (see
// pack.Arrival), so a clone can stream a pack while it downloads. The
// download continues after the caller has gone and is shared by every
// caller meanwhile. If it fails (the store, or the pack's checksum), reads
// past what arrived fail with its error, p.Arrival().Err() says so, and
// the cache keeps no file of it: the next Get downloads again.
func (c *Cache) GetArriving(ctx context.Context, packKey, idxKey, name string) (*pack.Pack, func(), error) {
	p, release, _, err := c.get(ctx, packKey, idxKey, name)
	return p, release, err
}

// get is GetArriving that also returns the download still in progress,
// if any.
func (c *Cache) get(ctx context.Context, packKey, idxKey, name string) (*pack.Pack, func(), *arriving, error) {
	want, err := nameHash(name)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("packcache: get: %w", err)
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, nil, nil, ErrClosed
		}
		e := c.entries[name]
		if e != nil && e.p != nil {
			e.refs++
			e.lastUsed = c.opt.now()
			c.stats.Hits++
			dl := e.dl
			c.mu.Unlock()
			c.metricHit()
			return e.p, c.releaser(e), dl, nil
		}
		if f := c.flights[name]; f != nil {
			c.mu.Unlock()
			if c.opt.onWait != nil {
				c.opt.onWait()
			}
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, nil, nil, fmt.Errorf("packcache: wait for %s: %w", name, ctx.Err())
			}
			// A leader that failed only because its own ctx ended says
			// nothing about ours: try again (possibly leading ourselves).
			if f.err != nil && !(isCtxErr(f.err) && ctx.Err() == nil) {
				return nil, nil, nil, f.err
			}
			continue
		}
		f := &flight{done: make(chan struct{})}
		c.flights[name] = f
		onDisk := e != nil
		verified := e != nil && e.verified
		c.mu.Unlock()

		p, size, dl, err := c.load(ctx, packKey, idxKey, name, want, onDisk, verified)
		direct := false
		if full := (*noRoom)(nil); errors.As(err, &full) {
			p, size, dl, direct, err = c.loadWithoutRoom(ctx, packKey, idxKey, name, want, full)
		}
		f.err = err
		c.mu.Lock()
		delete(c.flights, name)
		if err != nil {
			if old := c.entries[name]; old != nil && old.p == nil && !c.fileExists(name) {
				// load deleted a corrupt pair.
				c.bytes -= old.size
				delete(c.entries, name)
			}
			c.mu.Unlock()
			close(f.done)
			return nil, nil, nil, err
		}
		var ne *entry
		if direct {
			ne = &entry{name: name, p: p, verified: true, detached: true, mem: size}
			c.uncached[p] = true
		} else {
			ne = c.publish(name, p, size, f.stale)
		}
		ne.refs++
		ne.lastUsed = c.opt.now()
		if dl != nil || direct {
			c.stats.Misses++
			c.stats.DownloadedBytes += size
		}
		if dl != nil {
			// The download holds the pack until it has arrived, so it is
			// neither evicted nor closed meanwhile.
			ne.refs++
			ne.dl = dl
			c.bgWG.Add(1)
			go c.arrive(ne, dl)
		} else if !direct {
			c.stats.Hits++
		}
		c.mu.Unlock()
		close(f.done)
		if dl != nil || direct {
			c.metricMiss(size)
		} else {
			c.metricHit()
		}
		c.evict()
		return p, c.releaser(ne), dl, nil
	}
}

func (c *Cache) fileExists(name string) bool {
	pp, _ := c.paths(name)
	_, err := os.Stat(pp)
	return err == nil
}

// publish records an opened pack. Called with c.mu held. A pack opened
// after a concurrent Remove or Close is handed to its caller only: detached
// and with its files already gone.
func (c *Cache) publish(name string, p *pack.Pack, size int64, stale bool) *entry {
	if stale || c.closed {
		if stale {
			_ = c.removeFiles(name)
		}
		return &entry{name: name, size: size, p: p, verified: true, detached: true}
	}
	e := c.entries[name]
	if e == nil {
		e = &entry{name: name}
		c.entries[name] = e
	} else {
		c.bytes -= e.size
	}
	if e.p == nil {
		c.openPacks++
	}
	e.size, e.p, e.verified = size, p, true
	e.bm, e.bmSize = nil, 0
	if e.bmState != bitmapAbsent {
		e.bmState = bitmapUnknown
	}
	c.bytes += size
	return e
}

func (c *Cache) releaser(e *entry) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			e.refs--
			e.lastUsed = c.opt.now()
			var toClose []*pack.Pack
			if e.detached && e.refs == 0 && e.p != nil {
				if e.mem > 0 {
					delete(c.uncached, e.p)
					c.memUsed -= e.mem
				}
				toClose, e.p, e.bm = append(toClose, e.p), nil, nil
			}
			var idle *pack.Pack
			if e.refs == 0 {
				toClose = append(toClose, c.trimOpenLocked()...)
				idle = e.p
			}
			c.mu.Unlock()
			for _, p := range toClose {
				c.closePack(p)
			}
			if idle != nil && !slices.Contains(toClose, idle) {
				// No pack set holds it (a retired pack, a repository gone
				// cold): it keeps its mapping but not a descriptor.
				idle.CloseFile()
			}
			c.evict()
		})
	}
}

// trimOpenLocked closes, least recently used first, unheld open packs
// beyond the budgets; their files stay cached. Called on every release
// of a pack's last hold, it scans the open packs only when over maxOpen
// (and then trims an eighth below it, so that the scan does not repeat
// on the next release), or every maxOpen/32 releases to keep the unheld
// packs within maxOpen/4: the packs of repositories gone cold stay
// mapped for a quick reopen, but so few that a node's memory does not
// grow with how many repositories it has served. It returns the packs
// for the caller to close after unlocking. Called with c.mu held.
func (c *Cache) trimOpenLocked() []*pack.Pack {
	if c.opt.maxOpen <= 0 {
		return nil
	}
	c.releases++
	if c.openPacks <= c.opt.maxOpen && c.releases <= c.opt.maxOpen/32 {
		return nil
	}
	c.releases = 0
	var idle []*entry
	for _, e := range c.entries {
		if e.p != nil && e.refs == 0 {
			idle = append(idle, e)
		}
	}
	n := len(idle) - max(c.opt.maxOpen/4, 1)
	if c.openPacks > c.opt.maxOpen {
		n = max(n, c.openPacks-(c.opt.maxOpen-c.opt.maxOpen/8))
	}
	if n <= 0 {
		return nil
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].lastUsed.Before(idle[j].lastUsed) })
	var out []*pack.Pack
	for _, e := range idle[:min(len(idle), n)] {
		// The bitmap belongs to the open pack; it is loaded again with it.
		// That there is none stays known: a repository's fetches ask for
		// the bitmap of every pack, and the store need not be asked again
		// whenever the open-pack budget closed one.
		if e.bmState == bitmapLoaded {
			e.size -= e.bmSize
			c.bytes -= e.bmSize
			e.bmState = bitmapUnknown
		}
		out = append(out, e.p)
		e.p, e.bm, e.bmSize = nil, nil, 0
		c.openPacks--
	}
	return out
}

// DropBaseCaches drops the delta bases (of every pack opened here) that
// no read used within unusedFor, and returns the bytes dropped. An idle
// node calls it before returning memory to the OS.
func (c *Cache) DropBaseCaches(unusedFor time.Duration) int64 {
	return c.bases.Drop(unusedFor)
}

func (c *Cache) closePack(p *pack.Pack) {
	if err := p.Close(); err != nil {
		c.log.Warn("packcache: close pack", zap.String("pack", p.Name()), zap.Error(err))
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// load opens the pack from disk if a verified copy is there, otherwise
// starts its download (dl, to be handed to arrive). A corrupt cached copy
// is deleted and downloaded again once.
func (c *Cache) load(ctx context.Context, packKey, idxKey, name string, want object.ID, onDisk, verified bool) (p *pack.Pack, size int64, dl *arriving, err error) {
	pp, ip := c.paths(name)
	if onDisk {
		size, err := c.checkExisting(pp, ip, want, !verified && c.opt.verifyExisting)
		if err == nil {
			p, err = c.open(pp, ip)
		}
		if err == nil {
			return p, size, nil, nil
		}
		c.noteCorrupt()
		c.log.Warn("packcache: cached pack unusable, downloading again", zap.String("pack", name), zap.Error(err))
		_ = os.Remove(pp)
		_ = os.Remove(ip)
	}
	p, dl, err = c.download(ctx, packKey, idxKey, pp, want)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			c.noteCorrupt()
		}
		return nil, 0, nil, fmt.Errorf("packcache: fetch %s: %w", name, err)
	}
	return p, dl.size, dl, nil
}

func (c *Cache) checkExisting(pp, ip string, want object.ID, full bool) (int64, error) {
	if err := verifyPackFile(pp, want, full); err != nil {
		return 0, err
	}
	if err := verifyIdxFile(ip, want); err != nil {
		return 0, err
	}
	var size int64
	for _, path := range []string{pp, ip} {
		st, err := os.Stat(path)
		if err != nil {
			return 0, fmt.Errorf("stat %s: %w", path, err)
		}
		size += st.Size()
	}
	return size, nil
}

// arriving is a download whose pack is already open and read while the
// rest of its file arrives (see GetArriving).
type arriving struct {
	tmpPack, tmpIdx string
	size            int64              // pack + idx bytes
	cancel          context.CancelFunc // of the fetches, once they are over
	packDone        chan error         // the pack's fetch: its file is whole and checked, or why not
	done            chan struct{}      // closed by arrive once the files are published or gone
	err             error              // set before done closes
}

// download fetches both objects into temp files at once, verifying them
// while streaming. It returns once the index is whole and verified, with
// the pack opened on its file as it arrives (pack.Arrival). The fetches
// run under the cache's context, not ctx: the pack is shared with every
// later reader, so its download outlives this caller. arrive then
// publishes the files (by rename, idx last: a pack without its idx is a
// stray that scan removes).
func (c *Cache) download(ctx context.Context, packKey, idxKey, pp string, want object.ID) (*pack.Pack, *arriving, error) {
	dctx, cancel := context.WithCancel(c.bg)
	type fetched struct {
		path string
		n    int64
		err  error
	}
	idxDone := make(chan fetched, 1)
	go func() {
		path, n, err := c.fetch(dctx, idxKey, nil)
		if err == nil {
			if err = verifyIdxFile(path, want); err != nil {
				os.Remove(path)
				err = fmt.Errorf("%s: %w", idxKey, err)
			}
		}
		idxDone <- fetched{path, n, err}
	}()
	dl := &arriving{cancel: cancel, packDone: make(chan error, 1), done: make(chan struct{})}
	var idx *fetched
	// fail stops the fetches and removes what they wrote. With packStarted
	// the pack's own error, if any, wins: it is why the open failed.
	fail := func(err error, packStarted bool) (*pack.Pack, *arriving, error) {
		cancel()
		if packStarted {
			if perr := <-dl.packDone; perr == nil {
				os.Remove(dl.tmpPack) // it arrived, but will not be published
			} else if !errors.Is(perr, context.Canceled) {
				err = perr
			}
		}
		if idx == nil {
			got := <-idxDone
			idx = &got
		}
		if idx.path != "" {
			os.Remove(idx.path)
		}
		return nil, nil, err
	}
	rc, info, err := objstore.GetParallel(dctx, c.store, packKey, c.opt.parallel)
	if err != nil {
		return fail(fmt.Errorf("get %s: %w", packKey, err), false)
	}
	if info.Size < packHeaderSize+object.IDSize {
		rc.Close()
		return fail(fmt.Errorf("%w: %s is %d bytes, too short", ErrCorrupt, packKey, info.Size), false)
	}
	tmp, err := c.createTemp(packKey, info.Size)
	if err != nil {
		rc.Close()
		return fail(err, false)
	}
	dl.tmpPack = tmp.Name()
	a := pack.NewArrival(info.Size)
	go func() {
		th := newTrailerHasher()
		_, _, err := c.save(packKey, rc, info, tmp, io.MultiWriter(th, &advancer{a: a}))
		if err == nil {
			if err = th.check(want); err != nil {
				os.Remove(dl.tmpPack)
				err = fmt.Errorf("%s: %w", packKey, err)
			}
		}
		// Readers learn the outcome at once; the files follow in arrive.
		if err != nil {
			a.Fail(err)
		} else {
			a.Done()
		}
		dl.packDone <- err
	}()
	select {
	case got := <-idxDone:
		idx = &got
	case <-ctx.Done():
		return fail(ctx.Err(), true)
	}
	if idx.err != nil {
		return fail(idx.err, true)
	}
	p, err := pack.OpenWith(dl.tmpPack, idx.path, pack.OpenOptions{RevPath: pack.RevPathFor(pp), Files: c.files, Arrival: a, Bases: c.bases})
	if err != nil {
		return fail(fmt.Errorf("open %s: %w", packKey, err), true)
	}
	dl.tmpIdx, dl.size = idx.path, info.Size+idx.n
	return p, dl, nil
}

// advancer tells an Arrival how many bytes were written before it.
type advancer struct {
	a *pack.Arrival
	n int64
}

func (w *advancer) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	w.a.Advance(w.n)
	return len(p), nil
}

// arrive waits for e's download to finish, then publishes its files or,
// if it failed, drops e so the next Get downloads again. It holds one of
// e's references, released at the end.
func (c *Cache) arrive(e *entry, dl *arriving) {
	defer c.bgWG.Done()
	err := <-dl.packDone
	dl.cancel()
	if err != nil {
		// Removed before the entry is dropped: a Get that downloads again
		// once it is gone must find no file of this download left.
		_ = os.Remove(dl.tmpPack)
		_ = os.Remove(dl.tmpIdx)
	}
	pp, ip := c.paths(e.name)
	c.mu.Lock()
	current := c.entries[e.name] == e && !c.closed
	published := false
	if err == nil && current {
		if err = os.Rename(dl.tmpPack, pp); err == nil {
			if err = os.Rename(dl.tmpIdx, ip); err != nil {
				_ = os.Remove(pp)
			}
		}
		if err != nil {
			err = fmt.Errorf("packcache: publish %s: %w", e.name, err)
		}
		published = err == nil
	}
	if err != nil && current {
		c.dropLocked(e)
	}
	e.dl = nil
	c.mu.Unlock()
	if published {
		c.noteStored()
		e.p.Settle(pp)
	} else {
		// Failed, or the entry was removed meanwhile: its readers keep the
		// open file, the directory keeps nothing.
		_ = os.Remove(dl.tmpPack)
		_ = os.Remove(dl.tmpIdx)
		if err == nil {
			_ = removeIfExists(pack.RevPathFor(pp))
		}
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			c.noteCorrupt()
		}
		dl.err = fmt.Errorf("packcache: fetch %s: %w", e.name, err)
	}
	// Released before done closes, so a Get that waited finds the cache
	// settled.
	c.releaser(e)()
	close(dl.done)
}

// fetch copies one object into a synced temp file, teeing it into tee. A
// large object arrives as parallel ranged reads (objstore.GetParallel); a
// failure leaves no file behind.
func (c *Cache) fetch(ctx context.Context, key string, tee io.Writer) (path string, n int64, err error) {
	rc, info, err := objstore.GetParallel(ctx, c.store, key, c.opt.parallel)
	if err != nil {
		return "", 0, fmt.Errorf("get %s: %w", key, err)
	}
	f, err := c.createTemp(key, info.Size)
	if err != nil {
		rc.Close()
		return "", 0, err
	}
	return c.save(key, rc, info, f, tee)
}

// save copies rc (the object key, described by info) into f, teeing it
// into tee, and closes both; on failure f is removed.
func (c *Cache) save(key string, rc io.ReadCloser, info objstore.ObjectInfo, f *os.File, tee io.Writer) (path string, n int64, err error) {
	defer rc.Close()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	var w io.Writer = f
	if tee != nil {
		w = io.MultiWriter(f, tee)
	}
	n, err = io.Copy(w, rc)
	if err != nil {
		return "", 0, fmt.Errorf("download %s: %w", key, err)
	}
	if info.Size >= 0 && n != info.Size {
		return "", 0, fmt.Errorf("%w: %s: got %d bytes, store says %d", ErrCorrupt, key, n, info.Size)
	}
	// A crash may leave a published file with missing blocks unless it is
	// synced. Files found at the next open are fully re-hashed before use
	// (WithVerifyExisting, the default), which catches that, so the sync
	// (0.1-0.25 s for a 156 MB pack here, on a cold node's first request)
	// is needed only when they are not.
	if !c.opt.verifyExisting {
		if err = f.Sync(); err != nil {
			return "", 0, fmt.Errorf("sync %s: %w", f.Name(), err)
		}
	}
	if err = f.Close(); err != nil {
		return "", 0, fmt.Errorf("close %s: %w", f.Name(), err)
	}
	return f.Name(), n, nil
}

// Adopt moves a locally produced pack pair (e.g. just indexed from a push)
// into the cache under name, so the first Get needs no download. The files
// are renamed (copied if on another filesystem) and gone from their old
// paths afterwards, also when the pack was already cached. The pack is
// taken to have no bitmap until AdoptBitmap installs one.
func (c *Cache) Adopt(localPackPath, localIdxPath, name string) error {
	want, err := nameHash(name)
	if err != nil {
		return fmt.Errorf("packcache: adopt: %w", err)
	}
	// The producer hashed the pack while writing it; check identity cheaply.
	if err := verifyPackFile(localPackPath, want, false); err != nil {
		return fmt.Errorf("packcache: adopt %s: %w", name, err)
	}
	if err := verifyIdxFile(localIdxPath, want); err != nil {
		return fmt.Errorf("packcache: adopt %s: %w", name, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.entries[name] != nil || c.flights[name] != nil {
		c.mu.Unlock()
		// Already cached or being fetched: identical content by name.
		return errors.Join(removeIfExists(localPackPath), removeIfExists(localIdxPath))
	}
	f := &flight{done: make(chan struct{})}
	c.flights[name] = f
	c.mu.Unlock()

	pp, ip := c.paths(name)
	size, err := adoptFile(localPackPath, pp, c.tmpDir)
	if err == nil {
		var n int64
		n, err = adoptFile(localIdxPath, ip, c.tmpDir)
		size += n
	}
	if err != nil {
		_ = os.Remove(pp)
		_ = os.Remove(ip)
		err = fmt.Errorf("packcache: adopt %s: %w", name, err)
	}
	c.mu.Lock()
	delete(c.flights, name)
	f.err = err
	if err == nil && !f.stale && !c.closed {
		// A pack written here has no bitmap in the store: one built for it
		// is built here too, and AdoptBitmap installs it.
		c.entries[name] = &entry{name: name, size: size, verified: true, lastUsed: c.opt.now(), bmState: bitmapAbsent}
		c.bytes += size
	} else if err == nil && f.stale {
		_ = os.Remove(pp)
		_ = os.Remove(ip)
	}
	c.mu.Unlock()
	close(f.done)
	if err == nil {
		c.evict()
	}
	return err
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// adoptFile renames src to dst, falling back to copy + rename through
// tmpDir when they are on different filesystems.
func adoptFile(src, dst, tmpDir string) (int64, error) {
	st, err := os.Stat(src)
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", src, err)
	}
	err = os.Rename(src, dst)
	if err == nil {
		return st.Size(), nil
	}
	if !errors.Is(err, syscall.EXDEV) {
		return 0, fmt.Errorf("rename %s: %w", src, err)
	}
	in, err := os.Open(src)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.CreateTemp(tmpDir, "adopt-*")
	if err != nil {
		return 0, fmt.Errorf("create temp: %w", err)
	}
	defer os.Remove(out.Name())
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("copy %s: %w", src, err)
	}
	if err := os.Rename(out.Name(), dst); err != nil {
		return 0, fmt.Errorf("rename to %s: %w", dst, err)
	}
	return n, removeIfExists(src)
}

// Remove drops a pack from the cache and deletes its files. Current users
// keep their open handle (the pack is closed when the last one releases);
// the next Get downloads it again.
func (c *Cache) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.flights[name]; f != nil {
		f.stale = true
	}
	e := c.entries[name]
	if e == nil {
		return nil
	}
	c.dropLocked(e)
	return c.removeFiles(name)
}

// dropLocked unregisters e; its pack closes now if unused, else on last
// release. A held pack keeps its file open from now on: its files are
// about to be deleted, so the budget could not reopen it.
func (c *Cache) dropLocked(e *entry) {
	delete(c.entries, e.name)
	c.bytes -= e.size
	e.detached = true
	if e.p == nil {
		return
	}
	c.openPacks--
	if e.refs == 0 {
		c.closePack(e.p)
		e.p, e.bm = nil, nil
		return
	}
	if err := e.p.KeepOpen(); err != nil {
		c.log.Warn("packcache: keep a dropped pack open for its users", zap.String("pack", e.name), zap.Error(err))
	}
}

// Evict drops least recently used unreferenced packs until the cache fits
// its budget, and returns the bytes freed. It runs automatically after
// downloads, adoptions and releases.
func (c *Cache) Evict() int64 {
	return c.evict()
}

func (c *Cache) evict() int64 {
	c.mu.Lock()
	if c.opt.maxBytes <= 0 || c.bytes <= c.opt.maxBytes || c.closed {
		c.mu.Unlock()
		return 0
	}
	victims := pickVictims(c.entries, c.bytes, c.opt.maxBytes, c.opt.now().Add(-c.opt.minIdle))
	freed := c.evictLocked(victims)
	c.mu.Unlock()
	c.metricEvict(victims)
	return freed
}

// evictLocked drops victims and deletes their files, and returns the
// bytes freed. Called with c.mu held.
func (c *Cache) evictLocked(victims []*entry) int64 {
	var freed int64
	for _, e := range victims {
		c.dropLocked(e)
		if err := c.removeFiles(e.name); err != nil {
			c.log.Warn("packcache: evict", zap.String("pack", e.name), zap.Error(err))
		}
		freed += e.size
		c.stats.Evictions++
	}
	return freed
}

func (c *Cache) metricEvict(victims []*entry) {
	if c.opt.metrics != nil {
		for _, e := range victims {
			c.opt.metrics.Evict(e.size)
		}
	}
}

// pickVictims chooses, oldest use first, unreferenced entries idle since
// before idleBefore, until total fits max. Pure: the policy in one place.
func pickVictims(entries map[string]*entry, total, max int64, idleBefore time.Time) []*entry {
	var cands []*entry
	for _, e := range entries {
		if e.refs == 0 && !e.lastUsed.After(idleBefore) {
			cands = append(cands, e)
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if !cands[i].lastUsed.Equal(cands[j].lastUsed) {
			return cands[i].lastUsed.Before(cands[j].lastUsed)
		}
		return cands[i].name < cands[j].name
	})
	var out []*entry
	for _, e := range cands {
		if total <= max {
			break
		}
		out = append(out, e)
		total -= e.size
	}
	return out
}

// Stats returns counters and sizes.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes = c.bytes
	s.Packs = len(c.entries)
	if c.files != nil {
		s.Files = c.files.Open()
	}
	for _, e := range c.entries {
		if e.p != nil {
			s.Open++
		}
		if e.refs > 0 {
			s.InUse++
		}
	}
	return s
}

func (c *Cache) metricHit() {
	if c.opt.metrics != nil {
		c.opt.metrics.Hit()
	}
}

func (c *Cache) metricMiss(n int64) {
	if c.opt.metrics != nil {
		c.opt.metrics.Miss(n)
	}
}

func (c *Cache) noteCorrupt() {
	c.mu.Lock()
	c.stats.Corrupt++
	c.mu.Unlock()
	if c.opt.metrics != nil {
		c.opt.metrics.Corrupt()
	}
}

// Close stops the downloads in flight, closes every unreferenced pack and
// releases the directory lock.
// Packs still held are closed when their users release them. Files stay
// on disk for the next Open.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, e := range c.entries {
		e.detached = true
		if e.refs == 0 && e.p != nil {
			c.closePack(e.p)
			e.p, e.bm = nil, nil
		}
	}
	c.entries, c.openPacks = map[string]*entry{}, 0
	c.mu.Unlock()
	// Downloads in flight stop; their readers get the error.
	c.bgCancel()
	c.bgWG.Wait()
	if err := unlockDir(c.lock); err != nil {
		return fmt.Errorf("packcache: unlock %s: %w", c.dir, err)
	}
	return nil
}
