package pack

import (
	"bufio"
	"cmp"
	"compress/zlib"
	"context"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"slices"

	"github.com/rgit/rgit/storage/object"
)

// WriteOptions configure Set.WritePack.
type WriteOptions struct {
	// OfsDelta: the client accepts OFS_DELTA; otherwise reused deltas are
	// sent as REF_DELTA.
	OfsDelta bool
	// Thin: deltas against objects the client has (ClientHas) may be sent
	// as REF_DELTA without their base.
	Thin      bool
	ClientHas func(object.ID) bool
	// Progress, if set, is called with stage "writing objects".
	Progress ProgressFunc
}

// WriteStats reports how a pack was produced.
type WriteStats struct {
	Objects      int   // objects in the pack
	Reused       int   // whole objects copied verbatim
	ReusedDeltas int   // deltas copied verbatim (base in pack or, thin, at the client)
	ThinDeltas   int   // of ReusedDeltas, deltas against a base only the client has
	Deflated     int   // objects resolved and recompressed (base not sent)
	Bytes        int64 // pack size including header and trailer
	Verbatim     bool  // the whole stored pack file was streamed unchanged
}

// witem is one object to write, located in the set.
type witem struct {
	pack int32
	pos  int32 // index position in its pack
	off  int64
	out  int64 // offset in the output pack once written
}

// packWriter counts and hashes everything written.
// The first write error is kept and reported by the caller after each
// entry, so a vanished client stops the work promptly.
type packWriter struct {
	bw  *bufio.Writer
	sha hash.Hash
	n   int64
	err error
}

func newPackWriter(w io.Writer) *packWriter {
	return &packWriter{bw: bufio.NewWriterSize(w, 256<<10), sha: newSHA1()}
}

// header writes the pack header for count objects.
func (w *packWriter) header(count int) {
	var hdr [packHeaderLen]byte
	copy(hdr[:], packSignature)
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(count))
	w.Write(hdr[:])
}

// finish reports stage complete (all st.Objects), writes the trailer (the
// checksum of everything written), flushes, and sets st.Bytes to the
// pack's size.
func (w *packWriter) finish(st *WriteStats, progress ProgressFunc, stage string) error {
	if progress != nil {
		progress(stage, uint64(st.Objects), uint64(st.Objects))
	}
	var sum object.ID
	w.sha.Sum(sum[:0])
	if _, err := w.bw.Write(sum[:]); err != nil {
		return err
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	st.Bytes = w.n + int64(len(sum))
	return nil
}

func (w *packWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.sha.Write(p)
	w.n += int64(len(p))
	_, w.err = w.bw.Write(p)
	return len(p), w.err
}

// WritePack writes a pack holding exactly objs (duplicates ignored) to w.
// Stored bytes are copied verbatim wherever possible: whole objects always,
// deltas whenever their base is also sent (or, for thin packs, when the
// client has it). Only deltas whose base is neither are resolved and
// recompressed; deltas are never recomputed. Copied entries are checked
// against the CRC32 in the index so corruption is not propagated. Memory
// grows with len(objs), not with the pack size.
func (s *Set) WritePack(ctx context.Context, w io.Writer, objs []object.ID, opts WriteOptions) (WriteStats, error) {
	var st WriteStats
	items := make([]witem, 0, len(objs))
	for _, id := range objs {
		pi, pos, ok := s.find(id)
		if !ok {
			return st, fmt.Errorf("write pack: %s: %w", id, object.ErrNotFound)
		}
		items = append(items, witem{pack: int32(pi), pos: int32(pos), off: s.packs[pi].idx.Offset(pos)})
	}
	// Pack then offset order puts OFS bases before their deltas and makes
	// reads sequential; equal ids land on the same entry and are dropped.
	slices.SortFunc(items, cmpItem)
	items = slices.CompactFunc(items, func(a, b witem) bool { return a.pack == b.pack && a.off == b.off })
	st.Objects = len(items)
	pw := newPackWriter(w)
	if len(items) > 0 && items[0].pack == items[len(items)-1].pack && len(items) == s.packs[items[0].pack].idx.Count() {
		if err := s.packs[items[0].pack].copyVerbatim(ctx, pw); err != nil {
			return st, err
		}
		st.Verbatim, st.Reused, st.Bytes = true, len(items), pw.n
		return st, nil
	}
	pw.header(len(items))
	ew := &entryWriter{set: s, items: items, opts: opts, pw: pw, st: &st, buf: make([]byte, 64<<10)}
	for i := range items {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			if opts.Progress != nil {
				opts.Progress("writing objects", uint64(i), uint64(len(items)))
			}
		}
		if err := ew.write(i); err != nil {
			return st, fmt.Errorf("write pack: %w", err)
		}
		if pw.err != nil {
			return st, fmt.Errorf("write pack: %w", pw.err)
		}
	}
	if err := pw.finish(&st, opts.Progress, "writing objects"); err != nil {
		return st, fmt.Errorf("write pack: %w", err)
	}
	return st, nil
}

func cmpItem(a, b witem) int {
	if c := cmp.Compare(a.pack, b.pack); c != 0 {
		return c
	}
	return cmp.Compare(a.off, b.off)
}

