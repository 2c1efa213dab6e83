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
	BeforeRollUp         func(key names.Repo)
	AfterMaintenancePass func()
	// OnRoundTrip, if set, is called with the request's context before
	// each request to an actor's mailbox that waits for its answer: an
	// observer, so that tests count the round trips of one request.
	OnRoundTrip func(ctx context.Context)
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
	Purge(ctx context.Context, r names.Repo) error
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
	leaseEnded  prometheus.Counter   // repositories closed by the serve lease's end
	sessions    *prometheus.GaugeVec // live git sessions by kind
	// The leader's lease decisions (zero on other nodes).
	grants, renewals, forceGrants prometheus.Counter
	// unpersisted counts session renewals the leader acknowledged without
	// a durable write, the store failing.
	unpersisted prometheus.Counter
	// rebalanceMoves counts the leader's moves by result (moveResults).
	rebalanceMoves *prometheus.CounterVec
	// rebalanceScan times the rebalancer's scans of the whole map.
	rebalanceScan prometheus.Histogram
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
		return &supervisor{node: n, children: map[names.Repo]*child{}, lingering: map[string]lingerer{}, recheck: map[names.Repo]bool{}}
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
		leaseEnded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_serve_lease_ended_total",
			Help: "Repositories closed because the node's session was not renewed for its serve lease's length (TTL less its clock margin)."}),
		grants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_lease_grants_total", Help: "Leases the ownership leader granted or re-granted on a claim (leader node only)."}),
		renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_lease_renewals_total", Help: "Leases the ownership leader renewed (leader node only)."}),
		unpersisted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_lease_renewals_unpersisted_total",
			Help: "Session renewals the ownership leader acknowledged from memory while its writes to the store failed or hung, before they were persisted (leader node only)."}),
		forceGrants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_lease_force_grants_total", Help: "Leases the ownership leader moved from an unreachable owner (leader node only)."}),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rgit_git_sessions", Help: "Live git sessions (session actors) on this node, by kind."}, []string{"kind"}),
		rebalanceMoves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_rebalance_moves_total",
			Help: "Repositories the ownership leader moved toward their placement, by result: started, handed (the holder let go and the target was granted it), claimed (a claim placed it on the target first), abandoned (leader node only)."},
			[]string{"result"}),
		rebalanceScan: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rgit_rebalance_scan_seconds",
			Help:    "Time of each of the ownership leader's scans of the whole map for repositories to move, run off the leader actor: moves after a change of the live nodes start once it ends (leader node only).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
	}
	for _, k := range sessionKinds {
		m.sessions.WithLabelValues(string(k)) // exported as 0 before the first
	}
	for _, r := range moveResults {
		m.rebalanceMoves.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.openRepos, m.openLatency, m.fenced, m.leaseEnded, m.sessions, m.grants, m.renewals, m.forceGrants,
			m.unpersisted, m.rebalanceMoves, m.rebalanceScan)
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

// Session opens key for one session. A missing repository yields an
// error wrapping repo.ErrNotFound and creates nothing. In cluster mode the
// node must own the repository (it claims it if unowned); otherwise the
// error is a *NotOwnerError naming the owner.
func (n *Node) Session(ctx context.Context, key names.Repo) (*RepoSession, error) {
	return n.openSession(ctx, key, true)
}

// session opens key for a git session that Route just found served here:
// the lease is held, so the supervisor is asked at once; only a lease that
// ended since routes again.
func (n *Node) session(ctx context.Context, key names.Repo) (*RepoSession, error) {
	s, err := n.openSession(ctx, key, false)
	if errors.Is(err, errNotHeld) {
		return n.openSession(ctx, key, true)
	}
	return s, err
}

