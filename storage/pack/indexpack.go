package pack

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rgit/rgit/storage/object"
)

// Defaults for IndexOptions.
const (
	DefaultMaxDeltaDepth   = 10000
	DefaultIndexCacheBytes = 32 << 20
)

// maxKeptDeltas bounds the deltas pass 1 keeps inflated for pass 2.
const maxKeptDeltas = 16 << 20

// IndexOptions configure IndexPack.
type IndexOptions struct {
	// Base supplies repository objects used to complete thin packs; nil
	// means thin packs are rejected.
	Base object.Reader
	// BaseHas, if set, is a cheap existence check consulted before Base.
	BaseHas func(object.ID) bool
	// MaxObjectSize and MaxPackSize cap object and pack sizes; 0 = no cap.
	// MaxObjectSize applies to every entry's declared size: a whole
	// object's, a delta's result (from the delta's header, before it is
	// applied) and a delta's own instructions.
	MaxObjectSize, MaxPackSize int64
	// MaxDeltaDepth caps delta chains; 0 means DefaultMaxDeltaDepth.
	MaxDeltaDepth int
	// Threads resolving deltas; 0 means 2.
	Threads int
	// CacheBytes bounds the inflated bases held while resolving deltas,
	// across all threads; 0 means DefaultIndexCacheBytes.
	CacheBytes int64
	// Reserve, if set, is asked for n more bytes of memory before
	// IndexPack holds objects bigger than its fixed buffers: a commit, tree
	// or tag over 1 MiB whole for Check, and the bases, deltas and results
	// its resolvers hold at once (resolveMemory). The amounts come from the
	// sizes the pack declares, before anything is inflated or applied; the
	// calls add up to the most IndexPack holds at a time. An error stops
	// IndexPack before the allocation and is returned unchanged.
	Reserve func(n int64) error
	// Progress, if set, is called with stages "receiving objects" and
	// "resolving deltas".
	Progress ProgressFunc
	// Check, if set, is called once with the content of every commit,
	// tree and tag of the pack (thin bases appended from Base included)
	// while it is indexed, so a caller can fsck objects without reading
	// them back from the pack. Blobs are not passed: they may be large and
	// are streamed. Calls come concurrently from the resolver goroutines;
	// data is only valid during the call. The first error Check returns
	// fails IndexPack and is returned unchanged.
	Check func(id object.ID, t object.Type, data []byte) error
	// Sealed, if set, is called once the pack file's bytes are final,
	// with the file opened anew (the callee closes it), its size and its
	// checksum: right after the pack is received when it has no REF_DELTA
	// entry (nothing can be appended to complete it), else after delta
	// resolution. A caller uploads the pack from f while the deltas are
	// resolved. It is not called when IndexPack fails before that point;
	// after it, IndexPack may still fail (a bad delta, Check): the caller
	// then discards what it did with f.
	Sealed func(f *os.File, size int64, sum object.ID)
}

// Indexed describes a pack written by IndexPack.
type Indexed struct {
	PackPath, IdxPath string
	Checksum          object.ID       // pack trailer
	Name              string          // "pack-<checksum hex>"
	Objects           []IndexedObject // in pack order
	ThinFixed         int             // bases appended to complete a thin pack
}

// IndexedObject is one object of an indexed pack.
type IndexedObject struct {
	ID     object.ID
	Type   object.Type // resolved: never a delta type
	Size   int64       // object size
	Offset int64
	CRC    uint32
}

// ientry is the indexer's per-object record; kept small because there is
// one per object and nothing else grows with the pack.
type ientry struct {
	off      int64
	dataSize int64 // inflated entry data (the delta itself for deltas)
	objSize  int64 // resolved object size
	id       object.ID
	base     int32 // OfsDelta: index of the base entry, else -1
	crc      uint32
	hdrLen   uint8
	typ      object.Type // as stored
	rtype    object.Type // resolved type, 0 until resolved
	claimed  uint32      // atomic; 1 once a worker has taken this delta
	// depth is an OFS_DELTA's chain length, counting from a whole object
	// through OFS_DELTAs only (exact for the deltas pass 1 resolves).
	depth uint32
}

type refDelta struct {
	idx  int32
	base object.ID
}

