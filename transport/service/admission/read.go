package admission

import (
	"context"
	"sync"
	"time"
)

// Reads admits expensive read-API answers (archives, commit and compare
// diffs, logs filtered by a path). Each reserves its estimate in the
// node's memory budget as pack work does (kind Read, so it shares the
// budget and the descriptor cap with clones and pushes), and takes one of
// a fixed number of slots: these answers are CPU work that a few
// anonymous clients could otherwise keep every core busy with. An answer
// waits a little for a slot, so a burst queues rather than fails; past
// the wait, or with the memory budget spent, it is refused and the front
// end answers 503 with Retry-After. A nil *Reads admits everything.
type Reads struct {
	c     *Controller
	slots chan struct{} // nil: no slot limit
	wait  time.Duration
}

// ReadWait is how long an expensive answer waits for a slot before it is
// refused.
const ReadWait = 2 * time.Second

// NewReads returns the admission of read answers over c (nil: no memory
// bound) with at most maxActive running at once (0: no slot limit), each
// waiting at most wait for a slot.
func NewReads(c *Controller, maxActive int, wait time.Duration) *Reads {
	r := &Reads{c: c, wait: wait}
	if maxActive > 0 {
		r.slots = make(chan struct{}, maxActive)
	}
	if c != nil {
		// The series exists from the start, as the others do.
		c.m.refused.WithLabelValues(Read.String(), "slots")
	}
	return r
}

// Reserve asks to start an answer estimated to hold est bytes, waiting
// for a slot until the wait is over or ctx is done. If admitted, it
// returns a release function the caller must call exactly once when the
// answer is done; otherwise ok is false and nothing is held.
func (r *Reads) Reserve(ctx context.Context, est int64) (release func(), ok bool) {
	if r == nil {
		return func() {}, true
	}
	if !r.takeSlot(ctx) {
		if r.c != nil {
			r.c.m.refused.WithLabelValues(Read.String(), "slots").Inc()
		}
		return nil, false
	}
	free, ok := r.c.Reserve(Read, est)
	if !ok {
		r.leave()
		return nil, false
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			free()
			r.leave()
		})
	}, true
}

func (r *Reads) takeSlot(ctx context.Context) bool {
	if r.slots == nil {
		return true
	}
	select {
	case r.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(r.wait)
	defer t.Stop()
	select {
	case r.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (r *Reads) leave() {
	if r.slots != nil {
		<-r.slots
	}
}