func (n *Node) openSession(ctx context.Context, key names.Repo, routed bool) (*RepoSession, error) {
	a, err := ask(ctx, n, key, &acquire{}, n.cfg.OpenTimeout, routed)
	if err != nil {
		return nil, err
	}
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
	r, err := askRepoActor(ctx, s.node, s.pid, &updateRefs{staged: staged, cmds: cmds, atomic: atomic, by: by(ctx)}, s.node.cfg.CallTimeout)
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

// SetVisibility makes key public or private through its repo actor
// (opening it if needed), so that an admin write never fences the serving
// node. Its webhook event names the identity in ctx as who made it.
func (n *Node) SetVisibility(ctx context.Context, key names.Repo, public bool) error {
	return n.writeRepo(ctx, key, &setVisibility{public: public, by: by(ctx)})
}

// SetHead points key's HEAD at target through its repo actor.
func (n *Node) SetHead(ctx context.Context, key names.Repo, target string) error {
	return n.writeRepo(ctx, key, &setHead{target: target})
}

// writeRepo sends a write answered by *written to key's repo actor.
func (n *Node) writeRepo(ctx context.Context, key names.Repo, msg repoRequest[*written]) error {
	r, err := askRepo(ctx, n, key, msg)
	if err != nil {
		return err
	}
	return r.err
}

// askRepo sends msg to key's repo actor (opening it, claiming it in
// cluster mode) and returns its answer.
func askRepo[R repoReply](ctx context.Context, n *Node, key names.Repo, msg repoRequest[R]) (R, error) {
	return ask(ctx, n, key, msg, n.cfg.CallTimeout, true)
}

// CloseRepo closes key's database if this node holds it open and waits
// until it is closed (delete-repo runs after it). In cluster mode the
// lease is released as well.
func (n *Node) CloseRepo(ctx context.Context, key names.Repo) error {
	_, err := ask(ctx, n, key, &closeRepo{}, n.cfg.OpenTimeout, false)
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

func (n *Node) listRepos(ctx context.Context, msg supervisorRequest[*openKeys]) ([]names.Repo, error) {
	r, err := askSupervisor(ctx, n, msg, 10*time.Second)
	if err != nil {
		return nil, err
	}
	keys := slices.Clone(r.keys)
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
		if _, err := ask(ctx, n, k, &closeRepo{shutdown: true}, n.cfg.OpenTimeout, false); err != nil &&
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

// errClosing: the request reached a repo actor already closing; the
// supervisor spawns a fresh one for the next.
var errClosing = fmt.Errorf("repository closing: %w", ErrBusy)

// ask has the supervisor deliver msg to key's repo actor, retrying when it
// reached an actor that was closing (the idle/eviction race) or already
// gone. In cluster mode a routed ask first makes sure this node owns key
// (claiming it if unowned); an unrouted one only reaches a repository
// already held (errNotHeld).
func ask[R repoReply](ctx context.Context, n *Node, key names.Repo, msg repoRequest[R], timeout time.Duration, routed bool) (R, error) {
	var zero R
	for attempt := 0; attempt < 5; attempt++ {
		if routed && n.cl != nil {
			if err := n.ensureLocal(ctx, key); err != nil {
				return zero, err
			}
		}
		r, err := askSupervisor(ctx, n, &deliver[R]{key: key, msg: msg}, timeout)
		switch {
		case err == nil:
			return r, nil
		case errors.Is(err, errNotHeld):
			if !routed {
				return zero, fmt.Errorf("repository %s: %w", key, errNotHeld)
			}
			// the lease ended between routing and now
		case errors.Is(err, actor.ErrDeadLetter), errors.Is(err, errClosing):
		default:
			return zero, err
		}
	}
	return zero, fmt.Errorf("repository %s: %w", key, ErrBusy)
}

// askSupervisor sends msg to the repos supervisor and waits for its
// answer R, the timeout or ctx; askTransport and askRepoActor do the same
// for the other mailboxes.
func askSupervisor[R any](ctx context.Context, n *Node, msg supervisorRequest[R], timeout time.Duration) (R, error) {
	return await[R](ctx, n, n.sup, msg, timeout)
}

func askTransport[R any](ctx context.Context, n *Node, msg transportRequest[R], timeout time.Duration) (R, error) {
	return await[R](ctx, n, n.transport, msg, timeout)
}

// askRepoActor asks the repo actor at pid directly (a session's, which
// holds it open), not through the supervisor.
func askRepoActor[R repoReply](ctx context.Context, n *Node, pid *actor.PID, msg repoRequest[R], timeout time.Duration) (R, error) {
	return await[R](ctx, n, pid, msg, timeout)
}

// await sends msg, typed by its caller (one of the ask functions, or
// askLeader), and waits for its answer R: the one place a request
// crosses protoactor's untyped future. A repo actor's refusals come back as errors: failed as
// its error, errRetry as errClosing, notHeld as errNotHeld.
func await[R any](ctx context.Context, n *Node, pid *actor.PID, msg any, timeout time.Duration) (R, error) {
	var zero R
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	if timeout <= 0 {
		return zero, context.DeadlineExceeded
	}
	if n.cfg.OnRoundTrip != nil {
		n.cfg.OnRoundTrip(ctx)
	}
	v, err := n.system.Root.RequestFuture(pid, msg, timeout).Result()
	if errors.Is(err, actor.ErrTimeout) {
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		return zero, ErrBusy
	}
	if err != nil {
		return zero, err
	}
	switch r := v.(type) {
	case R:
		return r, nil
	case *failed:
		return zero, r.err
	case *errRetry:
		return zero, errClosing
	case *notHeld:
		return zero, errNotHeld
	}
	return zero, fmt.Errorf("unexpected actor reply %T, want %T", v, zero)
}
