package pack

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Arrival tracks a pack file that is still being written in order from
// its start (a download), so the pack can be read before it is whole
// (OpenOptions.Arrival): a read waits until the bytes it needs are in the
// file, and fails with the writer's error if the file stops short. Safe
// for concurrent use; the writer calls Advance, then Done or Fail once.
type Arrival struct {
	size int64 // the file's final size

	mu   sync.Mutex
	cond *sync.Cond
	have int64 // bytes written so far
	done bool
	err  error

	complete atomic.Bool // done, for reads without the lock
}

// NewArrival tracks a file that will be size bytes long.
func NewArrival(size int64) *Arrival {
	a := &Arrival{size: size}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// Size is the file's final size.
func (a *Arrival) Size() int64 { return a.size }

// Advance records that the first n bytes of the file are written (n only
// grows; a smaller n is ignored).
func (a *Arrival) Advance(n int64) {
	a.mu.Lock()
	if n > a.have {
		a.have = n
		a.cond.Broadcast()
	}
	a.mu.Unlock()
}

// Done records that the whole file is written and checked: every read may
// proceed.
func (a *Arrival) Done() {
	a.mu.Lock()
	if a.err == nil {
		a.have, a.done = a.size, true
		a.complete.Store(true)
		a.cond.Broadcast()
	}
	a.mu.Unlock()
}

// Fail records that the file will not be completed: reads of bytes not yet
// written, and Wait, return err from now on. Bytes already written stay
// readable; the writer's final check failing is a Fail too, so a reader
// that must trust the whole file waits for Done.
func (a *Arrival) Fail(err error) {
	a.mu.Lock()
	if !a.done && a.err == nil {
		a.err = err
		a.cond.Broadcast()
	}
	a.mu.Unlock()
}

// Err is the error passed to Fail, or nil.
func (a *Arrival) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// waitFor blocks until the first end bytes are in the file.
func (a *Arrival) waitFor(end int64) error {
	if a.complete.Load() {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.have < end {
		if a.err != nil {
			return fmt.Errorf("pack file arriving: %w", a.err)
		}
		a.cond.Wait()
	}
	return nil
}
