// Package faultstore wraps any objstore.Store and injects faults into it:
// seeded random errors, fixed and jittered latency, limited bandwidth on
// the bodies that Get and GetRange return, bodies cut off mid-stream,
// outages, writes that land but report failure (the ambiguous case), writes
// that fail before reaching the store, and gates that park chosen calls so a test can
// interleave concurrent writers deterministically. It also counts calls per
// operation so benchmarks can report object-store round trips.
//
// Rules may be added and removed at any time from any goroutine. With a
// fixed seed and a deterministic call order the injected faults repeat
// exactly.
//
// It is test infrastructure (under testkit): it imports the standard library
// and storage/objstore only.
package faultstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rgit/rgit/storage/objstore"
)

// Injected errors. Both wrap ErrInjected.
var (
	// ErrInjected is the root of every fault this package invents.
	ErrInjected = errors.New("faultstore: injected fault")
	// ErrApplied marks a "fail after" fault: the operation reached the
	// inner store and took effect, but the caller is told it failed.
	ErrApplied = fmt.Errorf("%w (operation was applied)", ErrInjected)
	// ErrOutage is returned for every call during an outage.
	ErrOutage = fmt.Errorf("%w: store outage", ErrInjected)
)

// Op is a set of store operations (a bit mask).
type Op uint16

// Operations, one bit each.
const (
	OpGet Op = 1 << iota
	OpGetRange
	OpHead
	OpPut
	OpPutIfAbsent
	OpDelete
	OpList
	OpCopy

	// ReadOps are the operations that change nothing.
	ReadOps = OpGet | OpGetRange | OpHead | OpList
	// WriteOps are the operations that change the store.
	WriteOps = OpPut | OpPutIfAbsent | OpDelete | OpCopy
	// AllOps matches every operation.
	AllOps = ReadOps | WriteOps
)

var opNames = [...]string{"get", "getrange", "head", "put", "putifabsent", "delete", "list", "copy"}

// String names a single operation, or lists the members of a set.
func (o Op) String() string {
	var names []string
	for i, n := range opNames {
		if o&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// Ops lists every single operation, in bit order.
func Ops() []Op {
	out := make([]Op, len(opNames))
	for i := range out {
		out[i] = 1 << i
	}
	return out
}

func (o Op) index() int {
	for i := range opNames {
		if o == 1<<i {
			return i
		}
	}
	return -1
}

// Rule describes faults for the calls it matches: calls whose operation is
// in Ops (zero: all) and whose key starts with Prefix (for List: whose
// listing prefix overlaps Prefix; for Copy: the destination key).
type Rule struct {
	Ops    Op
	Prefix string

	// Latency is added before the call reaches the inner store, plus a
	// uniform random extra in [0, Jitter).
	Latency time.Duration
	Jitter  time.Duration
	// LatencyAfter is added after the inner call returns; a context that
	// expires during it makes the caller see an error for an operation
	// that took effect.
	LatencyAfter time.Duration

	// Bandwidth, when positive, limits in bytes per second how fast the
	// body of a matching Get or GetRange can be read: each body on its own
	// (one connection to S3 is limited so; parallel ranged reads add up),
	// or, with SharedBandwidth, all bodies this rule matches together (one
	// link). Several matching rules all apply.
	Bandwidth       int64
	SharedBandwidth bool
	// CutBodyAfter, when positive, makes the body of a matching Get or
	// GetRange fail with ErrInjected after that many bytes (a connection
	// reset mid-download). It is a fault for Times.
	CutBodyAfter int64

	// FailBefore is the probability that the call fails without reaching
	// the inner store.
	FailBefore float64
	// FailAfter is the probability that a call which succeeded in the
	// inner store is reported as failed (ErrApplied).
	FailAfter float64

	// Times, when positive, limits how many faults (before or after) the
	// rule injects; the rule is removed after the last one. With Times set,
	// both probabilities zero and no CutBodyAfter, FailBefore counts as 1.
	Times int
}

// RuleID identifies an added rule.
type RuleID uint64

type rule struct {
	Rule
	id        RuleID
	remaining int      // -1: unlimited
	link      *limiter // SharedBandwidth: the budget every body shares
}

// matches reports whether a call (op on key) is selected by an operation
// set and key prefix.
func matches(ops Op, prefix string, op Op, key string) bool {
	if ops != 0 && ops&op == 0 {
		return false
	}
	if op == OpList {
		return strings.HasPrefix(key, prefix) || strings.HasPrefix(prefix, key)
	}
	return strings.HasPrefix(key, prefix)
}

// Store is the fault-injecting wrapper. The zero value is not usable; call
// New.
type Store struct {
	inner objstore.Store

	mu     sync.Mutex
	rng    *rand.Rand
	rules  []*rule
	nextID RuleID
	gates  []*Gate
	outage bool

	counts [len(opNames)]atomic.Int64
}

var _ objstore.Store = (*Store)(nil)

// New wraps inner. seed makes every random decision reproducible.
func New(inner objstore.Store, seed int64) *Store {
	return &Store{inner: inner, rng: rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))}
}

