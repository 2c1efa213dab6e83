package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
)

// OwnershipPrefix is the object-store prefix of the ownership map's refdb.
const OwnershipPrefix = "cluster/ownership"

// LeaderClient is how a node talks to the ownership-map leader. The leader
// node uses the local implementation; other nodes use the peer client.
type LeaderClient interface {
	Claim(ctx context.Context, repo, node string) (cluster.Decision, error)
	Renew(ctx context.Context, node string, repos []string) (renewed, declined []string, err error)
	Release(ctx context.Context, node, repo string) (cluster.Decision, error)
	ForceGrant(ctx context.Context, repo, requester, deadNode string) (cluster.Decision, error)
}

// Sentinel errors of cluster mode.
var (
	// ErrLeaderUnreachable wraps transport failures of a LeaderClient
	// (and a leader that cannot persist): claims then answer 503.
	ErrLeaderUnreachable = errors.New("ownership leader unreachable")
	// ErrNotOwner: Session or Do reached a node that does not own the
	// repository; the *NotOwnerError names the owner to forward to.
	ErrNotOwner = errors.New("repository owned by another node")
	// ErrDraining: the node is draining and takes no new repositories (503).
	ErrDraining = errors.New("node draining")
	// ErrOwnerUnreachable: the owner could not be reached and the repository
	// was not moved (non-GET request, or the force-grant was refused).
	ErrOwnerUnreachable = errors.New("repository owner unreachable")
)

// MovedError: this node does not hold Repo and will not take it because
// it is draining. A request forwarded here by a node whose view still
// names this one is answered with the moved signal (transport/engine maps
// it to gitserve.ErrMoved), and the forwarder routes again with Moved. It
// wraps ErrDraining (a 503 where nothing can route again).
type MovedError struct {
	Repo string
	Node string // this node
}

func (e *MovedError) Error() string {
	return "repository " + e.Repo + " is not held by draining node " + e.Node
}

// Unwrap makes errors.Is(err, ErrDraining) true.
func (e *MovedError) Unwrap() error { return ErrDraining }

// NotOwnerError names the node that owns Repo.
type NotOwnerError struct {
	Repo string
	Node string
}

func (e *NotOwnerError) Error() string { return "repository " + e.Repo + " is owned by " + e.Node }

// Unwrap makes errors.Is(err, ErrNotOwner) true.
func (e *NotOwnerError) Unwrap() error { return ErrNotOwner }

// ClusterConfig turns a Node into a cluster member.
type ClusterConfig struct {
	Self   string       // RGIT_SELF
	Leader LeaderClient // nil on the leader itself (it uses its leader actor)
	// Live overrides the leader's own liveness tracking (nodes heard
	// within the TTL) as the placement candidates; nil uses the tracking.
	Live    func() cluster.LiveSet
	Timings cluster.Timings // zero: cluster.DefaultTimings()
	// Steer chooses the placement of cold repositories (leader only).
	Steer SteerMode
	// Weights are placement weights by node name (leader only); missing
	// nodes weigh 1, a non-positive weight keeps a node out of placement.
	Weights map[string]float64
	// Joining starts the node joining: Route and force-grants claim
	// nothing until Serve is called (cmd/serve's traffic states: a fresh
	// map view and the start-up prewarm first); a request that needs a
	// claim meanwhile waits for it.
	Joining bool
	// OnGrant, if set, is called with each repository this node is
	// granted while it did not hold it (prewarm starts there). It runs in
	// the supervisor and must not block.
	OnGrant func(repo string)
}

// SteerMode chooses where the leader grants a cold repository.
type SteerMode uint8

const (
	// SteerDefault is SteerOn: the measured rolling-restart cache hit rate
	// is far higher with steering (see package cluster's doc).
	SteerDefault SteerMode = iota
	// SteerOn grants a cold repository to the rendezvous winner among the
	// live nodes; the requester forwards there.
	SteerOn
	// SteerOff grants a cold repository to the node that asked.
	SteerOff
)

