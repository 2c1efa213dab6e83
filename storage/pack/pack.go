package pack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/rgit/rgit/storage/object"
)

// DefaultCacheBytes is the default budget of a delta base cache
// (BaseCache), a node's or a lone Pack's.
const DefaultCacheBytes = 32 << 20

// maxReadChain bounds delta chains followed while reading a stored pack.
// Packs are validated by IndexPack with a smaller depth limit; this only
// stops a corrupt pack (e.g. a REF_DELTA cycle) from looping forever.
const maxReadChain = 10000

// OpenOptions tune a Pack.
type OpenOptions struct {
	// Bases, if set, caches the pack's delta bases together with those of
	// every other pack opened with it, within its budget. Nil: the pack
	// has a cache of its own of CacheBytes.
	Bases *BaseCache
	// CacheBytes is the budget of the pack's own delta base cache when
	// Bases is nil; 0 means DefaultCacheBytes.
	CacheBytes int64
	// RevPath, if set, names the pack's reverse index file (git's .rev;
	// RevPathFor gives the usual name). The offset order every serve of
	// the pack needs is read from it instead of sorted, when it is valid
	// for this pack; when it is missing or not valid the order is sorted
	// and the file (re)written atomically, so only the first process to
	// open a pack pays for the sort. Empty: sort in every process.
	RevPath string
	// Files, if set, bounds the open pack files: this pack's file is
	// closed while unused when the budget needs it, and reopened by path
	// on the next read. Nil: the file stays open until Close.
	Files *FileBudget
	// Arrival, if set, says the pack file is still being written (a
	// download; see Arrival): reads wait for their bytes, the file stays
	// open outside Files until Settle, and the trailer is not read here:
	// the writer checks it against the index before Done.
	Arrival *Arrival
}

// Pack is a pack file with its index. Safe for concurrent use.
type Pack struct {
	f     *packFile
	idx   *Index
	name  string
	size  int64
	id    uint64 // the pack's key in cache
	cache *BaseCache
	// ownCache: cache is the pack's own (OpenOptions.Bases nil), emptied
	// by Close rather than left for its idle timer.
	ownCache bool

	byOffOnce sync.Once
	byOff     []uint32 // index positions sorted by pack offset
	byOffErr  error
	revPath   string // reverse index file backing byOff, or ""

	// headers, if set (OpenIndexed), holds every object's resolved type
	// and size by index position.
	headers []objHeader
}

type objHeader struct {
	size int64
	typ  object.Type
}

// Open opens a pack and its index and checks that they belong together.
func Open(packPath, idxPath string) (*Pack, error) {
	return OpenWith(packPath, idxPath, OpenOptions{})
}

// OpenWith is Open with options.
func OpenWith(packPath, idxPath string, opts OpenOptions) (*Pack, error) {
	idx, err := OpenIndex(idxPath)
	if err != nil {
		return nil, err
	}
	p, err := openPack(packPath, idx, opts)
	if err != nil {
		idx.Close()
		return nil, err
	}
	return p, nil
}

// OpenFile opens a pack whose data is f, with its index already parsed
// (ParseIndex): a pack with no path to reopen it by, such as one held in
// memory. The pack owns f and closes it; opts.Files must be nil.
func OpenFile(f *os.File, idx *Index, opts OpenOptions) (*Pack, error) {
	if opts.Files != nil {
		return nil, errors.New("pack: OpenFile with a file budget: nothing to reopen the file by")
	}
	p, err := newPack(f.Name(), f, idx, opts)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", f.Name(), err)
	}
	return p, nil
}

// OpenIndexed opens the pack and index IndexPack wrote, keeping the type and
// size of every object it resolved, so ReadHeader answers from memory
// instead of inflating delta headers along each chain (a push's
// connectivity check asks it for every new blob).
func OpenIndexed(ix *Indexed) (*Pack, error) {
	p, err := Open(ix.PackPath, ix.IdxPath)
	if err != nil {
		return nil, err
	}
	if err := p.setHeaders(ix.Objects); err != nil {
		p.Close()
		return nil, fmt.Errorf("pack %s: %w", ix.PackPath, err)
	}
	return p, nil
}

func (p *Pack) setHeaders(objs []IndexedObject) error {
	if len(objs) != p.idx.Count() {
		return fmt.Errorf("indexed %d objects, index has %d", len(objs), p.idx.Count())
	}
	hdrs := make([]objHeader, len(objs))
	for _, o := range objs {
		i, ok := p.idx.Find(o.ID)
		if !ok || p.idx.Offset(i) != o.Offset {
			return fmt.Errorf("indexed object %s at offset %d is not in the index there", o.ID, o.Offset)
		}
		hdrs[i] = objHeader{size: o.Size, typ: o.Type}
	}
	p.headers = hdrs
	return nil
}

