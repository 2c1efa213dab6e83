package faultstore

import (
	"context"
	"io"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/rgit/rgit/storage/objstore"
)

// Tracer wraps a store and records the time span of every call (Copy
// excepted), so that a test can count the sequential round trips of an
// operation (SequentialDepth) whatever its CPU time: give the inner store
// a latency and the chains of calls show through. A Get's span ends when
// it returns its body, a List's when its iteration ends.
type Tracer struct {
	objstore.Store
	mu    sync.Mutex
	spans []Span
}

// Span is one traced call.
type Span struct {
	Op         Op
	Key        string // the key, or a List's prefix
	Start, End time.Time
}

// NewTracer returns a Tracer over s.
func NewTracer(s objstore.Store) *Tracer { return &Tracer{Store: s} }

func (t *Tracer) record(op Op, key string, start time.Time) {
	t.mu.Lock()
	t.spans = append(t.spans, Span{op, key, start, time.Now()})
	t.mu.Unlock()
}

// EndedBy returns the calls that ended by end, in the order they ended.
func (t *Tracer) EndedBy(end time.Time) []Span {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Span
	for _, s := range t.spans {
		if !s.End.After(end) {
			out = append(out, s)
		}
	}
	return out
}

// Reset forgets every recorded call.
func (t *Tracer) Reset() {
	t.mu.Lock()
	t.spans = nil
	t.mu.Unlock()
}

// CountOps counts spans by operation.
func CountOps(spans []Span) map[Op]int {
	n := map[Op]int{}
	for _, s := range spans {
		n[s.Op]++
	}
	return n
}

// SequentialDepth is the longest chain of calls each of which started
// after the previous one ended: the sequential round trips.
func SequentialDepth(spans []Span) int {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b Span) int { return a.Start.Compare(b.Start) })
	depth := make([]int, len(spans))
	best := 0
	for i := range spans {
		depth[i] = 1
		for j := range i {
			if !spans[i].Start.Before(spans[j].End) && depth[j]+1 > depth[i] {
				depth[i] = depth[j] + 1
			}
		}
		best = max(best, depth[i])
	}
	return best
}

func (t *Tracer) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	defer t.record(OpGet, key, time.Now())
	return t.Store.Get(ctx, key)
}

func (t *Tracer) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	defer t.record(OpGetRange, key, time.Now())
	return t.Store.GetRange(ctx, key, off, length)
}

func (t *Tracer) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	defer t.record(OpHead, key, time.Now())
	return t.Store.Head(ctx, key)
}

func (t *Tracer) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	defer t.record(OpPut, key, time.Now())
	return t.Store.Put(ctx, key, r, size)
}

func (t *Tracer) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	defer t.record(OpPutIfAbsent, key, time.Now())
	return t.Store.PutIfAbsent(ctx, key, r, size)
}

func (t *Tracer) Delete(ctx context.Context, key string) error {
	defer t.record(OpDelete, key, time.Now())
	return t.Store.Delete(ctx, key)
}

func (t *Tracer) List(ctx context.Context, prefix, startAfter string) iter.Seq2[objstore.ObjectInfo, error] {
	return func(yield func(objstore.ObjectInfo, error) bool) {
		defer t.record(OpList, prefix, time.Now())
		for info, err := range t.Store.List(ctx, prefix, startAfter) {
			if !yield(info, err) {
				return
			}
		}
	}
}