// Inner returns the wrapped store (to inspect or seed it without faults).
func (s *Store) Inner() objstore.Store { return s.inner }

// AddRule installs r and returns its id.
func (s *Store) AddRule(r Rule) RuleID {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	nr := &rule{Rule: r, id: s.nextID, remaining: -1}
	if r.Times > 0 {
		nr.remaining = r.Times
		if r.FailBefore == 0 && r.FailAfter == 0 && r.CutBodyAfter <= 0 {
			nr.FailBefore = 1
		}
	}
	if r.Bandwidth > 0 && r.SharedBandwidth {
		nr.link = newLimiter(r.Bandwidth)
	}
	s.rules = append(s.rules, nr)
	return nr.id
}

// RemoveRule uninstalls a rule; removing an unknown or expired id is a no-op.
func (s *Store) RemoveRule(id RuleID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(id)
}

func (s *Store) removeLocked(id RuleID) {
	for i, r := range s.rules {
		if r.id == id {
			s.rules = append(s.rules[:i:i], s.rules[i+1:]...)
			return
		}
	}
}

// ClearRules removes every rule (gates and outages are separate).
func (s *Store) ClearRules() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = nil
}

// FailNext makes the next n calls matching ops and prefix fail: before
// reaching the inner store, or (applied true) after taking effect there.
func (s *Store) FailNext(ops Op, prefix string, n int, applied bool) RuleID {
	r := Rule{Ops: ops, Prefix: prefix, Times: n}
	if applied {
		r.FailAfter = 1
	} else {
		r.FailBefore = 1
	}
	return s.AddRule(r)
}

// SetOutage starts (true) or ends (false) an outage: while it lasts every
// call fails with ErrOutage before reaching the inner store.
func (s *Store) SetOutage(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outage = on
}

// Count returns how many calls of the single operation op were made
// (including failed ones).
func (s *Store) Count(op Op) int64 {
	if i := op.index(); i >= 0 {
		return s.counts[i].Load()
	}
	var n int64
	for i := range s.counts {
		if op&(1<<i) != 0 {
			n += s.counts[i].Load()
		}
	}
	return n
}

// ResetCounts zeroes every call counter.
func (s *Store) ResetCounts() {
	for i := range s.counts {
		s.counts[i].Store(0)
	}
}

// Gate parks matching calls until Release. Create with Store.Hold.
type Gate struct {
	s       *Store
	ops     Op
	prefix  string
	suffix  string
	release chan struct{}
	once    sync.Once
	blocked chan struct{} // closed when the first call parks
	mu      sync.Mutex
	n       int
}

// Hold installs a gate: from now on, calls matching ops and prefix block
// (honouring their context) until the gate is released.
func (s *Store) Hold(ops Op, prefix string) *Gate { return s.HoldKeys(ops, prefix, "") }

// HoldKeys is Hold for the keys that also end in suffix (e.g. one kind of
// object under a prefix that other writers use too).
func (s *Store) HoldKeys(ops Op, prefix, suffix string) *Gate {
	g := &Gate{s: s, ops: ops, prefix: prefix, suffix: suffix, release: make(chan struct{}), blocked: make(chan struct{})}
	s.mu.Lock()
	s.gates = append(s.gates, g)
	s.mu.Unlock()
	return g
}

// Blocked is closed once at least one call is parked at the gate.
func (g *Gate) Blocked() <-chan struct{} { return g.blocked }

// Wait blocks until a call is parked at the gate or ctx ends.
func (g *Gate) Wait(ctx context.Context) error {
	select {
	case <-g.blocked:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("faultstore: waiting for a call at gate %s %q: %w", g.ops, g.prefix, ctx.Err())
	}
}

// Parked reports how many calls are parked right now.
func (g *Gate) Parked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// Release removes the gate and lets every parked call proceed. Calling it
// again is a no-op.
func (g *Gate) Release() {
	g.once.Do(func() {
		g.s.mu.Lock()
		for i, x := range g.s.gates {
			if x == g {
				g.s.gates = append(g.s.gates[:i:i], g.s.gates[i+1:]...)
				break
			}
		}
		g.s.mu.Unlock()
		close(g.release)
	})
}

