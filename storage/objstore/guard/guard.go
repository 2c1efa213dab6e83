package guard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/objstore"
)

// Observer is told about every request (metrics).
type Observer interface {
	// Request reports one request's op ("get", "put", …) and outcome.
	Request(op string, k Kind)
}

// Options configure New. Zero values take the defaults.
type Options struct {
	// OpTimeout is the longest one request may wait on the store: for its
	// answer, for the next body chunk of a Get, or between two reads of a
	// Put's body (a multipart upload reads a part, then sends it). 0: no
	// deadline of its own. Copy, done by the store itself, has none.
	OpTimeout time.Duration
	// OpTimeoutVar names the setting in error messages.
	OpTimeoutVar string
	Policy       Policy // default DefaultPolicy
	Observer     Observer
	Log          *zap.Logger
	Now          func() time.Time
}

// Store guards an objstore.Store. It is safe for concurrent use.
type Store struct {
	inner objstore.Store
	o     Options

	mu      sync.Mutex
	h       Health
	lastErr error // the last fault, for Status and fail-fast errors
}

var _ objstore.Store = (*Store)(nil)

// New wraps inner.
func New(inner objstore.Store, o Options) *Store {
	if o.Policy.DownAfter == 0 {
		o.Policy = DefaultPolicy
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.OpTimeoutVar == "" {
		o.OpTimeoutVar = "the operation timeout"
	}
	return &Store{inner: inner, o: o, h: Health{Since: o.Now()}}
}

// Status is the store's health for /ready, /status and logs.
type Status struct {
	State State
	Since time.Time
	// Fails counts failed requests since the last success.
	Fails int
	// LastError is the last fault, "" while Healthy.
	LastError string
}

// Status returns the current health.
func (s *Store) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{State: s.h.State, Since: s.h.Since, Fails: s.h.Fails}
	if s.h.State != Healthy && s.lastErr != nil {
		st.LastError = s.lastErr.Error()
	}
	return st
}

// Describe names the wrapped store.
func (s *Store) Describe() string { return objstore.Describe(s.inner) }

// errStalled ends a request that waited OpTimeout for the store.
var errStalled = errors.New("store operation deadline")

// call is one request in flight.
type call struct {
	s      *Store
	op     string
	parent context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer // nil: no OpTimeout
}

// probeKey marks a context whose requests are probes.
type probeKey struct{}

// Probe marks ctx's requests as probes of the store's health: while the
// store is Down they are the only requests sent to it (one per
// Policy.TrialEvery). Whoever owns the guard runs a prober; without one a
// Down store stays Down.
func Probe(ctx context.Context) context.Context { return context.WithValue(ctx, probeKey{}, true) }

// begin admits a request, or fails it fast while the store is Down.
func (s *Store) begin(ctx context.Context, op string) (*call, error) {
	probe, _ := ctx.Value(probeKey{}).(bool)
	s.mu.Lock()
	h, ok := Admit(s.h, s.o.Now(), s.o.Policy, probe)
	s.h = h
	last, since := s.lastErr, s.h.Since
	s.mu.Unlock()
	if !ok {
		s.observe(op, FailedFast)
		return nil, fmt.Errorf("%w: down since %s, not sent (last error: %v)",
			objstore.ErrUnavailable, since.UTC().Format(time.RFC3339), last)
	}
	c := &call{s: s, op: op, parent: ctx}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	if d := s.o.OpTimeout; d > 0 {
		c.timer = time.AfterFunc(d, func() { c.cancel(errStalled) })
	}
	return c, nil
}

func (s *Store) observe(op string, k Kind) {
	if s.o.Observer != nil {
		s.o.Observer.Request(op, k)
	}
}

// progress restarts the operation deadline (bytes moved).
func (c *call) progress() {
	if c.timer != nil {
		c.timer.Reset(c.s.o.OpTimeout)
	}
}

// pause stops the deadline while the caller, not the store, holds the
// request up (reading a body at its own pace, consuming a listing).
func (c *call) pause() {
	if c.timer != nil {
		c.timer.Stop()
	}
}

// finish releases the call's context.
func (c *call) finish() {
	c.pause()
	c.cancel(nil)
}

// result classifies err, folds it into the health and returns the error
// the caller sees: faults wrap objstore.ErrUnavailable.
func (c *call) result(err error) error {
	stalled := errors.Is(context.Cause(c.ctx), errStalled)
	k := Classify(err, stalled, c.parent.Err() != nil)
	c.s.observe(c.op, k)
	if k == Abandoned {
		return err
	}
	c.s.record(k, err)
	if !k.Fault() {
		return err
	}
	if stalled {
		return fmt.Errorf("%w: %s: no answer within %v (%s): %w", objstore.ErrUnavailable, c.op, c.s.o.OpTimeout, c.s.o.OpTimeoutVar, err)
	}
	return fmt.Errorf("%w: %s: %s: %w", objstore.ErrUnavailable, c.op, k, err)
}