func openPack(packPath string, idx *Index, opts OpenOptions) (*Pack, error) {
	f, err := os.Open(packPath)
	if err != nil {
		return nil, fmt.Errorf("open pack: %w", err)
	}
	p, err := newPack(packPath, f, idx, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("pack %s: %w", packPath, err)
	}
	return p, nil
}

func newPack(path string, f *os.File, idx *Index, opts OpenOptions) (*Pack, error) {
	var size int64
	if a := opts.Arrival; a != nil {
		size = a.Size()
	} else {
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		size = st.Size()
	}
	if size < packHeaderLen+packTrailerLen {
		return nil, corruptf("pack too short (%d bytes)", size)
	}
	if a := opts.Arrival; a != nil {
		if err := a.waitFor(packHeaderLen); err != nil {
			return nil, err
		}
	}
	var hdr [packHeaderLen]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	count, err := checkPackHeader(hdr[:])
	if err == nil && int64(count) != int64(idx.Count()) {
		err = corruptf("pack has %d objects, index has %d", count, idx.Count())
	}
	if err == nil && opts.Arrival == nil {
		var sum object.ID
		if _, err = f.ReadAt(sum[:], size-packTrailerLen); err != nil {
			err = fmt.Errorf("read trailer: %w", err)
		} else if sum != idx.PackChecksum() {
			err = kindf(ErrChecksum, "pack trailer %s does not match index (%s)", sum, idx.PackChecksum())
		}
	}
	if err != nil {
		return nil, err
	}
	cache, own := opts.Bases, opts.Bases == nil
	if own {
		cache = NewBaseCache(opts.CacheBytes, 0)
	}
	return &Pack{f: newPackFile(path, f, opts.Files, opts.Arrival), idx: idx, name: "pack-" + idx.PackChecksum().String(), size: size,
		id: packIDs.Add(1), cache: cache, ownCache: own, revPath: opts.RevPath}, nil
}

// checkPackHeader validates the 12-byte pack header and returns the count.
func checkPackHeader(hdr []byte) (uint32, error) {
	if !bytes.Equal(hdr[:4], packSignature) {
		return 0, corruptf("bad signature")
	}
	if v := binary.BigEndian.Uint32(hdr[4:]); v != 2 && v != 3 {
		return 0, corruptf("unsupported version %d", v)
	}
	return binary.BigEndian.Uint32(hdr[8:]), nil
}

// Name returns "pack-<checksum hex>".
func (p *Pack) Name() string { return p.name }

// Index returns the pack's index.
func (p *Pack) Index() *Index { return p.idx }

// Checksum returns the pack trailer checksum.
func (p *Pack) Checksum() object.ID { return p.idx.PackChecksum() }

// Size returns the pack file size in bytes.
func (p *Pack) Size() int64 { return p.size }

// Close closes the pack file and its index, and empties its own delta
// base cache (a shared one drops its bases when they go idle).
func (p *Pack) Close() error {
	if p.ownCache {
		p.cache.clear()
	}
	return errors.Join(p.f.close(), p.idx.Close())
}

// CloseFile closes the pack file now if it has a budget (OpenOptions.Files)
// and no read in flight, leaving the Pack usable: the next read reopens
// it. For a pack nobody is using for a while, so it holds no descriptor.
func (p *Pack) CloseFile() { p.f.closeIdle() }

// Settle is called once the file of a pack opened with an Arrival is
// whole and renamed to path: the pack's file joins its budget, reopened
// by that path when the budget closed it.
func (p *Pack) Settle(path string) { p.f.settle(path) }

// Arrival is the pack's Arrival (OpenOptions), or nil when its file was
// whole at open.
func (p *Pack) Arrival() *Arrival { return p.f.arrival }

// KeepOpen opens the pack file if its budget closed it and keeps it open,
// outside the budget, until Close: the caller is about to delete the
// file while the pack is still in use.
func (p *Pack) KeepOpen() error { return p.f.pin() }

// Has reports whether the pack contains id.
func (p *Pack) Has(id object.ID) bool {
	_, ok := p.idx.Find(id)
	return ok
}

// ReadObject returns the type and full content of id, resolving deltas.
func (p *Pack) ReadObject(id object.ID) (object.Type, []byte, error) {
	off, ok := p.idx.Lookup(id)
	if !ok {
		return object.Invalid, nil, fmt.Errorf("%s: %w", id, object.ErrNotFound)
	}
	t, data, err := p.readAt(off)
	if err != nil {
		return object.Invalid, nil, fmt.Errorf("read %s from %s: %w", id, p.name, err)
	}
	return t, data, nil
}