// steers reports whether m steers.
func (m SteerMode) steers() bool { return m != SteerOff }

// RouteResult says where a request for a repository goes.
type RouteResult struct {
	Local bool
	Node  string // owner when !Local
}

// clusterState is a Node's cluster-mode state; nil in single-node mode.
type clusterState struct {
	cfg       ClusterConfig
	leader    LeaderClient // who claims go to: cfg.Leader or the local service
	service   LeaderClient // non-nil on the leader node
	leaderDB  *refdb.DB    // leader node: the map's writer handle (its view routes)
	leaderPID *actor.PID
	follower  atomic.Pointer[refdb.Follower]
	draining  atomic.Bool
	// serving is closed when the node stops joining (at once unless
	// cfg.Joining); renewedAt is the last renewal the leader answered
	// (unix nanoseconds).
	serving   chan struct{}
	serveOnce sync.Once
	renewedAt atomic.Int64

	suspMu sync.Mutex
	susp   cluster.Suspicions

	stop       chan struct{}
	followDone chan struct{}
}

func (c *clusterState) drain() time.Duration { return c.cfg.Timings.Drain }

// startCluster validates cfg and starts the leader actor (on the leader
// node) or the follower of the map (elsewhere).
func (n *Node) startCluster(cfg ClusterConfig) error {
	if cfg.Timings == (cluster.Timings{}) {
		cfg.Timings = cluster.DefaultTimings()
	}
	leaderName, err := cluster.LeaderOf(cfg.Self)
	if err != nil {
		return fmt.Errorf("cluster config: %w", err)
	}
	c := &clusterState{cfg: cfg, susp: make(cluster.Suspicions), stop: make(chan struct{}), followDone: make(chan struct{}),
		serving: make(chan struct{})}
	if !cfg.Joining {
		close(c.serving)
	}
	n.cl = c
	if leaderName == cfg.Self {
		close(c.followDone)
		svc, db, err := n.startLeader(cfg)
		if err != nil {
			return err
		}
		c.service, c.leader, c.leaderDB, c.leaderPID = svc, svc, db, svc.pid
		go n.pruneLoop(c)
		return nil
	}
	if cfg.Leader == nil {
		return fmt.Errorf("cluster config: node %s is not the leader (%s) and has no LeaderClient", cfg.Self, leaderName)
	}
	c.leader = cfg.Leader
	go n.follow()
	return nil
}

// follow opens the map read-only, retrying until the leader has created
// it; the follower then polls on its own.
func (n *Node) follow() {
	c := n.cl
	defer close(c.followDone)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.OpenTimeout)
		f, err := refdb.OpenFollower(ctx, n.cfg.Deps.Store, OwnershipPrefix,
			refdb.Options{PollInterval: cluster.FollowerPoll, Logger: n.log})
		cancel()
		if err == nil {
			c.follower.Store(f)
			return
		}
		if !errors.Is(err, refdb.ErrNotExist) {
			n.log.Warn("open ownership map follower", zap.Error(err))
		}
		t := time.NewTimer(cluster.FollowerPoll)
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// stopped reports whether close was called (the node is shutting down).
func (c *clusterState) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

func (c *clusterState) close() {
	close(c.stop)
	<-c.followDone
	if f := c.follower.Load(); f != nil {
		f.Close()
	}
}

// refView adapts a refdb view of the map to cluster.View. Undecodable
// entries read as absent: routing then claims and the leader, which
// refuses to load a corrupt map, decides.
type refView struct{ v *refdb.View }

func (r refView) Get(repo string) (cluster.Entry, bool) {
	if r.v == nil {
		return cluster.Entry{}, false
	}
	key, err := cluster.Key(repo)
	if err != nil {
		return cluster.Entry{}, false
	}
	b, ok := r.v.Get(key)
	if !ok {
		return cluster.Entry{}, false
	}
	var e cluster.Entry
	if err := e.UnmarshalBinary(b); err != nil {
		return cluster.Entry{}, false
	}
	return e, true
}

