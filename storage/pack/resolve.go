package pack

import (
	"fmt"
	"sync/atomic"

	"github.com/rgit/rgit/storage/object"
)

// resolver walks delta trees depth-first for one worker. The frames on its
// stack hold the inflated content of the current chain; when they exceed the
// budget the oldest are dropped and rebuilt from their parent if needed
// again (git's index-pack does the same), so memory is bounded by the budget
// plus the objects of a single chain step.
type resolver struct {
	ix     *indexer
	depth  int // of the root: a delta pass 1 resolved, else 0
	stack  []frame
	held   int64
	budget int64
	n      int // deltas resolved, for periodic cancellation checks
}

type frame struct {
	idx  int32
	data []byte // nil when dropped
}

func (w *resolver) resolveRoot(root int32) error {
	w.stack = append(w.stack[:0], frame{idx: root})
	w.held = 0
	w.depth = int(w.ix.entries[root].depth)
	err := w.walk(0)
	w.stack = w.stack[:0]
	w.held = 0
	return err
}

// walk resolves every child of the entry in frame k.
func (w *resolver) walk(k int) error {
	ix := w.ix
	idx := w.stack[k].idx
	for _, c := range ix.kids[ix.kidPos[idx]:ix.kidPos[idx+1]] {
		if ix.entries[c].rtype != 0 {
			continue // resolved in pass 1; a root if it has children left
		}
		if err := w.resolveChild(k, c); err != nil {
			return err
		}
	}
	for _, c := range ix.refKids[ix.entries[idx].id] {
		if !atomic.CompareAndSwapUint32(&ix.entries[c].claimed, 0, 1) {
			continue
		}
		if err := w.resolveChild(k, c); err != nil {
			return err
		}
	}
	return nil
}

func (w *resolver) resolveChild(k int, c int32) error {
	ix := w.ix
	e := &ix.entries[c]
	if w.n++; w.n%256 == 0 {
		if err := ix.ctx.Err(); err != nil {
			return err
		}
	}
	if w.depth+k+1 > ix.opts.MaxDeltaDepth {
		return fmt.Errorf("%w: object at offset %d: delta chain longer than %d", ErrDeltaDepth, e.off, ix.opts.MaxDeltaDepth)
	}
	atomic.StoreUint32(&e.claimed, 1)
	data, err := w.apply(k, c)
	if err != nil {
		return err
	}
	rt := ix.entries[w.stack[0].idx].rtype
	e.id = object.Hash(rt, data)
	e.objSize = int64(len(data))
	e.rtype = rt
	if err := ix.check(e.id, rt, data); err != nil {
		return err
	}
	if n := ix.resolved.Add(1); n%4096 == 0 {
		ix.progress("resolving deltas", n, ix.nDeltas)
	}
	if !ix.hasKids(c) {
		return nil
	}
	w.stack = append(w.stack, frame{idx: c, data: data})
	w.held += int64(len(data))
	w.prune(k + 1)
	err = w.walk(k + 1)
	if d := w.stack[k+1].data; d != nil {
		w.held -= int64(len(d))
	}
	w.stack = w.stack[:k+1]
	return err
}

// apply inflates delta entry c and applies it to the content of frame k.
func (w *resolver) apply(k int, c int32) ([]byte, error) {
	base, err := w.dataOf(k)
	if err != nil {
		return nil, err
	}
	return w.ix.applyTo(base, c)
}

// applyTo inflates delta entry c and applies it to base.
func (ix *indexer) applyTo(base []byte, c int32) ([]byte, error) {
	e := &ix.entries[c]
	delta, ok := ix.kept[c]
	if !ok {
		var err error
		if delta, err = inflateAt(nil, ix.f, e.off+int64(e.hdrLen), ix.end(c), e.dataSize, e.off); err != nil {
			return nil, err
		}
	}
	return ix.patch(base, delta, e.off)
}

// rebuild returns the content of entry i: inflated if it is a whole
// object, else applied along its chain of OFS_DELTAs (a delta root, which
// pass 1 resolved but did not keep).
func (ix *indexer) rebuild(i int32) ([]byte, error) {
	chain := []int32{i}
	for ix.entries[i].typ == object.OfsDelta {
		i = ix.entries[i].base
		chain = append(chain, i)
	}
	e := &ix.entries[i]
	data, err := inflateAt(nil, ix.f, e.off+int64(e.hdrLen), ix.end(i), e.dataSize, e.off)
	for k := len(chain) - 2; k >= 0 && err == nil; k-- {
		data, err = ix.applyTo(data, chain[k])
	}
	return data, err
}

// dataOf returns the content of frame k, rebuilding it if it was dropped.
func (w *resolver) dataOf(k int) ([]byte, error) {
	f := &w.stack[k]
	if f.data != nil {
		return f.data, nil
	}
	var data []byte
	var err error
	if k == 0 {
		data, err = w.ix.rebuild(f.idx)
	} else {
		data, err = w.apply(k-1, f.idx)
	}
	if err != nil {
		return nil, err
	}
	f = &w.stack[k]
	f.data = data
	w.held += int64(len(data))
	w.prune(k)
	return data, nil
}

// prune drops the oldest frames' content below keep while over budget.
func (w *resolver) prune(keep int) {
	for i := 0; i < keep && w.held > w.budget; i++ {
		if d := w.stack[i].data; d != nil {
			w.held -= int64(len(d))
			w.stack[i].data = nil
		}
	}
}
