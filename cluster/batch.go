package cluster

import (
	"iter"
	"time"
)

// WriteQueue group-commits the leader's decisions. The leader decides
// every request at once, in arrival order, on its in-memory Map, so a
// decision may read state that is not durable yet; the queue says when
// each can be answered and what goes into the next write:
//
//   - one batch is written at a time; decisions that write, arriving
//     while it is in flight, form the next batch, written as soon as it
//     lands, so the write rate is bounded by the store's latency, not by
//     the request rate;
//   - a decision is answered only when every decision before it is
//     durable: one that writes nothing (a refusal naming an owner granted
//     a moment ago) rides with the last batch not landed yet, and is
//     answered at once only when nothing is waiting;
//   - a failed write fails its batch and every decision queued after it
//     (they were made on top of it); the leader then reloads its Map from
//     the database, as it does today for one failed decision;
//   - requesters answered together come back together: after a batch of
//     B > 1 decisions has landed, a next batch smaller than B is held for
//     a moment (Step.HoldFor: a sixteenth of the last write, at most 5 ms,
//     as refdb's own group commit does) until B have gathered, and then
//     written with them. Without it the first to come back would be
//     written alone and the rest would wait a whole write behind it,
//     halving the throughput. After a lone requester (B = 1) the next
//     write starts at once: serial latency has no floor; so does any
//     after a write too quick to hold for. Flush ends the hold.
//
// Transitions (B: the batch being written, P: the next one):
//
//	state          event               → state          actions
//	idle           Add(w, writes)      → writing [w]    write [w]     (last batch ≤ 1)
//	idle           Add(w, writes)      → holding [w]    hold          (last batch B > 1)
//	idle           Add(w, no write)    → idle           answer w
//	holding P      Add(w, any)         → holding P+w                  (|P+w| < B)
//	holding P      Add(w, any)         → writing P+w    write P+w     (|P+w| = B)
//	holding P      Flush               → writing P      write P
//	writing B, P   Add(w, writes)      → writing B, P+w
//	writing B, []  Add(w, no write)    → writing B+w    (answered with B)
//	writing B, P   Add(w, no write)    → writing B, P+w (P not empty)
//	writing B, []  Done(ok)            → idle           answer B
//	writing B, P   Done(ok)            → writing P      answer B, write P  (|P| ≥ |B|)
//	writing B, P   Done(ok)            → holding P      answer B, hold     (|P| < |B|)
//	writing B, P   Done(failed)        → idle           fail B and P
//
// P never starts with a decision that writes nothing, so every batch
// written holds at least one write. T is the caller's record of a
// decision (its requester and answer); the queue never looks inside it.
type WriteQueue[T any] struct {
	writing  bool
	holding  bool // pending waits for more before it is written
	inflight []T
	pending  []T
	// The last landed batch: how many decisions, and how long its write took.
	lastBatch int
	lastWrite time.Duration
}

// maxHold caps the hold before a write.
const maxHold = 5 * time.Millisecond

// QueueStep is what the caller must do after a WriteQueue transition, in
// this order: answer, fail, then start writing Write (nil: nothing to
// write). Answer and Fail are in arrival order. HoldFor > 0: call Flush
// after that long.
type QueueStep[T any] struct {
	Answer, Fail, Write []T
	HoldFor             time.Duration
}

// Add queues decision w; writes says whether it changed the map (its
// entry must be persisted).
func (q *WriteQueue[T]) Add(w T, writes bool) QueueStep[T] {
	switch {
	case q.holding:
		q.pending = append(q.pending, w)
		if len(q.pending) >= q.lastBatch {
			return q.Flush()
		}
	case !q.writing && writes && q.holds(1):
		q.holding, q.pending = true, []T{w}
		return QueueStep[T]{HoldFor: q.hold()}
	case !q.writing && writes:
		q.writing, q.inflight = true, []T{w}
		return QueueStep[T]{Write: q.inflight}
	case !q.writing:
		return QueueStep[T]{Answer: []T{w}}
	case writes || len(q.pending) > 0:
		q.pending = append(q.pending, w)
	default:
		q.inflight = append(q.inflight, w)
	}
	return QueueStep[T]{}
}

func (q *WriteQueue[T]) hold() time.Duration { return min(q.lastWrite/16, maxHold) }

// holds reports whether a next batch of n is held: smaller than the last,
// and the last write took long enough to make a hold worth it.
func (q *WriteQueue[T]) holds(n int) bool { return n < q.lastBatch && q.hold() > 0 }

// Flush ends a hold: what gathered is written now. Without a hold (it
// ended when enough gathered) it does nothing.
func (q *WriteQueue[T]) Flush() QueueStep[T] {
	if !q.holding {
		return QueueStep[T]{}
	}
	q.holding, q.writing = false, true
	q.inflight, q.pending = q.pending, nil
	return QueueStep[T]{Write: q.inflight}
}

// Done reports the end of the write of the batch in flight, which took
// took: ok means it is durable.
func (q *WriteQueue[T]) Done(ok bool, took time.Duration) QueueStep[T] {
	if !q.writing {
		return QueueStep[T]{}
	}
	b, p := q.inflight, q.pending
	q.inflight, q.pending = nil, nil
	if !ok {
		q.writing, q.lastBatch = false, 0
		return QueueStep[T]{Fail: append(b, p...)}
	}
	q.lastBatch, q.lastWrite = len(b), took
	q.writing = false
	switch {
	case len(p) == 0:
		return QueueStep[T]{Answer: b}
	case q.holds(len(p)):
		q.holding, q.pending = true, p
		return QueueStep[T]{Answer: b, HoldFor: q.hold()}
	}
	q.writing, q.inflight = true, p
	return QueueStep[T]{Answer: b, Write: p}
}

// Queued yields every decision not answered yet, the batch being
// written first, in arrival order.
func (q *WriteQueue[T]) Queued() iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, w := range q.inflight {
			if !yield(w) {
				return
			}
		}
		for _, w := range q.pending {
			if !yield(w) {
				return
			}
		}
	}
}

// Drop empties the queue (the leader is stopping) and returns every
// decision not answered yet, to be failed.
func (q *WriteQueue[T]) Drop() []T {
	out := append(q.inflight, q.pending...)
	*q = WriteQueue[T]{}
	return out
}
