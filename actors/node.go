package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
)

// Config configures a node's actor system.
type Config struct {
	Deps        repo.Deps
	WarmTTL     time.Duration // RGIT_WARM_TTL_SECS
	MaxWarm     int           // RGIT_MAX_WARM
	OpenTimeout time.Duration // bound on opening or closing one database; default 60s
	CallTimeout time.Duration // bound on one write executed by a repo actor; default 5m
	// MaintenanceSlots bounds the background roll-ups running at once on
	// this node; default 1, so maintenance never takes more than one core.
	// Negative turns automatic maintenance off (tests that count packs).
	MaintenanceSlots int
	// MaintenanceInterval is the mean interval of the scheduled
	// maintenance pass over the node's open repositories (jittered, see
	// jittered); 0: maintenance runs only after pushes.
	MaintenanceInterval time.Duration
	// FullRepackAge: a repository with more than one pack whose largest
	// pack is older than this gets a full repack instead of a roll-up;
	// default 7 days.
	FullRepackAge time.Duration
	// UnbitmappedGrace is how long a largest pack may go without a bitmap
	// before maintenance repacks (see planMaintenance); default 10
	// minutes.
	UnbitmappedGrace time.Duration
	// BusyRetry is the first wait of a maintenance job deferred because
	// the node is busy (or its memory budget short); it doubles from
	// there. Default 1 s.
	BusyRetry time.Duration
	// Busy is the load signal maintenance backs off on: while it reports
	// true, jobs wait (retrying with backoff) before they start. Nil: the
	// node is busy while more than 4 sessions per CPU are live.
	Busy func() bool
	// Reserve, if set, admits a maintenance job that rewrites objects
	// objects against the node's memory budget (transport/service/admission's
	// Maintenance kind); false: the job lets go of the repository, waits
	// with backoff and asks again. Nil: always admitted.
	Reserve func(objects int64) (release func(), ok bool)
	// MaintenanceDone, if set, is called whenever background maintenance
	// has finished everything scheduled (the node may return the memory
	// it used).
	MaintenanceDone func()
	Log             *zap.Logger
	Registerer      prometheus.Registerer // nil: metrics are not registered
	// BeforeRollUp, if set, is called after a background roll-up is
	// planned and before it is built; AfterMaintenancePass after each
	// scheduled pass has asked for maintenance of the open repositories.
	// Observers: tests hold or count background work there.
	BeforeRollUp         func(owner, name string)
	AfterMaintenancePass func()
	// Cluster makes the node a cluster member; nil is a single node that
	// owns every repository.
	Cluster *ClusterConfig

	// GCInterval is the mean time between automatic garbage collections
	// of the open (owned) repositories (RGIT_GC_INTERVAL_SECS); 0: none.
	// GCMinAge is how long an unreferenced pack is kept (a push may be
	// staging it).
	GCInterval, GCMinAge time.Duration
	// Cache is the read API's answer cache (RGIT_REDIS_URL); garbage
	// collection purges a repository's answers when it deletes packs, so
	// no answer outlives the objects it shows. nil: none.
	Cache CachePurger
	// Hooks delivers webhooks (hooks.go); nil: events are still queued
	// in the outbox, and nothing sends them.
	Hooks HookRunner
}

// CachePurger makes every cached read-API answer of a repository
// unreachable (transport/product/api.Cache bumps its generation). Its error says
// what to run to retry.
type CachePurger interface {
	Purge(ctx context.Context, owner, name string) error
}

// Node is one rgit node's actor system: the supervisor and its repo actors.
type Node struct {
	cfg    Config
	log    *zap.Logger
	system *actor.ActorSystem
	sup    *actor.PID
	// transport is the transport supervisor: one session actor per live
	// git session (sessions.go).
	transport *actor.PID
	metrics   *metrics
	cl        *clusterState // nil in single-node mode
	maint     *maintainer

	shutOnce sync.Once
	shutErr  error

	sessions atomic.Int64 // live Sessions (the default load signal)
}

