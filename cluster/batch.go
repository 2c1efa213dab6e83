package cluster

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
//     the database, as it does today for one failed decision.
//
// Transitions (B: the batch being written, P: the next one):
//
//	state          event               → state          actions
//	idle           Add(w, writes)      → writing [w]    write [w]
//	idle           Add(w, no write)    → idle           answer w
//	writing B, P   Add(w, writes)      → writing B, P+w
//	writing B, []  Add(w, no write)    → writing B+w    (answered with B)
//	writing B, P   Add(w, no write)    → writing B, P+w (P not empty)
//	writing B, []  Done(ok)            → idle           answer B
//	writing B, P   Done(ok)            → writing P      answer B, write P
//	writing B, P   Done(failed)        → idle           fail B and P
//
// P never starts with a decision that writes nothing, so every batch
// written holds at least one write. T is the caller's record of a
// decision (its requester and answer); the queue never looks inside it.
type WriteQueue[T any] struct {
	writing  bool
	inflight []T
	pending  []T
}

// QueueStep is what the caller must do after a WriteQueue transition, in
// this order: answer, fail, then start writing Write (nil: nothing to
// write). Answer and Fail are in arrival order.
type QueueStep[T any] struct {
	Answer, Fail, Write []T
}

// Add queues decision w; writes says whether it changed the map (its
// entry must be persisted).
func (q *WriteQueue[T]) Add(w T, writes bool) QueueStep[T] {
	switch {
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

// Done reports the end of the write of the batch in flight: ok means it
// is durable.
func (q *WriteQueue[T]) Done(ok bool) QueueStep[T] {
	if !q.writing {
		return QueueStep[T]{}
	}
	b, p := q.inflight, q.pending
	q.inflight, q.pending = nil, nil
	if !ok {
		q.writing = false
		return QueueStep[T]{Fail: append(b, p...)}
	}
	if len(p) == 0 {
		q.writing = false
		return QueueStep[T]{Answer: b}
	}
	q.inflight = p
	return QueueStep[T]{Answer: b, Write: p}
}

// Drop empties the queue (the leader is stopping) and returns every
// decision not answered yet, to be failed.
func (q *WriteQueue[T]) Drop() []T {
	out := append(q.inflight, q.pending...)
	*q = WriteQueue[T]{}
	return out
}

// Len is the number of decisions waiting for a write.
func (q *WriteQueue[T]) Len() int { return len(q.inflight) + len(q.pending) }