// OwnershipView returns the node's current (possibly stale, ≤200 ms) view.
// In single-node mode it is empty.
func (n *Node) OwnershipView() cluster.View {
	switch {
	case n.cl == nil:
		return refView{}
	case n.cl.leaderDB != nil:
		return refView{n.cl.leaderDB.View()}
	}
	if f := n.cl.follower.Load(); f != nil {
		return refView{f.View()}
	}
	return refView{}
}

// LeaderService returns the leader's LeaderClient implementation on the
// leader node (nil elsewhere); the peer server exposes it to other nodes.
func (n *Node) LeaderService() LeaderClient {
	if n.cl == nil || n.cl.service == nil {
		return nil
	}
	return n.cl.service
}

// Route is one local map read: serve here, forward to another node, or
// claim (one round trip to the leader) and then serve or forward. Errors
// wrapping ErrLeaderUnreachable or ErrDraining mean 503. In single-node
// mode every repository is local.
func (n *Node) Route(ctx context.Context, owner, name string) (RouteResult, error) {
	if n.cl == nil {
		return RouteResult{Local: true}, nil
	}
	if err := names.Validate(owner, name); err != nil {
		return RouteResult{}, err
	}
	key := keyOf(owner, name)
	l, err := n.leaseOf(ctx, key)
	if err != nil {
		return RouteResult{}, err
	}
	view := n.OwnershipView()
	if r, decided := routeHeld(view, string(key), n.cl.cfg.Self, l); decided {
		return r, nil
	}
	d := cluster.Route(view, string(key), n.cl.cfg.Self, time.Now())
	if d.Kind == cluster.Forward {
		return RouteResult{Node: d.Node}, nil
	}
	// Claim, or Serve from a map naming this node without a local lease
	// (steered here, or this process restarted): the leader grants or
	// extends it, and only then is the database opened.
	if n.cl.draining.Load() {
		// The leader may name this node for a repository it does not hold
		// (steered here as the drain began; this node's view may not show
		// it yet): release it, which shortens such an entry to the drain
		// so that the forwarder getting the moved answer can claim it
		// within Moved's wait, and takes this node out of placement. The
		// leader refuses a release of an entry naming another node, so
		// the call is harmless otherwise.
		n.releaseUnheld(ctx, key)
		return RouteResult{}, &MovedError{Repo: string(key), Node: n.cl.cfg.Self}
	}
	if err := n.awaitServing(ctx); err != nil {
		return RouteResult{}, fmt.Errorf("claim %s: %w", key, err)
	}
	// Claim only repositories that exist, so requests for made-up names
	// cannot grow the ownership map. It costs cold repositories one list.
	if ok, err := repo.Exists(ctx, n.cfg.Deps, owner, name); err != nil {
		return RouteResult{}, fmt.Errorf("route %s: %w", key, err)
	} else if !ok {
		return RouteResult{}, fmt.Errorf("route %s: %w", key, repo.ErrNotFound)
	}
	dec, err := n.awaitLeader(ctx, key, true, func() (cluster.Decision, error) {
		return n.cl.leader.Claim(ctx, string(key), n.cl.cfg.Self)
	})
	if err != nil {
		return RouteResult{}, fmt.Errorf("claim %s: %w", key, unreachable(err))
	}
	return n.apply(ctx, key, dec)
}