// record folds one answered or failed request into the health and logs a
// change of state.
func (s *Store) record(k Kind, err error) {
	s.mu.Lock()
	was := s.h.State
	s.h = Observe(s.h, !k.Fault(), s.o.Now(), s.o.Policy)
	now := s.h.State
	if k.Fault() {
		s.lastErr = err
	}
	s.mu.Unlock()
	switch {
	case was == now:
	case now == Healthy:
		s.o.Log.Info("object store answering again", zap.Stringer("was", was))
	default:
		s.o.Log.Warn("object store failing", zap.Stringer("state", now), zap.Stringer("kind", k), zap.Error(err))
	}
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	c, err := s.begin(ctx, "get")
	if err != nil {
		return nil, objstore.ObjectInfo{}, err
	}
	rc, info, err := s.inner.Get(c.ctx, key)
	if err != nil {
		defer c.finish()
		return nil, info, c.result(err)
	}
	c.pause()
	_ = c.result(nil)
	return &body{c: c, rc: rc}, info, nil
}

// GetRange implements objstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	c, err := s.begin(ctx, "get_range")
	if err != nil {
		return nil, err
	}
	rc, err := s.inner.GetRange(c.ctx, key, off, length)
	if err != nil {
		defer c.finish()
		return nil, c.result(err)
	}
	c.pause()
	_ = c.result(nil)
	return &body{c: c, rc: rc}, nil
}

// body is a Get's body: the deadline runs only while a Read waits.
type body struct {
	c  *call
	rc io.ReadCloser
}

func (b *body) Read(p []byte) (int, error) {
	b.c.progress()
	n, err := b.rc.Read(p)
	b.c.pause()
	if err != nil && err != io.EOF {
		err = b.c.result(err)
	}
	return n, err
}

// UnwrapBody lets objstore.Send hand a local file's body to sendfile(2)
// past Read: the operation deadline stays paused, which it is while the
// caller holds the body up, and the errors of such a copy, which mix in
// the destination's (a client gone), are not the store's health.
func (b *body) UnwrapBody() io.Reader { return b.rc }

func (b *body) Close() error {
	err := b.rc.Close()
	b.c.finish()
	return err
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	c, err := s.begin(ctx, "head")
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	defer c.finish()
	info, err := s.inner.Head(c.ctx, key)
	return info, c.result(err)
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, "put", func(ctx context.Context, r io.Reader) error { return s.inner.Put(ctx, key, r, size) }, r)
}

// PutIfAbsent implements objstore.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, "put_if_absent", func(ctx context.Context, r io.Reader) error { return s.inner.PutIfAbsent(ctx, key, r, size) }, r)
}

func (s *Store) write(ctx context.Context, op string, do func(context.Context, io.Reader) error, r io.Reader) error {
	c, err := s.begin(ctx, op)
	if err != nil {
		return err
	}
	defer c.finish()
	return c.result(do(c.ctx, &progressReader{c: c, r: r}))
}

// progressReader restarts the deadline on every read of a Put's body.
type progressReader struct {
	c *call
	r io.Reader
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.c.progress()
	}
	return n, err
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	c, err := s.begin(ctx, "delete")
	if err != nil {
		return err
	}
	defer c.finish()
	return c.result(s.inner.Delete(c.ctx, key))
}

// Copy implements objstore.Store. The store copies the bytes itself, for
// as long as the object's size needs: no operation deadline.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	c, err := s.begin(ctx, "copy")
	if err != nil {
		return err
	}
	c.pause()
	defer c.finish()
	return c.result(s.inner.Copy(c.ctx, src, dst))
}

// List implements objstore.Store. The deadline runs while the next entry
// is awaited, not while the caller handles one.
func (s *Store) List(ctx context.Context, prefix, startAfter string) iter.Seq2[objstore.ObjectInfo, error] {
	return func(yield func(objstore.ObjectInfo, error) bool) {
		c, err := s.begin(ctx, "list")
		if err != nil {
			yield(objstore.ObjectInfo{}, err)
			return
		}
		defer c.finish()
		failed := false
		for info, err := range s.inner.List(c.ctx, prefix, startAfter) {
			c.pause()
			if err != nil {
				failed = true
				yield(info, c.result(err))
				return
			}
			if !yield(info, nil) {
				break
			}
			c.progress()
		}
		if !failed {
			_ = c.result(nil)
		}
	}
}

// Unwrap returns the guarded store (objstore.PresignerOf looks through
// it: presigning contacts nothing).
func (s *Store) Unwrap() objstore.Store { return s.inner }
