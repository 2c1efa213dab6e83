package outbox

import "time"

// Policy is how the delivery worker retries: exponential backoff with
// jitter from FirstRetry, at most MaxBackoff between attempts, until the
// delivery has waited Window since it was queued (RGIT_HOOK_RETRY_SECS).
type Policy struct {
	Window     time.Duration
	FirstRetry time.Duration
	MaxBackoff time.Duration
}

// Outcome is what a delivery becomes after an attempt.
type Outcome uint8

const (
	Delivered Outcome = iota // the receiver answered 2xx: to the log
	Retry                    // failed; tried again at Delivery.Next
	GaveUp                   // failed, and the window has passed: to the log as failed
)

var outcomeNames = [...]string{Delivered: "delivered", Retry: "retry", GaveUp: "failed"}

func (o Outcome) String() string { return outcomeNames[o] }

// Backoff is the wait before retry n (1 for the first retry): FirstRetry
// doubled n-1 times, at most MaxBackoff, of which the second half is
// jittered by u in [0, 1) (equal jitter: never less than half the
// exponential wait, so a failing receiver is not hammered, yet retries
// from many repositories spread out).
func (p Policy) Backoff(n int, u float64) time.Duration {
	d := p.FirstRetry
	for i := 1; i < n && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	return d/2 + time.Duration(u*float64(d/2))
}

// After decides what d becomes after attempt a at now, with jitter draw
// u in [0, 1):
//
//	attempt          window left at the next retry   outcome
//	2xx              -                               Delivered (to the log)
//	failed           yes                             Retry at now + Backoff(attempts, u)
//	failed           no                              GaveUp (to the log as failed)
func (p Policy) After(d Delivery, a Attempt, now time.Time, u float64) (Result, Outcome) {
	d = d.record(a)
	if a.OK() {
		d.State, d.Next = StateDelivered, time.Time{}
		return Result{Delivery: d, Done: true}, Delivered
	}
	next := now.Add(p.Backoff(d.Attempts, u))
	if !next.Before(d.Queued.Add(p.Window)) {
		d.State, d.Next = StateFailed, time.Time{}
		return Result{Delivery: d, Done: true}, GaveUp
	}
	d.Next = next
	return Result{Delivery: d}, Retry
}

// Expired reports whether d's window passed before it could be tried
// (a repository closed for longer than the window, or a lane stuck
// behind a receiver that never answered): it is given up without
// another attempt.
func (p Policy) Expired(d Delivery, now time.Time) bool {
	return !now.Before(d.Queued.Add(p.Window))
}

// GiveUp is d moved to the log as failed without another attempt.
func GiveUp(d Delivery) Result {
	d.State, d.Next = StateFailed, time.Time{}
	return Result{Delivery: d, Done: true}
}