// copyVerbatim streams the whole pack file, checking its trailer on the way.
func (p *Pack) copyVerbatim(ctx context.Context, pw *packWriter) error {
	r := io.NewSectionReader(p.f, 0, p.size-packTrailerLen)
	buf := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := pw.Write(buf[:n]); werr != nil {
				return fmt.Errorf("copy %s: %w", p.name, werr)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", p.name, err)
		}
	}
	var sum object.ID
	pw.sha.Sum(sum[:0])
	if sum != p.Checksum() {
		return kindf(ErrChecksum, "%s: content hashes to %s", p.name, sum)
	}
	pw.bw.Write(sum[:])
	if err := pw.bw.Flush(); err != nil {
		return fmt.Errorf("copy %s: %w", p.name, err)
	}
	pw.n += int64(len(sum))
	return nil
}

// entryWriter writes the entries of one WritePack call.
type entryWriter struct {
	set   *Set
	items []witem
	opts  WriteOptions
	pw    *packWriter
	st    *WriteStats
	buf   []byte
	zw    *zlib.Writer
}

// write emits items[i].
func (ew *entryWriter) write(i int) error {
	it := &ew.items[i]
	p := ew.set.packs[it.pack]
	it.out = ew.pw.n
	h, err := p.entryHeader(it.off)
	if err != nil {
		return err
	}
	end, err := p.entryEnd(it.off)
	if err != nil {
		return err
	}
	if h.typ < object.OfsDelta {
		ew.st.Reused++
		return ew.copyEntry(p, it, h, end, appendEntryHeader(nil, h.typ, h.size))
	}
	baseID := h.baseID
	if h.typ == object.OfsDelta {
		if baseID, err = p.idAt(h.baseOfs); err != nil {
			return err
		}
	}
	var hdr []byte
	if j, ok := ew.find(baseID); ok && (j < i || ew.items[j].pack == it.pack) {
		// The base is sent. Reuse is restricted to bases written earlier
		// or in the same stored pack: stored packs are acyclic, so the
		// output cannot contain a delta cycle even when packs overlap.
		if j < i && ew.opts.OfsDelta {
			hdr = appendEntryHeader(nil, object.OfsDelta, h.size)
			hdr = appendOfsDelta(hdr, it.out-ew.items[j].out)
		} else {
			hdr = appendEntryHeader(nil, object.RefDelta, h.size)
			hdr = append(hdr, baseID[:]...)
		}
	} else if !ok && ew.opts.Thin && ew.opts.ClientHas != nil && ew.opts.ClientHas(baseID) {
		hdr = appendEntryHeader(nil, object.RefDelta, h.size)
		hdr = append(hdr, baseID[:]...)
		ew.st.ThinDeltas++
	} else {
		return ew.deflateWhole(p, it)
	}
	ew.st.ReusedDeltas++
	return ew.copyEntry(p, it, h, end, hdr)
}

// find locates the output item holding id.
func (ew *entryWriter) find(id object.ID) (int, bool) {
	pi, pos, ok := ew.set.find(id)
	if !ok {
		return 0, false
	}
	key := witem{pack: int32(pi), off: ew.set.packs[pi].idx.Offset(pos)}
	return slices.BinarySearchFunc(ew.items, key, cmpItem)
}

// copyEntry writes hdr followed by the stored compressed data of it,
// verifying the stored entry against the index CRC32.
func (ew *entryWriter) copyEntry(p *Pack, it *witem, h entryHeader, end int64, hdr []byte) error {
	ew.pw.Write(hdr)
	// Feed the stored header to the CRC, then stream the data.
	raw := ew.buf[:h.hdrLen]
	if _, err := p.f.ReadAt(raw, it.off); err != nil {
		return fmt.Errorf("read %s at %d: %w", p.name, it.off, err)
	}
	crc := crc32Update(0, raw)
	for pos := it.off + int64(h.hdrLen); pos < end; {
		n := int(min(int64(len(ew.buf)), end-pos))
		if _, err := p.f.ReadAt(ew.buf[:n], pos); err != nil {
			return fmt.Errorf("read %s at %d: %w", p.name, pos, err)
		}
		crc = crc32Update(crc, ew.buf[:n])
		ew.pw.Write(ew.buf[:n])
		pos += int64(n)
	}
	if want := p.idx.CRC(int(it.pos)); crc != want {
		return kindf(ErrChecksum, "%s: stored entry of %s at offset %d fails its CRC (%08x, index says %08x)",
			p.name, p.idx.ID(int(it.pos)), it.off, crc, want)
	}
	return nil
}

// deflateWhole resolves it and writes it as a whole, freshly compressed
// object: the only case that costs compression.
func (ew *entryWriter) deflateWhole(p *Pack, it *witem) error {
	t, data, err := p.readAt(it.off)
	if err != nil {
		return err
	}
	if object.Hash(t, data) != p.idx.ID(int(it.pos)) {
		return kindf(ErrChecksum, "%s: object at offset %d does not hash to %s", p.name, it.off, p.idx.ID(int(it.pos)))
	}
	ew.pw.Write(appendEntryHeader(nil, t, int64(len(data))))
	if ew.zw == nil {
		ew.zw = zlib.NewWriter(ew.pw)
	} else {
		ew.zw.Reset(ew.pw)
	}
	if _, err := ew.zw.Write(data); err != nil {
		return err
	}
	if err := ew.zw.Close(); err != nil {
		return err
	}
	ew.st.Deflated++
	return nil
}

// idAt returns the id of the object stored at offset off.
func (p *Pack) idAt(off int64) (object.ID, error) {
	order, i, err := p.orderAt(off)
	if err != nil {
		return object.ID{}, err
	}
	return p.idx.ID(int(order[i])), nil
}
