package pack

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/rgit/rgit/storage/object"
)

// Pass 1 inflates one entry after another on one goroutine: where an entry
// ends is only known once it is inflated. Hashing the whole objects it
// inflates, handing commits, trees and tags to IndexOptions.Check (fsck,
// for a push) and resolving the deltas whose base it still holds need not
// wait for that, so a checkPipe does them on a second goroutine, the other
// core of a small node. With the bases below, every delta but 3 of the
// medium fixture's 8,043 and all 15,064 of the large one's are resolved
// here, while the pack arrives; pass 2 is left with the few whose base was
// dropped. Inflating stays the one serial cost of pass 1.
const (
	// maxPipedCheck: bigger objects (and deltas, or delta results) are
	// hashed and checked in line, or resolved in pass 2, so one cannot
	// take the whole budget.
	maxPipedCheck = 1 << 20
	// pipedCheckBytes bounds the content waiting in the pipe.
	pipedCheckBytes = 8 << 20
	// The pipe holds recent objects as delta bases, blobs and the other
	// types apart: git writes blobs in delta families (a delta right
	// after its base) but commits and trees in recency order, where a
	// tree delta's base is many entries back. A whole base that was
	// dropped is inflated again from the pack file.
	pipedBlobBases = 2 << 20
	pipedTreeBases = 4 << 20
)

// checkJob is one entry for the pipe: a whole object, or an OFS_DELTA
// whose base is an earlier entry.
type checkJob struct {
	idx   int32
	typ   object.Type // as stored
	base  int32       // OfsDelta: the base entry
	depth uint32      // OfsDelta: its chain length, exact when the pipe resolves it
	size  int64       // OfsDelta: the result's size
	off   int64       // for errors
	data  []byte      // the content, or the delta
	// whole is set when the base is a whole object already in the pack
	// file, so that the pipe can inflate it again.
	whole wholeBase
}

// wholeBase locates a whole object's data in the pack file; zero when
// unset.
type wholeBase struct {
	typ             object.Type
	start, end, off int64
	size            int64
}

// checked is an entry the pipe hashed (and resolved, for a delta).
type checked struct {
	idx int32
	typ object.Type // resolved type
	id  object.ID
}

// pipedBase is an object the pipe holds for the deltas that may follow.
type pipedBase struct {
	typ   object.Type
	depth uint32
	data  []byte
}

// checkPipe runs on its own goroutine. It never reads the indexer's
// entries (pass 1 appends to them); it uses only the indexer's options,
// its kept-delta budget and its resolved counter.
type checkPipe struct {
	ix     *indexer
	budget *semaphore.Weighted
	jobs   chan checkJob
	done   chan struct{}
	once   sync.Once
	failed atomic.Bool
	// Read after done:
	err  error            // the first error
	ids  []checked        // every entry hashed
	kept map[int32][]byte // unresolved deltas kept for pass 2

	bases map[int32]pipedBase
	pools [2]basePool // blobs, other types
}

// basePool is a FIFO of held bases.
type basePool struct {
	order []int32 // oldest first, from head
	head  int
	bytes int64
	max   int64
}

func startChecks(ix *indexer) *checkPipe {
	p := &checkPipe{ix: ix, budget: semaphore.NewWeighted(pipedCheckBytes),
		jobs: make(chan checkJob, 256), done: make(chan struct{}),
		kept: map[int32][]byte{}, bases: map[int32]pipedBase{},
		pools: [2]basePool{{max: pipedBlobBases}, {max: pipedTreeBases}}}
	go p.run()
	return p
}

func (p *checkPipe) run() {
	defer close(p.done)
	for j := range p.jobs {
		if !p.failed.Load() {
			if err := p.do(j); err != nil {
				p.err = err
				p.failed.Store(true)
			}
		}
		p.budget.Release(int64(len(j.data)))
	}
	p.bases, p.pools = nil, [2]basePool{} // IndexPack goes on with pass 2
}

// do hashes and checks one entry, resolving it first if it is a delta
// whose base is held; a delta whose base is not is kept for pass 2 while
// the kept budget lasts.
func (p *checkPipe) do(j checkJob) error {
	ix := p.ix
	typ, depth, data := j.typ, uint32(0), j.data
	if j.typ == object.OfsDelta {
		b, ok := p.bases[j.base]
		if !ok && j.whole.end > 0 && j.size <= maxPipedCheck {
			w := j.whole
			data, err := inflateAt(nil, ix.f, w.start, w.end, w.size, w.off)
			if err != nil {
				return err
			}
			b, ok = pipedBase{typ: w.typ, data: data}, true
			p.hold(j.base, b)
		}
		if !ok || j.size > maxPipedCheck {
			if ix.reserveKept(int64(len(j.data))) {
				p.kept[j.idx] = j.data
			}
			return nil
		}
		if int(j.depth) > ix.opts.MaxDeltaDepth {
			return fmt.Errorf("%w: object at offset %d: delta chain longer than %d", ErrDeltaDepth, j.off, ix.opts.MaxDeltaDepth)
		}
		out, err := ix.patch(b.data, j.data, j.off)
		if err != nil {
			return err
		}
		typ, depth, data = b.typ, j.depth, out
		// Counted only: progress reports start with pass 2, when the
		// number of deltas is known.
		ix.resolved.Add(1)
	}
	id := object.Hash(typ, data)
	if err := ix.check(id, typ, data); err != nil {
		return err
	}
	p.ids = append(p.ids, checked{j.idx, typ, id})
	p.hold(j.idx, pipedBase{typ, depth, data})
	return nil
}

// hold keeps an object as a possible base, dropping the oldest over budget.
func (p *checkPipe) hold(idx int32, b pipedBase) {
	p.bases[idx] = b
	pool := &p.pools[0]
	if b.typ != object.Blob {
		pool = &p.pools[1]
	}
	pool.order = append(pool.order, idx)
	pool.bytes += int64(len(b.data))
	for pool.bytes > pool.max {
		old := pool.order[pool.head]
		pool.head++
		pool.bytes -= int64(len(p.bases[old].data))
		delete(p.bases, old)
	}
	if pool.head > len(pool.order)/2 {
		pool.order = append(pool.order[:0], pool.order[pool.head:]...)
		pool.head = 0
	}
}

// send queues a job, waiting while the pipe holds its budget. It returns
// the context's error, or the pipe's as soon as one is known (the entries
// before may still be unchecked: pass 1 stops).
func (p *checkPipe) send(j checkJob) error {
	if p.failed.Load() {
		return p.stop()
	}
	if err := p.budget.Acquire(p.ix.ctx, int64(len(j.data))); err != nil {
		return err
	}
	p.jobs <- j
	return nil
}

// stop waits for the queued jobs and returns the first error.
func (p *checkPipe) stop() error {
	p.once.Do(func() { close(p.jobs) })
	<-p.done
	return p.err
}
