package admission

import "sync"

// Reads admits expensive read-API answers (archives, commit and compare
// diffs, logs filtered by a path). Each reserves its estimate in the
// node's memory budget as pack work does (kind Read, so it shares the
// budget and the descriptor cap with clones and pushes), and takes one of
// a fixed number of slots: these answers are CPU work that a few
// anonymous clients could otherwise keep every core busy with. Refused,
// the front end answers 503 with Retry-After. A nil *Reads admits
// everything.
type Reads struct {
	c      *Controller
	mu     sync.Mutex
	active int
	max    int
}

// NewReads returns the admission of read answers over c (nil: no memory
// bound) with at most maxActive running at once (0: no slot limit).
func NewReads(c *Controller, maxActive int) *Reads {
	if c != nil {
		// The series exists from the start, as the others do.
		c.m.refused.WithLabelValues(Read.String(), "slots")
	}
	return &Reads{c: c, max: maxActive}
}

// SlotsFree is the slot rule: a new answer starts while fewer than max
// are running (max 0: no limit).
func SlotsFree(active, max int) bool { return max <= 0 || active < max }

// Reserve asks to start an answer estimated to hold est bytes. If
// admitted, it returns a release function the caller must call exactly
// once when the answer is done; otherwise ok is false and nothing is held.
func (r *Reads) Reserve(est int64) (release func(), ok bool) {
	if r == nil {
		return func() {}, true
	}
	r.mu.Lock()
	if !SlotsFree(r.active, r.max) {
		r.mu.Unlock()
		if r.c != nil {
			r.c.m.refused.WithLabelValues(Read.String(), "slots").Inc()
		}
		return nil, false
	}
	r.active++
	r.mu.Unlock()
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

func (r *Reads) leave() {
	r.mu.Lock()
	r.active--
	r.mu.Unlock()
}