// ReadShared is ReadObject for the small objects history walks read
// again and again (commits and the trees along a path): the object is
// kept in the pack's delta base cache under its own offset, so the next
// read of it, by this request or a later one on the same pack, costs a
// lookup, not an inflate. The cache's byte budget and idle expiry bound
// what it holds. The returned slice is shared: it must not be modified.
func (p *Pack) ReadShared(id object.ID) (object.Type, []byte, error) {
	off, ok := p.idx.Lookup(id)
	if !ok {
		return object.Invalid, nil, fmt.Errorf("%s: %w", id, object.ErrNotFound)
	}
	k := baseKey{p.id, off}
	if t, data, ok := p.cache.get(k); ok {
		return t, data, nil
	}
	t, data, err := p.readAt(off)
	if err != nil {
		return object.Invalid, nil, fmt.Errorf("read %s from %s: %w", id, p.name, err)
	}
	p.cache.put(k, t, data)
	return t, data, nil
}

// ReadHeader returns the type and size of id without inflating whole
// objects; for deltas it inflates only the delta header and walks the chain
// headers to find the type. A pack from OpenIndexed answers from memory.
func (p *Pack) ReadHeader(id object.ID) (object.Type, int64, error) {
	if p.headers != nil {
		i, ok := p.idx.Find(id)
		if !ok {
			return object.Invalid, 0, fmt.Errorf("%s: %w", id, object.ErrNotFound)
		}
		h := p.headers[i]
		return h.typ, h.size, nil
	}
	off, ok := p.idx.Lookup(id)
	if !ok {
		return object.Invalid, 0, fmt.Errorf("%s: %w", id, object.ErrNotFound)
	}
	t, size, err := p.readHeaderAt(off)
	if err != nil {
		return object.Invalid, 0, fmt.Errorf("read header of %s from %s: %w", id, p.name, err)
	}
	return t, size, nil
}

func (p *Pack) readHeaderAt(off int64) (object.Type, int64, error) {
	var size int64 = -1
	for depth := 0; depth <= maxReadChain; depth++ {
		h, err := p.entryHeader(off)
		if err != nil {
			return object.Invalid, 0, err
		}
		if h.typ < object.OfsDelta {
			if size < 0 {
				size = h.size
			}
			return h.typ, size, nil
		}
		if size < 0 {
			if size, err = p.deltaResultSize(off, h); err != nil {
				return object.Invalid, 0, err
			}
		}
		if off, err = p.baseOffset(off, h); err != nil {
			return object.Invalid, 0, err
		}
	}
	return object.Invalid, 0, kindf(ErrDeltaDepth, "delta chain longer than %d at offset %d", maxReadChain, off)
}