// awaitLeader runs ask (a claim or force-grant of key) and waits out an
// unreachable leader as cluster.OnLeaderUnreachable decides: ask again
// every LeaderRetry up to Timings.LeaderWait (a leader restart, with the
// client's connection kept), or, for a claim whose view now names a live
// owner, serve under that grant without the leader's confirmation (this
// node) or forward (another). Other errors, and the last unreachable one,
// are returned.
func (n *Node) awaitLeader(ctx context.Context, key repoKey, claim bool, ask func() (cluster.Decision, error)) (cluster.Decision, error) {
	since := time.Now()
	for try := 0; ; try++ {
		d, err := ask()
		if err == nil || !errors.Is(err, ErrLeaderUnreachable) {
			return d, err
		}
		if f := n.cl.follower.Load(); f != nil && try == 0 {
			// A leader that drained wrote its hand-over just before it
			// went: read it now rather than at the next poll.
			if err := f.Refresh(ctx); err != nil {
				n.log.Warn("re-read ownership map", zap.Error(err))
			}
		}
		e, ok := n.OwnershipView().Get(string(key))
		a := cluster.OnLeaderUnreachable(e, ok, claim, n.cl.cfg.Self, since, time.Now(), n.cl.cfg.Timings.LeaderWait)
		switch a.Kind {
		case cluster.AbsenceAdopt:
			n.log.Info("ownership leader unreachable; serving under the grant the map names",
				zap.String("repo", string(key)), zap.Uint64("epoch", e.Epoch), zap.Error(err))
			return cluster.Decision{Outcome: cluster.Granted, Repo: string(key), Owner: n.cl.cfg.Self, Entry: e}, nil
		case cluster.AbsenceForward:
			return cluster.Decision{Outcome: cluster.Refused, Reason: cluster.ReasonOwned, Repo: string(key), Owner: a.Node, Entry: e}, nil
		case cluster.AbsenceGiveUp:
			return d, err
		}
		if err := sleepUntil(ctx, a.At); err != nil {
			return cluster.Decision{}, err
		}
	}
}

// releaseUnheld tells the leader to shorten this node's entry for key.
// Best effort: if it fails the entry lapses at its TTL and forwarders that
// wait for it give up with a 503, as without the release.
func (n *Node) releaseUnheld(ctx context.Context, key repoKey) {
	ctx, cancel := context.WithTimeout(ctx, cluster.RenewEvery)
	defer cancel()
	if _, err := n.cl.leader.Release(ctx, n.cl.cfg.Self, string(key)); err != nil {
		n.log.Warn("release unheld lease while draining", zap.String("repo", string(key)), zap.Error(err))
	}
}

// Moved is called by a forwarder whose request for owner/name was
// answered by node with the moved signal: node does not hold the
// repository (it drained) although this node's view named it. Moved
// re-reads the map and waits, up to Drain plus a follower poll, for an
// entry still naming node to expire (the drained node's release shortened
// it to the drain), then routes again: usually a claim, which the leader
// now grants here or steers elsewhere. Nothing was written for the
// request, so the caller may send it wherever this says.
func (n *Node) Moved(ctx context.Context, owner, name, node string) (RouteResult, error) {
	if n.cl == nil {
		return RouteResult{Local: true}, nil
	}
	if err := names.Validate(owner, name); err != nil {
		return RouteResult{}, err
	}
	key := keyOf(owner, name)
	deadline := time.Now().Add(n.cl.cfg.Timings.Drain + cluster.FollowerPoll)
	for {
		if f := n.cl.follower.Load(); f != nil {
			if err := f.Refresh(ctx); err != nil {
				n.log.Warn("re-read ownership map", zap.Error(err))
			}
		}
		e, ok := n.OwnershipView().Get(string(key))
		now := time.Now()
		step := movedStep(e, ok, node, now, deadline)
		if step.giveUp {
			return RouteResult{}, fmt.Errorf("%s released %s but the map names it until %s: %w",
				node, key, e.Expires.UTC().Format(time.RFC3339Nano), ErrOwnerUnreachable)
		}
		if !step.until.IsZero() {
			if err := sleepUntil(ctx, step.until); err != nil {
				return RouteResult{}, err
			}
			continue
		}
		r, err := n.Route(ctx, owner, name)
		if err != nil || r.Local || r.Node != node {
			return r, err
		}
		// The leader still names node (its clock is behind this one's):
		// try again after a poll, within the deadline.
		if now.Add(cluster.FollowerPoll).After(deadline) {
			return RouteResult{}, fmt.Errorf("%s released %s but the leader still names it: %w", node, key, ErrOwnerUnreachable)
		}
		if err := sleepUntil(ctx, now.Add(cluster.FollowerPoll)); err != nil {
			return RouteResult{}, err
		}
	}
}