type metrics struct {
	openRepos   prometheus.Gauge
	openLatency prometheus.Histogram
	fenced      prometheus.Counter
	sessions    *prometheus.GaugeVec // live git sessions by kind
	// The leader's lease decisions (zero on other nodes).
	grants, renewals, forceGrants prometheus.Counter
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
	if cfg.MaintenanceSlots == 0 {
		cfg.MaintenanceSlots = 1
	}
	if cfg.FullRepackAge <= 0 {
		cfg.FullRepackAge = 7 * 24 * time.Hour
	}
	if cfg.UnbitmappedGrace <= 0 {
		cfg.UnbitmappedGrace = defaultUnbitmappedGrace
	}
	if cfg.BusyRetry <= 0 {
		cfg.BusyRetry = busyRetryFirst
	}
	n := &Node{cfg: cfg, log: cfg.Log, metrics: newMetrics(cfg.Registerer)}
	if n.cfg.Busy == nil {
		n.cfg.Busy = n.manySessions
	}
	n.maint = newMaintainer(n, cfg.MaintenanceSlots, cfg.Registerer)
	// protoactor logs through slog; rgit logs through zap, so silence it
	// and report what matters (fencing, restarts) ourselves.
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	shrinkRegistry(n.system)
	if cfg.Cluster != nil {
		if err := n.startCluster(*cfg.Cluster); err != nil {
			n.system.Shutdown()
			return nil, err
		}
	}
	props := actor.PropsFromProducer(func() actor.Actor {
		return &supervisor{node: n, children: map[names.Repo]*child{}, lingering: map[string]lingerer{}}
	})
	pid, err := n.system.Root.SpawnNamed(props, "repos")
	if err != nil {
		n.stopCluster()
		n.system.Shutdown()
		return nil, fmt.Errorf("spawn node supervisor: %w", err)
	}
	n.sup = pid
	tpid, err := n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &transportSupervisor{node: n, live: map[string]SessionKind{}}
	}), "sessions")
	if err != nil {
		n.stopCluster()
		n.system.Shutdown()
		return nil, fmt.Errorf("spawn transport supervisor: %w", err)
	}
	n.transport = tpid
	if cfg.MaintenanceSlots > 0 && cfg.MaintenanceInterval > 0 {
		n.maint.schedule(cfg.MaintenanceInterval)
	}
	n.maint.startGC()
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
		grants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_lease_grants_total", Help: "Leases the ownership leader granted or re-granted on a claim (leader node only)."}),
		renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_lease_renewals_total", Help: "Leases the ownership leader renewed (leader node only)."}),
		forceGrants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_lease_force_grants_total", Help: "Leases the ownership leader moved from an unreachable owner (leader node only)."}),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rgit_git_sessions", Help: "Live git sessions (session actors) on this node, by kind."}, []string{"kind"}),
	}
	for _, k := range sessionKinds {
		m.sessions.WithLabelValues(string(k)) // exported as 0 before the first
	}
	if reg != nil {
		reg.MustRegister(m.openRepos, m.openLatency, m.fenced, m.sessions, m.grants, m.renewals, m.forceGrants)
	}
	return m
}

// RepoSession is one git session's hold on an open repository: a consistent read
// view, plus writes routed through the repo actor. Release it when done.
type RepoSession struct {
	node     *Node
	pid      *actor.PID
	Snapshot *repo.Snapshot
	Info     auth.RepoInfo
	// Epoch is the ownership lease the session runs under (0 on a single
	// node): one epoch, one writer.
	Epoch       uint64
	releaseOnce sync.Once
}