// deltaResultSize inflates just enough of a delta to read its header.
func (p *Pack) deltaResultSize(off int64, h entryHeader) (int64, error) {
	z, err := getZlib(bufioReader(io.NewSectionReader(p.f, off+int64(h.hdrLen), p.size-off-int64(h.hdrLen))))
	if err != nil {
		return 0, corruptf("object at offset %d: bad zlib header: %v", off, err)
	}
	defer putZlib(z)
	var buf [20]byte
	n, err := io.ReadFull(z, buf[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, corruptf("object at offset %d: inflate: %v", off, err)
	}
	_, size, _, err := DeltaSizes(buf[:n])
	if err != nil {
		return 0, fmt.Errorf("object at offset %d: %w", off, err)
	}
	return size, nil
}

// entryHeader reads the entry header at off.
func (p *Pack) entryHeader(off int64) (entryHeader, error) {
	if off < packHeaderLen || off >= p.size-packTrailerLen {
		return entryHeader{}, corruptf("object offset %d out of range", off)
	}
	var buf [maxEntryHeader]byte
	n, err := p.f.ReadAt(buf[:min(int64(len(buf)), p.size-packTrailerLen-off)], off)
	if err != nil && !errors.Is(err, io.EOF) {
		return entryHeader{}, fmt.Errorf("read entry at %d: %w", off, err)
	}
	return parseEntryHeader(buf[:n], off)
}

// baseOffset returns the offset of a delta entry's base in this pack.
func (p *Pack) baseOffset(off int64, h entryHeader) (int64, error) {
	if h.typ == object.OfsDelta {
		return h.baseOfs, nil
	}
	bo, ok := p.idx.Lookup(h.baseID)
	if !ok {
		return 0, fmt.Errorf("%w: ref-delta base %s of object at offset %d is not in the pack", ErrMissingBase, h.baseID, off)
	}
	return bo, nil
}

// entryEnd returns the offset where the entry starting at off ends.
func (p *Pack) entryEnd(off int64) (int64, error) {
	order, i, err := p.orderAt(off)
	if err != nil {
		return 0, err
	}
	if i+1 < len(order) {
		return p.idx.Offset(int(order[i+1])), nil
	}
	return p.size - packTrailerLen, nil
}

// orderAt returns the offset order and the position in it of the entry
// starting at off.
func (p *Pack) orderAt(off int64) ([]uint32, int, error) {
	order, err := p.offsetOrder()
	if err != nil {
		return nil, 0, err
	}
	i, found := slices.BinarySearchFunc(order, off, func(pos uint32, off int64) int {
		return cmpInt64(p.idx.Offset(int(pos)), off)
	})
	if !found {
		return nil, 0, corruptf("%s: no object starts at offset %d", p.name, off)
	}
	return order, i, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sortByOffset sorts index positions by pack offset. Every serve of a
// pack needs this order once per process (entry ends), so for packs under
// 4 GiB it is an LSD radix sort of offset<<32|position keys, several times
// faster than a comparison sort that decodes offsets in the comparator.
func sortByOffset(idx *Index, order []uint32) {
	keys := make([]uint64, len(order))
	var maxOff int64
	for i, pos := range order {
		o := idx.Offset(int(pos))
		maxOff = max(maxOff, o)
		keys[i] = uint64(o)<<32 | uint64(pos)
	}
	if maxOff >= 1<<32 {
		slices.SortFunc(order, func(a, b uint32) int {
			return cmpInt64(idx.Offset(int(a)), idx.Offset(int(b)))
		})
		return
	}
	tmp := make([]uint64, len(keys))
	for shift := uint(32); shift < 64 && maxOff>>(shift-32) != 0; shift += 8 {
		var counts [257]int
		for _, k := range keys {
			counts[(k>>shift)&0xff+1]++
		}
		for b := 1; b < len(counts); b++ {
			counts[b] += counts[b-1]
		}
		for _, k := range keys {
			d := (k >> shift) & 0xff
			tmp[counts[d]] = k
			counts[d]++
		}
		keys, tmp = tmp, keys
	}
	for i, k := range keys {
		order[i] = uint32(k)
	}
}

// inflateEntry inflates the data of the entry at off with header h.
func (p *Pack) inflateEntry(off int64, h entryHeader) ([]byte, error) {
	end, err := p.entryEnd(off)
	if err != nil {
		return nil, err
	}
	return inflateAt(nil, p.f, off+int64(h.hdrLen), end, h.size, off)
}

// readAt returns the resolved object at off. The returned slice is owned by
// the caller.
func (p *Pack) readAt(off int64) (object.Type, []byte, error) {
	type link struct {
		off int64
		h   entryHeader
	}
	var chain []link
	var (
		typ    object.Type
		data   []byte
		shared bool // data is owned by the cache
	)
	for cur := off; ; {
		if len(chain) > maxReadChain {
			return object.Invalid, nil, kindf(ErrDeltaDepth, "delta chain longer than %d at offset %d", maxReadChain, off)
		}
		if t, d, ok := p.cache.get(baseKey{p.id, cur}); ok {
			typ, data, shared = t, d, true
			break
		}
		h, err := p.entryHeader(cur)
		if err != nil {
			return object.Invalid, nil, err
		}
		if h.typ < object.OfsDelta {
			if data, err = p.inflateEntry(cur, h); err != nil {
				return object.Invalid, nil, err
			}
			typ = h.typ
			if len(chain) > 0 {
				p.cache.put(baseKey{p.id, cur}, typ, data)
				shared = true
			}
			break
		}
		chain = append(chain, link{cur, h})
		if cur, err = p.baseOffset(cur, h); err != nil {
			return object.Invalid, nil, err
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		delta, err := p.inflateEntry(chain[i].off, chain[i].h)
		if err != nil {
			return object.Invalid, nil, err
		}
		if data, err = ApplyDelta(data, delta); err != nil {
			return object.Invalid, nil, fmt.Errorf("object at offset %d: %w", chain[i].off, err)
		}
		shared = false
		if i > 0 {
			p.cache.put(baseKey{p.id, chain[i].off}, typ, data)
			shared = true
		}
	}
	if shared {
		data = bytes.Clone(data)
	}
	return typ, data, nil
}