// movedDecision is movedStep's answer: route now (zero value), wait until
// a time, or give up.
type movedDecision struct {
	until  time.Time
	giveUp bool
}

// movedStep decides Moved's next step from the view's entry for the
// repository: an entry that no longer names the node that answered moved
// (or has expired) routes now; one that still names it live is waited
// out if it expires by deadline, else the wait would be too long (the
// release was lost: the entry lapses only at its TTL) and Moved gives up.
func movedStep(e cluster.Entry, ok bool, node string, now, deadline time.Time) movedDecision {
	if !ok || e.Node != node || !e.Live(now) {
		return movedDecision{}
	}
	if e.Expires.After(deadline) {
		return movedDecision{giveUp: true}
	}
	return movedDecision{until: e.Expires}
}

// routeHeld decides for a repository this node holds a lease on: serve
// unless the view shows a newer epoch granted to another node (the lease
// was moved away; the renewal will be declined). A view that lags the
// grant, or an entry that expired while the leader was unreachable, still
// serves: a node keeps serving what it holds and fencing is the safety net.
func routeHeld(view cluster.View, repo, self string, l leaseInfo) (RouteResult, bool) {
	if !l.held {
		return RouteResult{}, false
	}
	e, ok := view.Get(repo)
	if ok && e.Epoch > l.epoch && e.Node != self {
		return RouteResult{}, false
	}
	return RouteResult{Local: true}, true
}

// apply acts on the leader's answer to this node's claim or force-grant:
// the claim's holder steps from Claiming and its action is carried out
// here (open the database: spawn the repo actor, which owns the lease from
// then on; forward; or answer 503).
func (n *Node) apply(ctx context.Context, key repoKey, d cluster.Decision) (RouteResult, error) {
	h, acts := cluster.Step(cluster.NewHolder(n.cl.drain()), cluster.EventOf(d, n.cl.cfg.Self), time.Now())
	for _, act := range acts {
		switch act.Kind {
		case cluster.OpenDB:
			if _, err := n.request(ctx, n.sup, &granted{key: key, epoch: d.Entry.Epoch, holder: h}, 10*time.Second); err != nil {
				return RouteResult{}, fmt.Errorf("record lease on %s: %w", key, err)
			}
			return RouteResult{Local: true}, nil
		case cluster.ForwardTo:
			return RouteResult{Node: act.Node}, nil
		}
	}
	return RouteResult{}, fmt.Errorf("claim %s: %s without an owner: %w", key, d.Outcome, ErrLeaderUnreachable)
}

func unreachable(err error) error {
	if errors.Is(err, ErrLeaderUnreachable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrLeaderUnreachable, err)
}

// ConnectFailed is called by a forwarder that could not connect to node
// for owner/name, having consumed nothing of the request (method names
// it, for the log). It applies cluster.OnConnectFailure: the first failure
// waits ForceGrantWait, re-reads the map and routes again; a second one
// asks the leader to force the repository over (waiting out the quiet
// period once).
func (n *Node) ConnectFailed(ctx context.Context, owner, name, node, method string) (RouteResult, error) {
	if n.cl == nil {
		return RouteResult{Local: true}, nil
	}
	if err := names.Validate(owner, name); err != nil {
		return RouteResult{}, err
	}
	key := keyOf(owner, name)
	n.cl.suspMu.Lock()
	d := cluster.OnConnectFailure(n.cl.susp, string(key), node, time.Now())
	n.cl.suspMu.Unlock()
	n.log.Info("cannot connect to repository owner", zap.String("repo", string(key)), zap.String("owner", node),
		zap.String("method", method), zap.Stringer("failover", d))
	switch d.Kind {
	case cluster.Reread:
		if err := sleepUntil(ctx, d.At); err != nil {
			return RouteResult{}, err
		}
		if f := n.cl.follower.Load(); f != nil {
			if err := f.Refresh(ctx); err != nil {
				n.log.Warn("re-read ownership map", zap.Error(err))
			}
		}
		return n.Route(ctx, owner, name)
	}
	return n.force(ctx, key, d.Dead)
}

