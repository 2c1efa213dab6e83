package refdb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/objstore"
)

// Follower is a read-only handle that polls the store for records written
// by the database's writer. It never writes and never fences anyone.
type Follower struct {
	s    dbStore
	opts Options

	cur atomic.Pointer[View]
	// fresh is when the store last confirmed the view (unix nanoseconds):
	// the open, or a refresh that succeeded, with or without news.
	fresh atomic.Int64

	refreshMu sync.Mutex // one refresh at a time

	chMu    sync.Mutex
	changed chan struct{}

	stop   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// OpenFollower loads the database under prefix read-only and starts
// polling every opts.PollInterval. It returns ErrNotExist if there is no
// database.
func OpenFollower(ctx context.Context, store objstore.Store, prefix string, opts Options) (*Follower, error) {
	f := &Follower{
		s:       newDBStore(store, prefix),
		opts:    opts.withDefaults(),
		changed: make(chan struct{}),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	l, err := f.s.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("refdb: open follower %s: %w", f.s.prefix, err)
	}
	if !l.exists {
		return nil, fmt.Errorf("refdb: open follower %s: %w", f.s.prefix, ErrNotExist)
	}
	f.cur.Store(l.view)
	f.fresh.Store(time.Now().UnixNano())
	var pollCtx context.Context
	pollCtx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go f.poll(pollCtx)
	return f, nil
}

// View returns the newest state the follower has seen.
func (f *Follower) View() *View { return f.cur.Load() }

// Fresh is when the store last confirmed View: the open or the last
// successful refresh. Callers judge how stale a view they accept.
func (f *Follower) Fresh() time.Time { return time.Unix(0, f.fresh.Load()) }

// Changed returns a channel that is closed the next time the follower's
// view advances; each change closes the current channel and installs a
// fresh one. Take the channel before reading View to never miss a change:
//
//	ch := f.Changed(); v := f.View(); ...; <-ch
func (f *Follower) Changed() <-chan struct{} {
	f.chMu.Lock()
	defer f.chMu.Unlock()
	return f.changed
}

func (f *Follower) publish(v *View) {
	f.cur.Store(v)
	f.chMu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.chMu.Unlock()
}

// Refresh looks for new records now: one LIST of the log after the current
// sequence, then the new records in parallel. If the log was trimmed past
// the follower's position it reloads from the newest snapshot.
func (f *Follower) Refresh(ctx context.Context) error {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	v := f.cur.Load()
	asked := time.Now()
	seqs, err := f.s.listWAL(ctx, v.seq)
	if err != nil {
		return fmt.Errorf("refdb: follower refresh: %w", err)
	}
	if len(seqs) == 0 {
		f.fresh.Store(asked.UnixNano())
		return nil
	}
	next, err := f.catchUp(ctx, v, seqs)
	if errors.Is(err, errRetry) || errors.Is(err, objstore.ErrNotFound) {
		l, lerr := f.s.load(ctx)
		if lerr != nil {
			return fmt.Errorf("refdb: follower reload: %w", lerr)
		}
		next, err = l.view, nil
	}
	if err != nil {
		return fmt.Errorf("refdb: follower refresh: %w", err)
	}
	if next.seq > v.seq {
		f.publish(next)
	}
	f.fresh.Store(asked.UnixNano())
	return nil
}

// catchUp applies the listed records if they continue v without a gap.
func (f *Follower) catchUp(ctx context.Context, v *View, seqs []uint64) (*View, error) {
	for i, seq := range seqs {
		if seq != v.seq+1+uint64(i) {
			return nil, fmt.Errorf("%w: log gap before %d", errRetry, seq)
		}
	}
	recs, err := f.s.readLogs(ctx, seqs[0], seqs[len(seqs)-1])
	if err != nil {
		return nil, err
	}
	for i, r := range recs {
		v = v.apply(seqs[0]+uint64(i), r.muts)
	}
	return v, nil
}

func (f *Follower) poll(ctx context.Context) {
	defer close(f.done)
	t := time.NewTicker(f.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		if err := f.Refresh(ctx); err != nil && ctx.Err() == nil {
			f.opts.Logger.Warn("refdb: follower poll failed", zap.String("prefix", f.s.prefix), zap.Error(err))
		}
	}
}

// Close stops polling. The last view stays readable.
func (f *Follower) Close() error {
	f.once.Do(func() {
		close(f.stop)
		f.cancel()
	})
	<-f.done
	return nil
}
