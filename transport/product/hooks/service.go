package hooks

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/outbox"
)

// Defaults of Config (the README's configuration table).
const (
	DefaultTimeout     = 10 * time.Second // RGIT_HOOK_TIMEOUT_SECS
	DefaultWindow      = 8 * time.Hour    // RGIT_HOOK_RETRY_SECS
	DefaultFirstRetry  = 10 * time.Second // RGIT_HOOK_BACKOFF_MS
	DefaultMaxBackoff  = 10 * time.Minute
	DefaultConcurrency = 16 // RGIT_HOOK_CONCURRENCY
)

// Config configures a node's webhook delivery.
type Config struct {
	// Allow lists the non-public ranges deliveries may go to
	// (RGIT_HOOK_ALLOW).
	Allow []netip.Prefix
	// Timeout bounds one attempt, connecting to reading the answer.
	Timeout time.Duration
	// Policy is the retry schedule; zero fields take the defaults.
	Policy outbox.Policy
	// Concurrency bounds the deliveries in flight on the node.
	Concurrency int
	Log         *zap.Logger
	Registerer  prometheus.Registerer // nil: metrics are not registered
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Policy.Window <= 0 {
		c.Policy.Window = DefaultWindow
	}
	if c.Policy.FirstRetry <= 0 {
		c.Policy.FirstRetry = DefaultFirstRetry
	}
	if c.Policy.MaxBackoff <= 0 {
		c.Policy.MaxBackoff = max(DefaultMaxBackoff, c.Policy.FirstRetry)
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	return c
}

// Service delivers the webhooks of one node: it is the node's
// actors.HookRunner, and the hook commands' sender (Ping).
type Service struct {
	cfg     Config
	client  *http.Client
	slots   chan struct{} // one per delivery in flight
	metrics *metrics

	mu      sync.Mutex
	workers map[*worker]struct{}
}

// New returns the node's delivery service.
func New(cfg Config) *Service {
	cfg = cfg.withDefaults()
	s := &Service{cfg: cfg, client: newClient(Guard{Allow: cfg.Allow}, cfg.Timeout),
		slots: make(chan struct{}, cfg.Concurrency), workers: map[*worker]struct{}{}}
	s.metrics = newMetrics(cfg.Registerer, s.depth)
	return s
}

// Start runs the delivery of q's outbox until Stop (actors.HookRunner).
func (s *Service) Start(q *actors.HookQueue) actors.HookWorker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{s: s, q: q, wake: make(chan struct{}, 1), cancel: cancel,
		log: s.cfg.Log.With(zap.Stringer("repo", q.Repo))}
	s.mu.Lock()
	s.workers[w] = struct{}{}
	s.mu.Unlock()
	go func() {
		defer s.forget(w)
		w.run(ctx)
	}()
	return w
}

func (s *Service) forget(w *worker) {
	s.mu.Lock()
	delete(s.workers, w)
	s.mu.Unlock()
}

// depth sums what the node's workers last saw waiting: how many
// deliveries, and since when the oldest.
func (s *Service) depth() (n int, oldest time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.workers {
		wn, wo := w.seen()
		n += wn
		if wn > 0 && (oldest.IsZero() || wo.Before(oldest)) {
			oldest = wo
		}
	}
	return n, oldest
}

// slot waits for one of the node's delivery slots; release it when done.
func (s *Service) slot(ctx context.Context) (release func(), err error) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// jitter is a draw in [0, 1) for the backoff.
func jitter() float64 { return rand.Float64() }

// Ping sends test-hook's ping to h for repository r now, outside the
// outbox, and returns the attempt.
func (s *Service) Ping(ctx context.Context, r names.Repo, h outbox.Hook) (outbox.Attempt, string, error) {
	id := "ping-" + outbox.NewHookID()
	b, err := pingBody(r, h, id, time.Now())
	if err != nil {
		return outbox.Attempt{}, id, err
	}
	release, err := s.slot(ctx)
	if err != nil {
		return outbox.Attempt{}, id, err
	}
	defer release()
	a := send(ctx, s.client, h, outbox.KindPing, id, b)
	s.metrics.attempt(a)
	return a, id, nil
}