// ConnectSucceeded is called by a forwarder that connected to node for
// owner/name after an earlier connect failure: a suspicion of node for
// the repository ends (cluster.OnConnectSuccess), so that failure never
// counts as the first of two that move it.
func (n *Node) ConnectSucceeded(owner, name, node string) {
	if n.cl == nil {
		return
	}
	key := string(keyOf(owner, name))
	n.cl.suspMu.Lock()
	defer n.cl.suspMu.Unlock()
	if s, ok := n.cl.susp[key]; ok && s.Owner == node {
		cluster.OnConnectSuccess(n.cl.susp, key)
	}
}

// force asks the leader to move key from dead to this node.
func (n *Node) force(ctx context.Context, key repoKey, dead string) (RouteResult, error) {
	if n.cl.draining.Load() {
		return RouteResult{}, fmt.Errorf("force-grant %s: %w", key, ErrDraining)
	}
	if err := n.awaitServing(ctx); err != nil {
		return RouteResult{}, fmt.Errorf("force-grant %s: %w", key, err)
	}
	for attempt := 0; ; attempt++ {
		d, err := n.awaitLeader(ctx, key, false, func() (cluster.Decision, error) {
			return n.cl.leader.ForceGrant(ctx, string(key), n.cl.cfg.Self, dead)
		})
		if err != nil {
			return RouteResult{}, fmt.Errorf("force-grant %s: %w", key, unreachable(err))
		}
		if d.Reason != cluster.ReasonQuiet {
			return n.apply(ctx, key, d)
		}
		if attempt > 0 {
			return RouteResult{}, fmt.Errorf("force-grant %s from %s: still in the quiet period: %w", key, dead, ErrOwnerUnreachable)
		}
		// The dead owner renewed just before dying: wait out the quiet
		// period once rather than waiting for the TTL.
		if err := sleepUntil(ctx, d.Entry.Written.Add(n.cl.cfg.Timings.QuietPeriod)); err != nil {
			return RouteResult{}, err
		}
	}
}

// Drain marks the node draining (Route no longer claims) and releases
// every lease through the drain, then waits until the databases are
// closed. Requests keep being served during the drain. On the leader node
// the released repositories are then handed over to live nodes.
func (n *Node) Drain(ctx context.Context) error {
	if n.cl == nil {
		return nil
	}
	n.cl.draining.Store(true)
	v, err := n.request(ctx, n.sup, &drainAll{}, 10*time.Second)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	w := v.(*drainWait)
	select {
	case <-w.done:
	case <-ctx.Done():
		return fmt.Errorf("drain: %w", ctx.Err())
	}
	// Entries naming this node that it never opened (steered or handed
	// over to it) would send requests here, or after the stop into a
	// failover, until they lapse at their TTL.
	released := make(map[string]bool, len(w.released))
	repos := make([]string, 0, len(w.released))
	for _, k := range w.released {
		released[string(k)] = true
		repos = append(repos, string(k))
	}
	unheld := n.namedHere(released)
	if l, ok := n.cl.service.(*localLeader); ok {
		// The leader node hands its repositories over before it goes; it
		// keeps answering claims until its listeners close.
		if repos = append(repos, unheld...); len(repos) > 0 {
			l.handOver(ctx, repos)
		}
		return nil
	}
	for _, r := range unheld {
		n.releaseUnheld(ctx, repoKey(r))
	}
	return nil
}

// namedHere lists the repositories whose live entry in this node's view
// names it, except those in skip.
func (n *Node) namedHere(skip map[string]bool) []string {
	now := time.Now()
	var out []string
	for _, e := range n.MapEntries() {
		if !skip[e.Repo] && e.Node == n.cl.cfg.Self && e.Live(now) {
			out = append(out, e.Repo)
		}
	}
	return out
}