func (g *Gate) park(ctx context.Context) error {
	g.mu.Lock()
	g.n++
	if g.n == 1 {
		select {
		case <-g.blocked:
		default:
			close(g.blocked)
		}
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.n--
		g.mu.Unlock()
	}()
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// plan is what the rules decided for one call.
type plan struct {
	failAfter    bool
	latencyAfter time.Duration
	// For bodies (Get, GetRange): the bandwidth limits to honour, and
	// where to cut the body off (0: never).
	limits   []*limiter
	cutAfter int64
}

// enter runs everything that happens before the inner call: counting,
// outage, gates, latency and fail-before decisions.
func (s *Store) enter(ctx context.Context, op Op, key string) (plan, error) {
	s.counts[op.index()].Add(1)

	s.mu.Lock()
	if s.outage {
		s.mu.Unlock()
		return plan{}, fmt.Errorf("%s %q: %w", op, key, ErrOutage)
	}
	var gates []*Gate
	for _, g := range s.gates {
		if matches(g.ops, g.prefix, op, key) && strings.HasSuffix(key, g.suffix) {
			gates = append(gates, g)
		}
	}
	var (
		p         plan
		latency   time.Duration
		failFirst bool
		expired   []RuleID
	)
	for _, r := range s.rules {
		if !matches(r.Ops, r.Prefix, op, key) {
			continue
		}
		latency += r.Latency
		if r.Jitter > 0 {
			latency += time.Duration(s.rng.Int64N(int64(r.Jitter)))
		}
		p.latencyAfter += r.LatencyAfter
		body := op == OpGet || op == OpGetRange
		if body && r.Bandwidth > 0 {
			l := r.link
			if l == nil {
				l = newLimiter(r.Bandwidth)
			}
			p.limits = append(p.limits, l)
		}
		fired := false
		if r.remaining != 0 && !failFirst && r.FailBefore > 0 && s.rng.Float64() < r.FailBefore {
			failFirst, fired = true, true
		} else if r.remaining != 0 && !p.failAfter && r.FailAfter > 0 && s.rng.Float64() < r.FailAfter {
			p.failAfter, fired = true, true
		} else if r.remaining != 0 && body && p.cutAfter == 0 && r.CutBodyAfter > 0 {
			p.cutAfter, fired = r.CutBodyAfter, true
		}
		if fired && r.remaining > 0 {
			r.remaining--
			if r.remaining == 0 {
				expired = append(expired, r.id)
			}
		}
	}
	for _, id := range expired {
		s.removeLocked(id)
	}
	s.mu.Unlock()

	for _, g := range gates {
		if err := g.park(ctx); err != nil {
			return plan{}, fmt.Errorf("%s %q: held at gate: %w", op, key, err)
		}
	}
	if err := sleep(ctx, latency); err != nil {
		return plan{}, fmt.Errorf("%s %q: injected latency: %w", op, key, err)
	}
	if failFirst {
		return plan{}, fmt.Errorf("%s %q: %w", op, key, ErrInjected)
	}
	return p, nil
}

// exit runs after a successful inner call: latency after, fail-after.
func (p plan) exit(ctx context.Context, op Op, key string) error {
	if err := sleep(ctx, p.latencyAfter); err != nil {
		return fmt.Errorf("%s %q: injected latency after the operation: %w", op, key, err)
	}
	if p.failAfter {
		return fmt.Errorf("%s %q: %w", op, key, ErrApplied)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	p, err := s.enter(ctx, OpGet, key)
	if err != nil {
		return nil, objstore.ObjectInfo{}, err
	}
	rc, info, err := s.inner.Get(ctx, key)
	if err != nil {
		return nil, info, err
	}
	if err := p.exit(ctx, OpGet, key); err != nil {
		rc.Close()
		return nil, objstore.ObjectInfo{}, err
	}
	return p.body(ctx, rc, key), info, nil
}

// GetRange implements objstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	p, err := s.enter(ctx, OpGetRange, key)
	if err != nil {
		return nil, err
	}
	rc, err := s.inner.GetRange(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	if err := p.exit(ctx, OpGetRange, key); err != nil {
		rc.Close()
		return nil, err
	}
	return p.body(ctx, rc, key), nil
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	p, err := s.enter(ctx, OpHead, key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	info, err := s.inner.Head(ctx, key)
	if err != nil {
		return info, err
	}
	if err := p.exit(ctx, OpHead, key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	return info, nil
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, OpPut, key, func() error { return s.inner.Put(ctx, key, r, size) })
}

// PutIfAbsent implements objstore.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.write(ctx, OpPutIfAbsent, key, func() error { return s.inner.PutIfAbsent(ctx, key, r, size) })
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.write(ctx, OpDelete, key, func() error { return s.inner.Delete(ctx, key) })
}

// Copy implements objstore.Store. Rules match the destination key.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	return s.write(ctx, OpCopy, dst, func() error { return s.inner.Copy(ctx, src, dst) })
}

func (s *Store) write(ctx context.Context, op Op, key string, do func() error) error {
	p, err := s.enter(ctx, op, key)
	if err != nil {
		return err
	}
	if err := do(); err != nil {
		return err
	}
	return p.exit(ctx, op, key)
}

// List implements objstore.Store. Faults apply once per call, before the
// first item (a listing is one logical round trip here).
func (s *Store) List(ctx context.Context, prefix, startAfter string) iter.Seq2[objstore.ObjectInfo, error] {
	return func(yield func(objstore.ObjectInfo, error) bool) {
		p, err := s.enter(ctx, OpList, prefix)
		if err != nil {
			yield(objstore.ObjectInfo{}, err)
			return
		}
		var items []objstore.ObjectInfo
		for info, err := range s.inner.List(ctx, prefix, startAfter) {
			if err != nil {
				yield(objstore.ObjectInfo{}, err)
				return
			}
			if !p.failAfter && p.latencyAfter == 0 {
				if !yield(info, nil) {
					return
				}
				continue
			}
			items = append(items, info)
		}
		if p.failAfter || p.latencyAfter > 0 {
			// The listing completed; decide now whether the caller sees it.
			if err := p.exit(ctx, OpList, prefix); err != nil {
				yield(objstore.ObjectInfo{}, err)
				return
			}
			for _, info := range items {
				if !yield(info, nil) {
					return
				}
			}
		}
	}
}

// body wraps a Get or GetRange body with the plan's bandwidth limits and
// cut-off point, if any.
func (p plan) body(ctx context.Context, rc io.ReadCloser, key string) io.ReadCloser {
	if len(p.limits) == 0 && p.cutAfter == 0 {
		return rc
	}
	return &body{ReadCloser: rc, ctx: ctx, key: key, limits: p.limits, cutAfter: p.cutAfter}
}

// body is a slowed or breaking object body.
type body struct {
	io.ReadCloser
	ctx      context.Context
	key      string
	limits   []*limiter
	cutAfter int64 // 0: never
	n        int64
}

// bodyChunk bounds one read, so that a limit paces a body smoothly.
const bodyChunk = 256 << 10

func (b *body) Read(p []byte) (int, error) {
	if len(p) > bodyChunk {
		p = p[:bodyChunk]
	}
	if b.cutAfter > 0 {
		if b.n >= b.cutAfter {
			return 0, fmt.Errorf("read %q after %d bytes: %w", b.key, b.n, ErrInjected)
		}
		p = p[:min(int64(len(p)), b.cutAfter-b.n)]
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	for _, l := range b.limits {
		if werr := l.wait(b.ctx, n); werr != nil {
			return n, fmt.Errorf("read %q: injected bandwidth limit: %w", b.key, werr)
		}
	}
	return n, err
}

// limiter paces bytes to a rate. Time owed accumulates, so oversleeping
// one wait (a loaded host wakes late) is made up by the next; at most
// limiterBurst of unused time is carried over, so an idle link does not
// allow a long burst, and a new limiter starts with none.
type limiter struct {
	rate float64 // bytes per second

	mu   sync.Mutex
	next time.Time // when the bytes granted so far have been paid for
}

const limiterBurst = 50 * time.Millisecond

func newLimiter(bytesPerSec int64) *limiter { return &limiter{rate: float64(bytesPerSec)} }

func (l *limiter) wait(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	l.mu.Lock()
	now := time.Now()
	if l.next.IsZero() {
		l.next = now // a new limiter has no credit: its first bytes are paced too
	} else if floor := now.Add(-limiterBurst); l.next.Before(floor) {
		l.next = floor
	}
	l.next = l.next.Add(time.Duration(float64(n) / l.rate * float64(time.Second)))
	d := l.next.Sub(now)
	l.mu.Unlock()
	return sleep(ctx, d)
}