// Session opens owner/name for one session. A missing repository yields an
// error wrapping repo.ErrNotFound and creates nothing. In cluster mode the
// node must own the repository (it claims it if unowned); otherwise the
// error is a *NotOwnerError naming the owner.
func (n *Node) Session(ctx context.Context, owner, name string) (*RepoSession, error) {
	key, err := names.New(owner, name)
	if err != nil {
		return nil, err
	}
	v, err := n.ask(ctx, key, &acquire{}, n.cfg.OpenTimeout, true)
	if err != nil {
		return nil, err
	}
	a := v.(*acquired)
	n.sessions.Add(1)
	return &RepoSession{node: n, pid: a.pid, Snapshot: a.snap, Info: a.info, Epoch: a.epoch}, nil
}

// UpdateRefs applies a push's ref updates in the session's repo actor,
// serialized with every other write to the repository: staged is the
// push's pack (nil for a ref-only push); the pusher is the identity in ctx
// (auth.WithIdentity), for the webhook events committed with the refs. It
// returns one error per command (nil: applied) and the error of the whole
// transaction.
func (s *RepoSession) UpdateRefs(ctx context.Context, staged *repo.PackInfo, cmds []repo.RefUpdate, atomic bool) ([]error, error) {
	v, err := s.node.request(ctx, s.pid, &updateRefs{staged: staged, cmds: cmds, atomic: atomic, by: by(ctx)}, s.node.cfg.CallTimeout)
	if err != nil {
		return nil, err
	}
	r, err := reply[*refsUpdated](v)
	if err != nil {
		return nil, err
	}
	return r.errs, r.err
}

// Release ends the session; the repository may close once idle.
func (s *RepoSession) Release() {
	s.releaseOnce.Do(func() {
		s.node.sessions.Add(-1)
		s.Snapshot.Close()
		s.node.system.Root.Send(s.pid, &release{})
	})
}

// SetVisibility makes owner/name public or private through its repo actor
// (opening it if needed), so that an admin write never fences the serving
// node. Its webhook event names the identity in ctx as who made it.
func (n *Node) SetVisibility(ctx context.Context, owner, name string, public bool) error {
	return n.writeRepo(ctx, owner, name, &setVisibility{public: public, by: by(ctx)})
}

// SetHead points owner/name's HEAD at target through its repo actor.
func (n *Node) SetHead(ctx context.Context, owner, name, target string) error {
	return n.writeRepo(ctx, owner, name, &setHead{target: target})
}

// writeRepo sends a write answered by *written to owner/name's repo actor.
func (n *Node) writeRepo(ctx context.Context, owner, name string, msg any) error {
	r, err := askRepo[*written](ctx, n, owner, name, msg)
	if err != nil {
		return err
	}
	return r.err
}

// askRepo sends msg to owner/name's repo actor (opening it, claiming it
// in cluster mode) and returns its answer as R.
func askRepo[R any](ctx context.Context, n *Node, owner, name string, msg any) (R, error) {
	var zero R
	key, err := names.New(owner, name)
	if err != nil {
		return zero, err
	}
	v, err := n.ask(ctx, key, msg, n.cfg.CallTimeout, true)
	if err != nil {
		return zero, err
	}
	return reply[R](v)
}

// CloseRepo closes owner/name's database if this node holds it open and
// waits until it is closed (delete-repo runs after it). In cluster mode the
// lease is released as well.
func (n *Node) CloseRepo(ctx context.Context, owner, name string) error {
	key, err := names.New(owner, name)
	if err != nil {
		return err
	}
	_, err = n.ask(ctx, key, &closeRepo{}, n.cfg.OpenTimeout, false)
	if errors.Is(err, repo.ErrNotFound) || errors.Is(err, errNotHeld) {
		return nil
	}
	return err
}

// OpenRepos lists the repositories whose actors are alive, sorted.
func (n *Node) OpenRepos(ctx context.Context) ([]string, error) {
	keys, err := n.listRepos(ctx, &listOpen{})
	return repoStrings(keys), err
}

