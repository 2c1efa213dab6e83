package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/repo"
)

// Config configures a node's actor system.
type Config struct {
	Deps        repo.Deps
	WarmTTL     time.Duration // RGIT_WARM_TTL_SECS
	MaxWarm     int           // RGIT_MAX_WARM
	OpenTimeout time.Duration // bound on opening or closing one database; default 60s
	CallTimeout time.Duration // bound on one write executed by a repo actor; default 5m
	Log         *zap.Logger
	Registerer  prometheus.Registerer // nil: metrics are not registered
}

// Node is one rgit node's actor system: the supervisor and its repo actors.
type Node struct {
	cfg     Config
	log     *zap.Logger
	system  *actor.ActorSystem
	sup     *actor.PID
	metrics *metrics
}

type metrics struct {
	openRepos   prometheus.Gauge
	openLatency prometheus.Histogram
	fenced      prometheus.Counter
}

// ErrBusy reports that a repository could not be reached in time.
var ErrBusy = errors.New("repository busy; try again")

// NewNode starts the actor system and the node supervisor.
func NewNode(cfg Config) (*Node, error) {
	if cfg.WarmTTL <= 0 {
		cfg.WarmTTL = 300 * time.Second
	}
	if cfg.MaxWarm <= 0 {
		cfg.MaxWarm = 64
	}
	if cfg.OpenTimeout <= 0 {
		cfg.OpenTimeout = 60 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 5 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	n := &Node{cfg: cfg, log: cfg.Log, metrics: newMetrics(cfg.Registerer)}
	// protoactor logs through slog; rgit logs through zap, so silence it
	// and report what matters (fencing, restarts) ourselves.
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	props := actor.PropsFromProducer(func() actor.Actor {
		return &supervisor{node: n, children: map[repoKey]*child{}}
	})
	pid, err := n.system.Root.SpawnNamed(props, "repos")
	if err != nil {
		return nil, fmt.Errorf("spawn node supervisor: %w", err)
	}
	n.sup = pid
	return n, nil
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		openRepos: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rgit_open_repos", Help: "Repositories whose database this node holds open."}),
		openLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rgit_repo_open_seconds", Help: "Time to open a repository database.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_repo_fenced_total", Help: "Repository databases closed because a newer writer fenced them."}),
	}
	if reg != nil {
		reg.MustRegister(m.openRepos, m.openLatency, m.fenced)
	}
	return m
}

// Session is one git session's hold on an open repository: a consistent read
// view, plus writes routed through the repo actor. Release it when done.
type Session struct {
	node     *Node
	pid      *actor.PID
	Snapshot *repo.Snapshot
	Info     repo.RepoInfo
	released bool
}

// Session opens owner/name for one session. A missing repository yields an
// error wrapping repo.ErrNotFound and creates nothing.
func (n *Node) Session(ctx context.Context, owner, name string) (*Session, error) {
	if err := repo.ValidateName(owner, name); err != nil {
		return nil, err
	}
	v, pid, err := n.ask(ctx, keyOf(owner, name), &acquire{}, n.cfg.OpenTimeout)
	if err != nil {
		return nil, err
	}
	a := v.(*acquired)
	return &Session{node: n, pid: pid, Snapshot: a.snap, Info: a.info}, nil
}

// Call runs fn inside the repo actor (serialized with every other write to
// the repository) and returns its result.
func (s *Session) Call(ctx context.Context, fn func(r *repo.Repo) (any, error)) (any, error) {
	v, err := s.node.request(ctx, s.pid, &call{fn: fn}, s.node.cfg.CallTimeout)
	if err != nil {
		return nil, err
	}
	return unwrapCall(v)
}

// Release ends the session; the repository may close once idle.
func (s *Session) Release() {
	if s.released {
		return
	}
	s.released = true
	s.Snapshot.Close()
	s.node.system.Root.Send(s.pid, &release{})
}

// Do runs fn inside owner/name's repo actor, opening it if needed. Admin
// writes use it so they never fence the serving node.
func (n *Node) Do(ctx context.Context, owner, name string, fn func(r *repo.Repo) (any, error)) (any, error) {
	if err := repo.ValidateName(owner, name); err != nil {
		return nil, err
	}
	v, _, err := n.ask(ctx, keyOf(owner, name), &call{fn: fn}, n.cfg.CallTimeout)
	if err != nil {
		return nil, err
	}
	return unwrapCall(v)
}

// CloseRepo closes owner/name's database if this node holds it open and
// waits until it is closed (delete-repo runs after it).
func (n *Node) CloseRepo(ctx context.Context, owner, name string) error {
	_, _, err := n.ask(ctx, keyOf(owner, name), &closeRepo{}, n.cfg.OpenTimeout)
	if errors.Is(err, repo.ErrNotFound) {
		return nil
	}
	return err
}

// OpenRepos lists the repositories whose actors are alive, sorted.
func (n *Node) OpenRepos(ctx context.Context) ([]string, error) {
	v, err := n.request(ctx, n.sup, &listOpen{}, 10*time.Second)
	if err != nil {
		return nil, err
	}
	keys := v.(*openKeys).keys
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	slices.Sort(out)
	return out, nil
}

// Shutdown closes every open repository database and stops the actors.
func (n *Node) Shutdown(ctx context.Context) error {
	keys, err := n.OpenRepos(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range keys {
		if _, _, err := n.ask(ctx, repoKey(k), &closeRepo{}, n.cfg.OpenTimeout); err != nil &&
			!errors.Is(err, repo.ErrNotFound) {
			errs = append(errs, fmt.Errorf("close %s: %w", k, err))
		}
	}
	n.system.Shutdown()
	return errors.Join(errs...)
}

// ask routes msg to key's repo actor, retrying when it reached an actor that
// was closing (the idle/eviction race) or already gone.
func (n *Node) ask(ctx context.Context, key repoKey, msg any, timeout time.Duration) (any, *actor.PID, error) {
	for attempt := 0; attempt < 5; attempt++ {
		v, err := n.request(ctx, n.sup, &getRepo{key: key}, 10*time.Second)
		if err != nil {
			return nil, nil, err
		}
		pid := v.(*repoPID).pid
		v, err = n.request(ctx, pid, msg, timeout)
		if errors.Is(err, actor.ErrDeadLetter) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if _, retry := v.(*errRetry); retry {
			continue
		}
		if r, ok := v.(*callResult); ok && r.err != nil {
			return nil, nil, r.err
		}
		return v, pid, nil
	}
	return nil, nil, fmt.Errorf("repository %s: %w", key, ErrBusy)
}

// request sends msg and waits for the answer, the timeout or ctx.
func (n *Node) request(ctx context.Context, pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	v, err := n.system.Root.RequestFuture(pid, msg, timeout).Result()
	if errors.Is(err, actor.ErrTimeout) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrBusy
	}
	return v, err
}

func unwrapCall(v any) (any, error) {
	switch r := v.(type) {
	case *callResult:
		return r.v, r.err
	case *errRetry:
		return nil, ErrBusy
	}
	return nil, fmt.Errorf("unexpected actor reply %T", v)
}
