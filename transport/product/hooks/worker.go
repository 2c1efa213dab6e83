package hooks

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/outbox"
)

// maxHeads is how many waiting deliveries of one hook a worker reads at
// a time: the first is sent, the others may be given up together.
const maxHeads = 16

// worker delivers one open repository's outbox, each hook in order with
// one delivery in flight, until the repo actor stops it.
type worker struct {
	s      *Service
	q      *actors.HookQueue
	wake   chan struct{}
	cancel context.CancelFunc
	log    *zap.Logger
	walks  walkCache

	mu      sync.Mutex
	pending int       // deliveries waiting when last read
	oldest  time.Time // queued time of the oldest of them
}

// Wake implements actors.HookWorker.
func (w *worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Stop implements actors.HookWorker.
func (w *worker) Stop() { w.cancel() }

func (w *worker) seen() (int, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending, w.oldest
}

// attemptDone is one attempt's result, back from its goroutine; an
// attempt that could not be made (the worker stops, or the repository
// would not give a snapshot) has no result and leaves the delivery as
// it was.
type attemptDone struct {
	hook string
	r    outbox.Result
	out  outbox.Outcome
	err  error // why there is no result
}

// run loops: read the outbox, give up what waited past the window, start
// what is due on hooks with nothing in flight, then wait for a result, a
// wake-up, the next due time or the end.
func (w *worker) run(ctx context.Context) {
	inflight := map[string]bool{}
	done := make(chan attemptDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	retry := time.Duration(0) // after a failure to read or record
	for {
		next, err := w.step(ctx, inflight, done)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// The actor is closing (Stop follows) or the store failed:
			// try again shortly; the outbox is unchanged.
			retry = min(max(2*retry, 100*time.Millisecond), 10*time.Second)
			w.log.Warn("webhook delivery: outbox unavailable", zap.Error(err), zap.Duration("retry_in", retry))
			next = time.Now().Add(retry)
		} else {
			retry = 0
		}
		timer.Reset(time.Hour)
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), 0))
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		case d := <-done:
			// Results that arrived together are recorded in one write.
			batch := []attemptDone{d}
			for more := true; more; {
				select {
				case d := <-done:
					batch = append(batch, d)
				default:
					more = false
				}
			}
			for _, d := range batch {
				delete(inflight, d.hook)
				if d.err != nil {
					// Read the outbox again only after a pause.
					retry = min(max(2*retry, 100*time.Millisecond), 10*time.Second)
					w.log.Debug("webhook delivery: no attempt", zap.Error(d.err), zap.Duration("retry_in", retry))
					pause(ctx, retry)
				}
			}
			w.finish(ctx, batch)
		}
	}
}

// step reads the outbox and starts or gives up what it can; it returns
// when the earliest delivery not yet due is due (zero: none).
func (w *worker) step(ctx context.Context, inflight map[string]bool, done chan<- attemptDone) (time.Time, error) {
	v, err := w.q.Outbox(ctx)
	if err != nil {
		return time.Time{}, err
	}
	n, oldest, err := v.Pending()
	if err != nil {
		return time.Time{}, err
	}
	w.mu.Lock()
	w.pending, w.oldest = n, oldest
	w.mu.Unlock()
	if n == 0 {
		return time.Time{}, nil
	}
	hooks, err := v.Hooks()
	if err != nil {
		return time.Time{}, err
	}
	now := time.Now()
	var next time.Time
	var expired []outbox.Result
	for _, h := range hooks {
		if inflight[h.ID] {
			continue
		}
		head, err := v.Head(h.ID, maxHeads)
		if err != nil {
			return time.Time{}, err
		}
		i := 0
		for i < len(head) && w.s.cfg.Policy.Expired(head[i], now) {
			expired = append(expired, outbox.GiveUp(head[i]))
			i++
		}
		if i == len(head) {
			continue
		}
		d := head[i]
		if d.Next.After(now) {
			if next.IsZero() || d.Next.Before(next) {
				next = d.Next
			}
			continue
		}
		inflight[h.ID] = true
		go func() {
			r := w.attempt(ctx, h, d)
			select {
			case done <- r:
			case <-ctx.Done():
			}
		}()
	}
	if len(expired) > 0 {
		if err := w.q.Finish(ctx, expired); err != nil {
			return time.Time{}, err
		}
		for _, r := range expired {
			w.s.metrics.outcome(outbox.GaveUp)
			w.log.Warn("webhook delivery given up: its retry window passed before it could be sent",
				zap.String("hook", r.Delivery.Hook), zap.String("delivery", r.Delivery.ID), zap.String("event", r.Delivery.Event.Kind))
		}
		return now, nil // read again: more may be due behind them
	}
	return next, nil
}

// attempt sends d to h once (when a node slot is free) and decides what
// d becomes.
func (w *worker) attempt(ctx context.Context, h outbox.Hook, d outbox.Delivery) attemptDone {
	var a outbox.Attempt
	release, err := w.s.slot(ctx)
	if err != nil {
		return attemptDone{hook: h.ID} // stopping: nothing to record
	}
	b, err := body(ctx, w.q, &w.walks, w.q.Repo, d)
	switch {
	case errors.Is(err, actors.ErrBusy):
		// The repository is closing or busy: not an attempt.
		release()
		return attemptDone{hook: h.ID, err: err}
	case err == nil:
		a = send(ctx, w.s.client, h, d.Event.Kind, d.ID, b)
	default:
		// Not the receiver's fault, and retried like its failures.
		a = outbox.Attempt{At: time.Now().UTC(), Error: "building the payload: " + err.Error()}
	}
	release()
	if ctx.Err() != nil {
		return attemptDone{hook: h.ID} // abandoned: the next owner sends it again
	}
	r, out := w.s.cfg.Policy.After(d, a, time.Now(), jitter())
	w.s.metrics.attempt(a)
	return attemptDone{hook: h.ID, r: r, out: out}
}

// finish records attempts' results in the outbox, in one write.
func (w *worker) finish(ctx context.Context, batch []attemptDone) {
	var results []outbox.Result
	for _, d := range batch {
		if d.r.Delivery.ID != "" {
			results = append(results, d.r)
		}
	}
	if len(results) == 0 {
		return
	}
	if err := w.q.Finish(ctx, results); err != nil {
		// Not recorded: the deliveries are still waiting as they were
		// and are sent again (at least once).
		w.log.Warn("webhook delivery: attempts not recorded", zap.Int("attempts", len(results)), zap.Error(err))
		return
	}
	for _, d := range batch {
		if d.r.Delivery.ID == "" {
			continue
		}
		w.s.metrics.outcome(d.out)
		dl := d.r.Delivery
		last := dl.Last[len(dl.Last)-1]
		switch d.out {
		case outbox.Retry:
			w.log.Info("webhook delivery failed; retrying", zap.String("hook", dl.Hook), zap.String("delivery", dl.ID),
				zap.Int("attempts", dl.Attempts), zap.Int("status", last.Status), zap.String("error", last.Error), zap.Time("next", dl.Next))
		case outbox.GaveUp:
			w.log.Warn("webhook delivery given up after its retry window", zap.String("hook", dl.Hook), zap.String("delivery", dl.ID),
				zap.Int("attempts", dl.Attempts), zap.Int("status", last.Status), zap.String("error", last.Error))
		}
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