// Serve ends the joining state (ClusterConfig.Joining): the node claims
// from now on. Further calls do nothing.
func (n *Node) Serve() {
	if n.cl != nil {
		n.cl.serveOnce.Do(func() {
			close(n.cl.serving)
			// The first heartbeat now rather than at the next period:
			// placement (and the rollout gate) hear of the node at once.
			n.system.Root.Send(n.sup, &renewNow{})
		})
	}
}

// joining reports whether the node is still joining (Serve not called).
func (c *clusterState) joining() bool {
	select {
	case <-c.serving:
		return false
	default:
		return true
	}
}

// awaitServing holds a claim while the node is joining.
func (n *Node) awaitServing(ctx context.Context) error {
	if !n.cl.joining() {
		return nil
	}
	select {
	case <-n.cl.serving:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("node joining: %w", ctx.Err())
	}
}

// MapAge is how old the node's view of the ownership map is at now: how
// long since the store last confirmed it. ok is false while the node has
// no view (a follower not opened yet, or a single node). The leader's
// view is its writer's own, current by construction.
func (n *Node) MapAge(now time.Time) (age time.Duration, ok bool) {
	switch {
	case n.cl == nil:
		return 0, false
	case n.cl.leaderDB != nil:
		return 0, true
	}
	f := n.cl.follower.Load()
	if f == nil {
		return 0, false
	}
	return max(now.Sub(f.Fresh()), 0), true
}

// LeaderReachable reports whether the ownership leader answered this
// node lately: on the leader node, always; elsewhere, a renewal answered
// within two renewal periods.
func (n *Node) LeaderReachable(now time.Time) bool {
	switch {
	case n.cl == nil:
		return false
	case n.cl.service != nil:
		return true
	}
	at := n.cl.renewedAt.Load()
	return at != 0 && now.Sub(time.Unix(0, at)) <= 2*cluster.RenewEvery
}

// MapEntry is one repository's entry in the ownership map.
type MapEntry struct {
	Repo string
	cluster.Entry
}

// MapEntries lists the entries of this node's map view (none without a
// view); undecodable entries are skipped.
func (n *Node) MapEntries() []MapEntry {
	v, ok := n.OwnershipView().(refView)
	if !ok || v.v == nil {
		return nil
	}
	var out []MapEntry
	for k, b := range v.v.Scan(cluster.KeyPrefix) {
		r, err := cluster.RepoOfKey(k)
		if err != nil {
			continue
		}
		var e cluster.Entry
		if e.UnmarshalBinary(b) == nil {
			out = append(out, MapEntry{Repo: r, Entry: e})
		}
	}
	return out
}

// NamedHere lists the repositories whose live entry in this node's map
// view names it (granted, steered or handed over to it).
func (n *Node) NamedHere() []string {
	if n.cl == nil {
		return nil
	}
	return n.namedHere(nil)
}

// Draining reports whether Drain was called (/ready fails).
func (n *Node) Draining() bool { return n.cl != nil && n.cl.draining.Load() }

// leaseOf asks the supervisor about this node's lease on key.
func (n *Node) leaseOf(ctx context.Context, key repoKey) (leaseInfo, error) {
	v, err := n.request(ctx, n.sup, &leaseQuery{key: key}, 10*time.Second)
	if err != nil {
		return leaseInfo{}, fmt.Errorf("lease of %s: %w", key, err)
	}
	return *v.(*leaseInfo), nil
}

// ensureLocal routes key and reports a *NotOwnerError when another node
// owns it.
func (n *Node) ensureLocal(ctx context.Context, key repoKey) error {
	owner, name := key.split()
	r, err := n.Route(ctx, owner, name)
	if err != nil {
		return err
	}
	if !r.Local {
		return &NotOwnerError{Repo: string(key), Node: r.Node}
	}
	return nil
}

func sleepUntil(ctx context.Context, at time.Time) error {
	d := time.Until(at)
	if d <= 0 {
		return nil
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