// DrainingRepos lists the repositories whose lease this node is releasing
// through the drain (open, serving, no longer renewed), sorted.
func (n *Node) DrainingRepos(ctx context.Context) ([]string, error) {
	keys, err := n.listRepos(ctx, &listDraining{})
	return repoStrings(keys), err
}

func (n *Node) listRepos(ctx context.Context, msg any) ([]names.Repo, error) {
	v, err := n.request(ctx, n.sup, msg, 10*time.Second)
	if err != nil {
		return nil, err
	}
	keys := slices.Clone(v.(*openKeys).keys)
	slices.SortFunc(keys, names.Compare)
	return keys, nil
}

// repoStrings spells repositories as "owner/name".
func repoStrings(rs []names.Repo) []string {
	if rs == nil {
		return nil
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// Shutdown closes every open repository database and stops the actors.
// Leases are not released (call Drain first for that): to the cluster a
// shutdown without a drain looks like a crash. Later calls return the
// first one's result.
func (n *Node) Shutdown(ctx context.Context) error {
	n.shutOnce.Do(func() { n.shutErr = n.shutdown(ctx) })
	return n.shutErr
}

func (n *Node) shutdown(ctx context.Context) error {
	n.maint.shutdown()
	keys, err := n.listRepos(ctx, &listOpen{})
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range keys {
		if _, err := n.ask(ctx, k, &closeRepo{shutdown: true}, n.cfg.OpenTimeout, false); err != nil &&
			!errors.Is(err, repo.ErrNotFound) && !errors.Is(err, errNotHeld) {
			errs = append(errs, fmt.Errorf("close %s: %w", k, err))
		}
	}
	// Stop the timers and the follower first so nothing sends to the
	// stopped actors; stopping the leader actor closes the map's database.
	n.stopCluster()
	if n.cl != nil && n.cl.leaderPID != nil {
		// Stopping closes the map's database; system shutdown alone does
		// not deliver Stopping.
		if err := n.system.Root.StopFuture(n.cl.leaderPID).Wait(); err != nil {
			errs = append(errs, fmt.Errorf("stop leader actor: %w", err))
		}
	}
	n.system.Shutdown()
	return errors.Join(errs...)
}

func (n *Node) stopCluster() {
	if n.cl != nil {
		n.cl.close()
	}
}

// errNotHeld: a request that does not route found no lease on the repo.
var errNotHeld = errors.New("no lease held on repository")

// ask has the supervisor deliver msg to key's repo actor, retrying when it
// reached an actor that was closing (the idle/eviction race) or already
// gone. In cluster mode a routed ask first makes sure this node owns key
// (claiming it if unowned); an unrouted one only reaches a repository
// already held (errNotHeld).
func (n *Node) ask(ctx context.Context, key names.Repo, msg any, timeout time.Duration, routed bool) (any, error) {
	for attempt := 0; attempt < 5; attempt++ {
		if routed && n.cl != nil {
			if err := n.ensureLocal(ctx, key); err != nil {
				return nil, err
			}
		}
		v, err := n.request(ctx, n.sup, &deliver{key: key, msg: msg}, timeout)
		if errors.Is(err, actor.ErrDeadLetter) {
			continue
		}
		if err != nil {
			return nil, err
		}
		switch r := v.(type) {
		case *notHeld:
			if !routed {
				return nil, fmt.Errorf("repository %s: %w", key, errNotHeld)
			}
			continue // the lease ended between routing and now
		case *errRetry:
			continue
		case *failed:
			return nil, r.err
		}
		return v, nil
	}
	return nil, fmt.Errorf("repository %s: %w", key, ErrBusy)
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

// reply is a repo actor's answer v as the reply type T of the request, or
// the error of a request that could not run.
func reply[T any](v any) (T, error) {
	var zero T
	switch r := v.(type) {
	case T:
		return r, nil
	case *failed:
		return zero, r.err
	case *errRetry:
		return zero, ErrBusy
	}
	return zero, fmt.Errorf("unexpected actor reply %T, want %T", v, zero)
}