// indexer is the state of one IndexPack run.
type indexer struct {
	ctx     context.Context
	opts    IndexOptions
	f       *os.File
	entries []ientry
	refs    []refDelta            // REF_DELTA entries in pack order
	refKids map[object.ID][]int32 // base id -> REF_DELTA entries
	kidPos  []int32               // OFS_DELTA children CSR: kidPos[i]..kidPos[i+1]
	kids    []int32
	dataEnd int64 // end of the last entry (start of the trailer)
	// kept holds deltas inflated in pass 1, up to maxKeptDeltas in all
	// (counted in keptBytes by pass 1 and its pipe); read-only in pass 2.
	kept      map[int32][]byte
	keptBytes atomic.Int64

	resolved   atomic.Uint64
	nDeltas    uint64
	progressMu sync.Mutex

	// maxThinBase is the largest base size a REF_DELTA declares: a base
	// taken from opts.Base is that big.
	maxThinBase int64
	// reserved is what opts.Reserve has granted so far.
	reserved int64
}

// IndexPack reads a pack from r, storing it in a temporary file in dir while
// parsing, resolves its deltas (completing a thin pack from opts.Base) and
// writes pack-<checksum>.pack and .idx into dir. Memory stays bounded by the
// object count and opts.CacheBytes, never by the pack size.
func IndexPack(ctx context.Context, r io.Reader, dir string, opts IndexOptions) (*Indexed, error) {
	f, err := os.CreateTemp(dir, "tmp-pack-*")
	if err != nil {
		return nil, fmt.Errorf("index pack: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	ix := newIndexer(ctx, f, opts)
	sum, err := ix.receive(r)
	if err != nil {
		return nil, err
	}
	sealedEarly := len(ix.refs) == 0
	if sealedEarly {
		if err := ix.seal(sum); err != nil {
			return nil, err
		}
	}
	thin, err := ix.resolveAll()
	if err != nil {
		return nil, err
	}
	if thin > 0 {
		if sum, err = ix.rewriteTrailer(); err != nil {
			return nil, err
		}
	}
	if !sealedEarly {
		if err := ix.seal(sum); err != nil {
			return nil, err
		}
	}
	res, err := ix.finish(dir, sum)
	if err != nil {
		return nil, err
	}
	res.ThinFixed = thin
	ok = true
	return res, nil
}

// seal hands opts.Sealed the pack file, whose bytes are final, and its
// checksum sum.
func (ix *indexer) seal(sum object.ID) error {
	if ix.opts.Sealed == nil {
		return nil
	}
	size := ix.dataEnd + object.IDSize
	f, err := os.Open(ix.f.Name())
	if err != nil {
		return fmt.Errorf("reopen pack: %w", err)
	}
	ix.opts.Sealed(f, size, sum)
	return nil
}

// newIndexer applies the defaults of opts; f receives the pack.
func newIndexer(ctx context.Context, f *os.File, opts IndexOptions) *indexer {
	if opts.MaxDeltaDepth <= 0 {
		opts.MaxDeltaDepth = DefaultMaxDeltaDepth
	}
	if opts.Threads <= 0 {
		opts.Threads = 2
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultIndexCacheBytes
	}
	return &indexer{ctx: ctx, opts: opts, f: f, kept: map[int32][]byte{}}
}

// progress reports to opts.Progress, serialized because resolver
// goroutines report concurrently.
func (ix *indexer) progress(stage string, done, total uint64) {
	if ix.opts.Progress != nil {
		ix.progressMu.Lock()
		defer ix.progressMu.Unlock()
		ix.opts.Progress(stage, done, total)
	}
}

// checkSize refuses an entry whose size (what: "object", "delta",
// "delta result") is over the object size limit.
func (ix *indexer) checkSize(what string, size int64, off int64) error {
	if m := ix.opts.MaxObjectSize; m > 0 && size > m {
		return fmt.Errorf("%w: object at offset %d: %s exceeds max size (%d > %d)", ErrTooLarge, off, what, size, m)
	}
	return nil
}

// countDelta takes a delta's sizes from its first bytes (head), checks
// its result size against the object size limit, before anything is
// applied, and counts the delta.
func (ix *indexer) countDelta(e *ientry, head []byte, i uint32, off int64) error {
	baseSize, size, _, err := DeltaSizes(head)
	if err != nil {
		return fmt.Errorf("object %d at offset %d: %w", i, off, err)
	}
	if err := ix.checkSize("delta result", size, off); err != nil {
		return err
	}
	if e.typ == object.RefDelta {
		ix.maxThinBase = max(ix.maxThinBase, baseSize)
	}
	e.objSize = size
	ix.nDeltas++
	return nil
}

// need makes sure opts.Reserve has granted n bytes in all, asking for the
// difference.
func (ix *indexer) need(n int64) error {
	if ix.opts.Reserve == nil || n <= ix.reserved {
		return nil
	}
	if err := ix.opts.Reserve(n - ix.reserved); err != nil {
		return err
	}
	ix.reserved = n
	return nil
}

// receive is pass 1: stream, hash, store and parse every entry.
func (ix *indexer) receive(r io.Reader) (object.ID, error) {
	var sum object.ID
	sr := newStreamReader(r, ix.f, ix.opts.MaxPackSize)
	var hdr [packHeaderLen]byte
	if _, err := io.ReadFull(sr, hdr[:]); err != nil {
		return sum, inputErr(err, "pack header", 0)
	}
	count, err := checkPackHeader(hdr[:])
	if err != nil {
		return sum, err
	}
	if count > 1<<31-1 {
		return sum, corruptf("object count %d too large", count)
	}
	ix.entries = make([]ientry, 0, min(count, 1<<20))
	var z io.ReadCloser
	defer func() {
		if z != nil {
			putZlib(z)
		}
	}()
	copyBuf := make([]byte, 64<<10)
	var dhdr [20]byte
	var content bytes.Buffer // a whole object's content, for opts.Check
	checks := startChecks(ix)
	defer checks.stop()
	for i := uint32(0); i < count; i++ {
		if i%256 == 0 {
			if err := ix.ctx.Err(); err != nil {
				return sum, err
			}
			if i%4096 == 0 {
				ix.progress("receiving objects", uint64(i), uint64(count))
			}
		}
		off := sr.offset()
		sr.startEntry()
		h, err := parseEntryHeader(sr.peek(maxEntryHeader), off)
		if err != nil {
			// A failing input (a body over its size limit, a reset) shows
			// here as a short header; report it, not a truncated pack.
			if rerr := sr.readErr(); rerr != nil {
				return sum, fmt.Errorf("object %d of %d at offset %d: %w", i, count, off, rerr)
			}
			if len(sr.peek(1)) == 0 {
				return sum, corruptf("truncated pack: object %d of %d missing at offset %d", i, count, off)
			}
			return sum, fmt.Errorf("object %d: %w", i, err)
		}
		sr.pos += h.hdrLen
		// A delta's instructions are held whole when it is applied; an
		// honest one is smaller than its result.
		what := "object"
		if h.typ >= object.OfsDelta {
			what = "delta"
		}
		if err := ix.checkSize(what, h.size, off); err != nil {
			return sum, err
		}
		e := ientry{off: off, dataSize: h.size, objSize: h.size, typ: h.typ, base: -1, hdrLen: uint8(h.hdrLen)}
		switch h.typ {
		case object.OfsDelta:
			bi := sort.Search(len(ix.entries), func(j int) bool { return ix.entries[j].off >= h.baseOfs })
			if bi == len(ix.entries) || ix.entries[bi].off != h.baseOfs {
				return sum, corruptf("object %d at offset %d: delta base offset %d is not an object", i, off, h.baseOfs)
			}
			e.base = int32(bi)
			e.depth = ix.entries[bi].depth + 1
		case object.RefDelta:
			ix.refs = append(ix.refs, refDelta{idx: int32(len(ix.entries)), base: h.baseID})
		}
		if z == nil {
			z, err = getZlib(sr)
		} else {
			err = resetZlib(z, sr)
		}
		if err != nil {
			z = nil
			return sum, ix.inflateErr(err, i, off)
		}
		var n int64
		checked := false
		var piped []byte // content or delta for the pipe
		pipeDelta := h.typ == object.OfsDelta && h.size <= maxPipedCheck
		if h.typ < object.OfsDelta && h.size <= maxPipedCheck {
			// Hashed (and checked unless a blob) on the pipe's goroutine,
			// off the inflating one.
			piped = make([]byte, h.size+1)
			n, err = inflateInto(z, piped)
			e.rtype = h.typ
		} else if h.typ < object.OfsDelta {
			hw := object.NewHasher(h.typ, h.size)
			var dst io.Writer = hw
			if checked = ix.opts.Check != nil && h.typ != object.Blob; checked {
				if err := ix.need(h.size); err != nil {
					return sum, err
				}
				content.Reset()
				if ix.opts.MaxObjectSize > 0 {
					// The declared size is bounded: one allocation of
					// it rather than doublings up to it.
					content.Grow(int(h.size))
				}
				dst = io.MultiWriter(hw, &content)
			}
			n, err = io.CopyBuffer(dst, io.LimitReader(z, h.size+1), copyBuf)
			hw.Sum(e.id[:0])
			e.rtype = h.typ
		} else if pipeDelta || ix.keptBytes.Load()+h.size <= maxKeptDeltas {
			// The pipe resolves the delta, or pass 2 needs it again: while
			// the budget lasts it is kept rather than inflated a second
			// time.
			buf := make([]byte, h.size+1)
			n, err = inflateInto(z, buf)
			if err == nil && n == h.size {
				if err := ix.countDelta(&e, buf[:min(n, int64(len(dhdr)))], i, off); err != nil {
					return sum, err
				}
				if pipeDelta {
					piped = buf[:n:n]
				} else if ix.reserveKept(n) {
					ix.kept[int32(len(ix.entries))] = buf[:n:n]
				}
			}
		} else {
			// Only the delta header is needed now; the rest is re-read in
			// pass 2, so it is inflated into a scratch buffer and dropped.
			k, rerr := io.ReadFull(z, dhdr[:min(h.size+1, int64(len(dhdr)))])
			n = int64(k)
			if rerr == nil || errors.Is(rerr, io.ErrUnexpectedEOF) || errors.Is(rerr, io.EOF) {
				var m int64
				m, err = io.CopyBuffer(io.Discard, io.LimitReader(z, h.size+1-n), copyBuf)
				n += m
			} else {
				err = rerr
			}
			if err == nil && n == h.size {
				if err := ix.countDelta(&e, dhdr[:min(n, int64(len(dhdr)))], i, off); err != nil {
					return sum, err
				}
			}
		}
		if err != nil {
			return sum, ix.inflateErr(err, i, off)
		}
		if n != h.size {
			if n > h.size {
				return sum, corruptf("object %d at offset %d: inflated size exceeds declared size %d", i, off, h.size)
			}
			return sum, corruptf("object %d at offset %d: inflated %d bytes, declared size %d", i, off, n, h.size)
		}
		if piped != nil {
			j := checkJob{idx: int32(len(ix.entries)), typ: h.typ, base: e.base, depth: e.depth, size: e.objSize, off: off, data: piped[:n:n]}
			if j.typ == object.OfsDelta {
				j.whole = ix.wholeBase(e.base, sr.written())
			}
			if err := checks.send(j); err != nil {
				return sum, err
			}
		}
		if checked {
			if err := ix.opts.Check(e.id, e.rtype, content.Bytes()); err != nil {
				return sum, err
			}
			if content.Cap() > maxKeptCheckBuf {
				content = bytes.Buffer{} // one huge tree need not pin its buffer
			}
		}
		sr.sync()
		e.crc = sr.crc
		ix.entries = append(ix.entries, e)
	}
	if err := checks.stop(); err != nil {
		return sum, err
	}
	for _, r := range checks.ids {
		ix.entries[r.idx].id = r.id
		ix.entries[r.idx].rtype = r.typ
	}
	for idx, d := range checks.kept {
		ix.kept[idx] = d
	}
	ix.progress("receiving objects", uint64(count), uint64(count))
	sr.sync()
	ix.dataEnd = sr.offset()
	sr.sha.Sum(sum[:0])
	sr.hashing = false
	var trailer object.ID
	if _, err := io.ReadFull(sr, trailer[:]); err != nil {
		return sum, inputErr(err, "pack trailer", ix.dataEnd)
	}
	if trailer != sum {
		return sum, kindf(ErrChecksum, "pack trailer %s, content hashes to %s", trailer, sum)
	}
	if len(sr.peek(1)) != 0 {
		return sum, corruptf("trailing garbage after checksum")
	}
	if rerr := sr.readErr(); rerr != nil {
		return sum, fmt.Errorf("read pack: %w", rerr)
	}
	if err := sr.flush(); err != nil {
		return sum, err
	}
	return sum, nil
}

// wholeBase locates entry i for the pipe if it is a whole object the pipe
// held (it may have dropped it since) and is in the file up to written.
func (ix *indexer) wholeBase(i int32, written int64) wholeBase {
	b := &ix.entries[i]
	if b.typ >= object.OfsDelta || b.dataSize > maxPipedCheck || int(i)+1 >= len(ix.entries) || ix.end(i) > written {
		return wholeBase{}
	}
	return wholeBase{typ: b.typ, start: b.off + int64(b.hdrLen), end: ix.end(i), off: b.off, size: b.dataSize}
}

// reserveKept takes n bytes of the kept-delta budget if they fit.
func (ix *indexer) reserveKept(n int64) bool {
	if ix.keptBytes.Add(n) <= maxKeptDeltas {
		return true
	}
	ix.keptBytes.Add(-n)
	return false
}

// patch applies the delta of the entry at off to base.
func (ix *indexer) patch(base, delta []byte, off int64) ([]byte, error) {
	max := ix.opts.MaxObjectSize
	if max <= 0 {
		max = 1<<63 - 1
	}
	data, err := applyDelta(base, delta, max)
	if err != nil {
		return nil, fmt.Errorf("object at offset %d: %w", off, err)
	}
	return data, nil
}

// inflateInto inflates from z into buf, whose length is one more than the
// declared size so that a longer stream shows, and returns the bytes read;
// like io.Copy, the end of the stream is not an error.
func inflateInto(z io.Reader, buf []byte) (int64, error) {
	var n int64
	var err error
	for n < int64(len(buf)) && err == nil {
		var k int
		k, err = z.Read(buf[n:])
		n += int64(k)
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// maxKeptCheckBuf bounds the buffer receive keeps between objects for
// opts.Check.
const maxKeptCheckBuf = 4 << 20

// check passes a resolved object to opts.Check unless it is a blob.
func (ix *indexer) check(id object.ID, t object.Type, data []byte) error {
	if ix.opts.Check == nil || t == object.Blob {
		return nil
	}
	return ix.opts.Check(id, t, data)
}

// inflateErr classifies an error met while inflating entry i from the
// stream: bad data is ErrCorrupt, anything else (I/O, limits) is passed on.
func (ix *indexer) inflateErr(err error, i uint32, off int64) error {
	switch {
	case errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTooLarge):
		return err
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return corruptf("truncated pack: object %d at offset %d", i, off)
	case isInflateErr(err):
		return corruptf("object %d at offset %d: inflate: %v", i, off, err)
	}
	return fmt.Errorf("object %d at offset %d: %w", i, off, err)
}

// end returns where entry i's data ends.
func (ix *indexer) end(i int32) int64 {
	if int(i)+1 < len(ix.entries) {
		return ix.entries[i+1].off
	}
	return ix.dataEnd
}

// buildTree links deltas to their bases.
func (ix *indexer) buildTree() {
	n := len(ix.entries)
	ix.kidPos = make([]int32, n+1)
	for i := range ix.entries {
		if b := ix.entries[i].base; b >= 0 {
			ix.kidPos[b+1]++
		}
	}
	for i := 1; i <= n; i++ {
		ix.kidPos[i] += ix.kidPos[i-1]
	}
	ix.kids = make([]int32, ix.kidPos[n])
	fill := slices.Clone(ix.kidPos[:n])
	for i := range ix.entries {
		if b := ix.entries[i].base; b >= 0 {
			ix.kids[fill[b]] = int32(i)
			fill[b]++
		}
	}
	ix.refKids = make(map[object.ID][]int32, len(ix.refs))
	for _, r := range ix.refs {
		ix.refKids[r.base] = append(ix.refKids[r.base], r.idx)
	}
}

// pendingKids reports whether entry i has children still to resolve.
// REF_DELTAs are only resolved in pass 2, so any counts.
func (ix *indexer) pendingKids(i int32) bool {
	for _, c := range ix.kids[ix.kidPos[i]:ix.kidPos[i+1]] {
		if ix.entries[c].rtype == 0 {
			return true
		}
	}
	return len(ix.refKids[ix.entries[i].id]) > 0
}

func (ix *indexer) hasKids(i int32) bool {
	if i+1 < int32(len(ix.kidPos)) && ix.kidPos[i+1] > ix.kidPos[i] {
		return true
	}
	return len(ix.refKids[ix.entries[i].id]) > 0
}

// resolveAll is pass 2. It returns the number of thin bases appended.
func (ix *indexer) resolveAll() (int, error) {
	ix.buildTree()
	// Roots are the resolved entries with unresolved children: whole
	// objects, and deltas pass 1 resolved whose children it could not.
	var roots []int32
	for i := range ix.entries {
		if ix.entries[i].rtype != 0 && ix.pendingKids(int32(i)) {
			roots = append(roots, int32(i))
		}
	}
	if err := ix.need(ix.resolveNeed(roots)); err != nil {
		return 0, err
	}
	if err := ix.runWorkers(roots); err != nil {
		return 0, err
	}
	thin, err := ix.completeThin()
	if err != nil {
		return 0, err
	}
	for i := range ix.entries {
		if ix.entries[i].rtype == 0 {
			e := &ix.entries[i]
			if e.typ == object.RefDelta {
				for _, r := range ix.refs {
					if r.idx == int32(i) {
						return 0, fmt.Errorf("%w: ref-delta at offset %d: base %s (cycle or missing object)", ErrMissingBase, e.off, r.base)
					}
				}
			}
			return 0, fmt.Errorf("%w: delta at offset %d has no resolvable base", ErrMissingBase, e.off)
		}
	}
	ix.progress("resolving deltas", ix.nDeltas, ix.nDeltas)
	return thin, nil
}

// runWorkers resolves the delta trees below roots on opts.Threads workers.
func (ix *indexer) runWorkers(roots []int32) error {
	if len(roots) == 0 {
		return nil
	}
	threads := min(ix.opts.Threads, len(roots))
	var (
		next    atomic.Int64
		failed  atomic.Bool
		errs    = make([]error, threads)
		doneCh  = make(chan struct{}, threads)
		perWork = ix.opts.CacheBytes / int64(threads)
	)
	for t := 0; t < threads; t++ {
		go func() {
			defer func() { doneCh <- struct{}{} }()
			w := &resolver{ix: ix, budget: perWork}
			for !failed.Load() {
				k := next.Add(1) - 1
				if k >= int64(len(roots)) {
					return
				}
				if err := w.resolveRoot(roots[k]); err != nil {
					errs[t] = err
					failed.Store(true)
					return
				}
			}
		}()
	}
	for range threads {
		<-doneCh
	}
	// One error, not a join: callers report it on one line, and a second
	// worker failing at the same moment adds nothing they act on.
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// completeThin appends REF_DELTA bases missing from the pack, taken from
// opts.Base, and resolves their trees. Like git it goes through the
// unresolved deltas in pack order one base at a time, so a base that turns
// out to be produced by another delta in the pack is never appended twice.
func (ix *indexer) completeThin() (int, error) {
	var pending []refDelta
	for _, r := range ix.refs {
		if ix.entries[r.idx].rtype == 0 {
			pending = append(pending, r)
		}
	}
	if len(pending) == 0 {
		return 0, nil
	}
	if ix.opts.Base == nil {
		return 0, fmt.Errorf("%w: ref-delta at offset %d: base %s not in pack (thin pack without a repository)", ErrMissingBase, ix.entries[pending[0].idx].off, pending[0].base)
	}
	// Appended entries overwrite the trailer.
	w := bufio.NewWriterSize(io.NewOffsetWriter(ix.f, ix.dataEnd), 1<<20)
	appended := 0
	var zbuf bytes.Buffer
	zw := zlib.NewWriter(&zbuf)
	for _, r := range pending {
		if atomic.LoadUint32(&ix.entries[r.idx].claimed) != 0 {
			continue
		}
		if ix.opts.BaseHas != nil && !ix.opts.BaseHas(r.base) {
			continue
		}
		t, data, err := ix.opts.Base.ReadObject(r.base)
		if errors.Is(err, object.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read thin base %s: %w", r.base, err)
		}
		if object.Hash(t, data) != r.base {
			return 0, fmt.Errorf("thin base %s: repository returned an object with a different id", r.base)
		}
		if err := ix.check(r.base, t, data); err != nil {
			return 0, err
		}
		zbuf.Reset()
		zw.Reset(&zbuf)
		hdr := appendEntryHeader(nil, t, int64(len(data)))
		if _, err := zw.Write(data); err != nil {
			return 0, fmt.Errorf("compress thin base: %w", err)
		}
		if err := zw.Close(); err != nil {
			return 0, fmt.Errorf("compress thin base: %w", err)
		}
		crc := crc32Update(0, hdr)
		crc = crc32Update(crc, zbuf.Bytes())
		e := ientry{off: ix.dataEnd, dataSize: int64(len(data)), objSize: int64(len(data)), id: r.base,
			base: -1, crc: crc, hdrLen: uint8(len(hdr)), typ: t, rtype: t}
		w.Write(hdr)
		w.Write(zbuf.Bytes())
		if err := w.Flush(); err != nil {
			return 0, fmt.Errorf("append thin base: %w", err)
		}
		ix.dataEnd += int64(len(hdr) + zbuf.Len())
		ix.entries = append(ix.entries, e)
		ix.kidPos = append(ix.kidPos, ix.kidPos[len(ix.kidPos)-1])
		appended++
		if err := ix.runWorkers([]int32{int32(len(ix.entries) - 1)}); err != nil {
			return 0, err
		}
	}
	return appended, nil
}

// rewriteTrailer fixes the object count and trailer after thin completion.
func (ix *indexer) rewriteTrailer() (object.ID, error) {
	var sum object.ID
	if err := ix.f.Truncate(ix.dataEnd); err != nil {
		return sum, fmt.Errorf("rewrite pack: %w", err)
	}
	var cnt [4]byte
	binary.BigEndian.PutUint32(cnt[:], uint32(len(ix.entries)))
	if _, err := ix.f.WriteAt(cnt[:], 8); err != nil {
		return sum, fmt.Errorf("rewrite pack: %w", err)
	}
	h := newSHA1()
	if _, err := io.Copy(h, io.NewSectionReader(ix.f, 0, ix.dataEnd)); err != nil {
		return sum, fmt.Errorf("rewrite pack: %w", err)
	}
	h.Sum(sum[:0])
	if _, err := ix.f.WriteAt(sum[:], ix.dataEnd); err != nil {
		return sum, fmt.Errorf("rewrite pack: %w", err)
	}
	return sum, nil
}

// finish writes the index and moves both files to their final names.
func (ix *indexer) finish(dir string, sum object.ID) (*Indexed, error) {
	// One per-object table at a time, and the kept deltas dropped first:
	// on a big pack (400,000 objects) entries, objs and ents together were
	// the push's peak.
	ix.kept = nil
	objs := make([]IndexedObject, len(ix.entries))
	for i := range ix.entries {
		e := &ix.entries[i]
		objs[i] = IndexedObject{ID: e.id, Type: e.rtype, Size: e.objSize, Offset: e.off, CRC: e.crc}
	}
	ix.entries = nil
	ents := make([]IndexEntry, len(objs))
	for i, o := range objs {
		ents[i] = IndexEntry{ID: o.ID, Offset: o.Offset, CRC: o.CRC}
	}
	slices.SortFunc(ents, func(a, b IndexEntry) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	for i := 1; i < len(ents); i++ {
		if ents[i].ID == ents[i-1].ID {
			return nil, corruptf("object %s appears twice in the pack", ents[i].ID)
		}
	}
	name := "pack-" + sum.String()
	// The files keep their temporary file's unique suffix: two indexings
	// of identical bytes into one directory (a background roll-up and an
	// admin repack, or two identical pushes) must not take each other's
	// files when one adopts or removes them.
	uniq := strings.TrimPrefix(filepath.Base(ix.f.Name()), "tmp-pack-")
	res := &Indexed{
		PackPath: filepath.Join(dir, name+"-"+uniq+".pack"),
		IdxPath:  filepath.Join(dir, name+"-"+uniq+".idx"),
		Checksum: sum,
		Name:     name,
		Objects:  objs,
	}
	idxTmp, err := os.CreateTemp(dir, "tmp-idx-*")
	if err != nil {
		return nil, fmt.Errorf("write index: %w", err)
	}
	defer os.Remove(idxTmp.Name()) // no-op after the rename
	bw := bufio.NewWriterSize(idxTmp, 256<<10)
	if _, err := WriteIndex(bw, ents, sum); err != nil {
		idxTmp.Close()
		return nil, err
	}
	if err := errors.Join(bw.Flush(), idxTmp.Sync(), idxTmp.Close()); err != nil {
		return nil, fmt.Errorf("write index: %w", err)
	}
	if err := errors.Join(ix.f.Sync(), ix.f.Close()); err != nil {
		return nil, fmt.Errorf("write pack: %w", err)
	}
	if err := os.Rename(ix.f.Name(), res.PackPath); err != nil {
		return nil, fmt.Errorf("install pack: %w", err)
	}
	if err := os.Rename(idxTmp.Name(), res.IdxPath); err != nil {
		os.Remove(res.PackPath)
		return nil, fmt.Errorf("install index: %w", err)
	}
	return res, nil
}
