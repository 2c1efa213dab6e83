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
)

// OwnershipPrefix is the object-store prefix of the ownership map's refdb.
const OwnershipPrefix = "cluster/ownership"

// Sentinel errors of cluster mode.
var (
	// ErrLeaderUnreachable wraps transport failures of a cluster.LeaderService
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
// names this one is answered with the moved signal (transport/service/engine maps
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
	Self   string                // RGIT_SELF
	Leader cluster.LeaderService // nil on the leader itself (it uses its leader actor)
	// Live overrides the leader's own liveness tracking (nodes heard
	// within the TTL) as the placement candidates; nil uses the tracking.
	Live    func() cluster.LiveSet
	Timings cluster.Timings // zero: cluster.DefaultTimings()
	// Steer chooses the placement of cold repositories (leader only).
	Steer SteerMode
	// Weights are placement weights by node name (leader only); missing
	// nodes weigh 1, a non-positive weight keeps a node out of placement.
	Weights map[string]float64
	// Rebalance is how many warm repositories the leader moves toward
	// their placement at once (cluster.Rebalancer); 0 moves none, and a
	// joining node then gets only repositories claimed cold.
	Rebalance int
	// Joining starts the node joining: Route and force-grants claim
	// nothing until Serve is called (transport/node's traffic states: a fresh
	// map view and the start-up prewarm first); a request that needs a
	// claim meanwhile waits for it.
	Joining bool
	// OnGrant, if set, is called with each repository this node is
	// granted while it did not hold it (prewarm starts there). It runs in
	// the supervisor and must not block.
	OnGrant func(repo names.Repo)
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

// clusterState is a Node's cluster-mode state; nil in single-node mode.
type clusterState struct {
	cfg       ClusterConfig
	leader    cluster.LeaderService // who claims go to: cfg.Leader or the local service
	service   cluster.LeaderService // non-nil on the leader node
	leaderDB  *refdb.DB             // leader node: the map's writer handle (its view routes)
	leaderPID *actor.PID
	follower  atomic.Pointer[refdb.Follower]
	// leaderStale: on the leader node, since when its database's view
	// lags the leader's memory (Unix ns; 0: current), the store failing.
	leaderStale atomic.Int64
	draining    atomic.Bool
	// releases counts release calls in flight, so that a drain returns
	// (and the process may exit) only once they are sent.
	releases sync.WaitGroup
	// claiming holds the repositories with a claimToRelease in flight
	// (names.Repo → struct{}), so heartbeat answers that repeat a
	// release while it runs start no second one.
	claiming sync.Map
	// leaderLoops are the leader node's periodic loops (pruning,
	// rebalancing), waited for on close.
	leaderLoops sync.WaitGroup
	// serving is closed when the node stops joining (at once unless
	// cfg.Joining); renewedAt is the last renewal the leader answered
	// (unix nanoseconds).
	serving   chan struct{}
	serveOnce sync.Once
	renewedAt atomic.Int64

	// session is this incarnation's session with the leader (0: none yet;
	// cluster.NodeSession): every entry the node is granted is bound to it.
	// sessMu makes opening one a single flight: a second open would end
	// the first and every entry bound to it.
	sessMu  sync.Mutex
	session atomic.Uint64
	// serveMu guards serveLease, the node's bound on serving: the last
	// renewal or open of its session the leader acknowledged.
	serveMu    sync.Mutex
	serveLease cluster.ServeLease

	suspMu sync.Mutex
	susp   cluster.Suspicions

	// leases holds the lease of every repo actor the supervisor has as a
	// child (names.Repo → its epoch): the supervisor writes it as its
	// children change, and routing reads it without a round trip to the
	// supervisor's mailbox. A reader may see a lease that just ended; the
	// request then meets notHeld at the supervisor and routes again.
	leases sync.Map

	// waiting counts the requests waiting out an unreachable leader; the
	// supervisor probes the leader while it is not zero (probeLeader),
	// and they ask again once it answered (answeredBetween).
	waiting atomic.Int64
	// answers are the times of the leader's last two answers to this
	// node's session renewals (last, then the one before).
	answersMu sync.Mutex
	answers   [2]time.Time

	stop       chan struct{}
	followDone chan struct{}
}

func (c *clusterState) drain() time.Duration { return c.cfg.Timings.Drain }

// ensureSession returns the node's session, opening one first if it has
// none: a claim or force-grant must not reach the leader before, or the
// grant would bind to the previous incarnation's session, which the open
// then ends.
//
// A session whose ServeLease ended is dropped first and a new one opened:
// a grant bound to it would not be served (the leader may find it lapsed
// too, and then declines its renewals), while the open ends it at the
// leader, so its entries are free for the claims that follow.
func (c *clusterState) ensureSession(ctx context.Context) (uint64, error) {
	if id := c.session.Load(); id != 0 && c.serves(id, time.Now()) {
		return id, nil
	}
	c.sessMu.Lock()
	defer c.sessMu.Unlock()
	if id := c.session.Load(); id != 0 {
		if c.serves(id, time.Now()) {
			return id, nil
		}
		c.dropSession(id)
	}
	sent := time.Now()
	r, err := c.leader.Renew(ctx, cluster.RenewLeases{Node: c.cfg.Self, Open: true})
	if err != nil {
		return 0, fmt.Errorf("open session: %w", err)
	}
	if r.Session == 0 {
		return 0, fmt.Errorf("open session: leader answered no session: %w", ErrLeaderUnreachable)
	}
	c.session.Store(r.Session)
	c.acked(r.Session, sent)
	c.answered(time.Now())
	return r.Session, nil
}

// acked records that the leader acknowledged a renewal or open of
// session that this node sent at sent (cluster.ServeLease).
func (c *clusterState) acked(session uint64, sent time.Time) {
	c.serveMu.Lock()
	defer c.serveMu.Unlock()
	c.serveLease = c.serveLease.Acked(session, sent)
}

// serves reports whether the node may serve at now a repository held
// under session (cluster.ServeLease.Serves).
func (c *clusterState) serves(session uint64, now time.Time) bool {
	c.serveMu.Lock()
	defer c.serveMu.Unlock()
	return c.serveLease.Serves(session, now, c.cfg.Timings.TTL)
}

// answered records that the leader answered a renewal at t.
func (c *clusterState) answered(t time.Time) {
	c.renewedAt.Store(t.UnixNano())
	c.answersMu.Lock()
	defer c.answersMu.Unlock()
	c.answers = [2]time.Time{t, c.answers[0]}
}

// answeredBetween reports whether the leader answered a renewal after
// after and before before. An answer at before itself does not count:
// whether it was recorded before the caller looked would be the
// scheduler's choice, so it counts at the caller's next look.
func (c *clusterState) answeredBetween(after, before time.Time) bool {
	c.answersMu.Lock()
	defer c.answersMu.Unlock()
	for _, a := range c.answers {
		if a.After(after) && a.Before(before) {
			return true
		}
	}
	return false
}

// dropSession forgets session id after the leader declined it; the next
// claim or heartbeat opens a new one.
func (c *clusterState) dropSession(id uint64) { c.session.CompareAndSwap(id, 0) }

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
		c.leaderLoops.Go(func() { n.pruneLoop(c) })
		if cfg.Rebalance > 0 {
			c.leaderLoops.Go(func() { n.rebalanceLoop(c) })
		}
		return nil
	}
	if cfg.Leader == nil {
		return fmt.Errorf("cluster config: node %s is not the leader (%s) and has no leader client", cfg.Self, leaderName)
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
	// A pruning pass in flight asks the leader actor, which stops next:
	// it must have its answer first, or it waits out its timeout.
	c.leaderLoops.Wait()
	<-c.followDone
	if f := c.follower.Load(); f != nil {
		f.Close()
	}
}

// refView adapts a refdb view of the map to cluster.View. Undecodable
// entries read as absent: routing then claims and the leader, which
// refuses to load a corrupt map, decides.
// Entries come bound to their node's session (cluster.Bind); an
// undecodable session record reads as absent, which makes its entries
// lapsed.
type refView struct{ v *refdb.View }

func (r refView) Get(repo names.Repo) (cluster.Entry, bool) {
	if r.v == nil {
		return cluster.Entry{}, false
	}
	b, ok := r.v.Get(cluster.Key(repo))
	if !ok {
		return cluster.Entry{}, false
	}
	return r.decode(b)
}

func (r refView) decode(b []byte) (cluster.Entry, bool) {
	var e cluster.Entry
	if err := e.UnmarshalBinary(b); err != nil {
		return cluster.Entry{}, false
	}
	if e.Session == 0 {
		return e, true
	}
	var s cluster.NodeSession
	ok := false
	if key, err := cluster.SessionKey(e.Node); err == nil {
		if b, found := r.v.Get(key); found {
			ok = s.UnmarshalBinary(b) == nil
		}
	}
	return cluster.Bind(e, s, ok), true
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

// LeaderService returns the leader actor's cluster.LeaderService on the
// leader node (nil elsewhere); the peer server exposes it to other nodes.
func (n *Node) LeaderService() cluster.LeaderService {
	if n.cl == nil || n.cl.service == nil {
		return nil
	}
	return n.cl.service
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
// view is its writer's own, current unless its writes fail (viewFresh).
func (n *Node) MapAge(now time.Time) (age time.Duration, ok bool) {
	switch {
	case n.cl == nil:
		return 0, false
	case n.cl.leaderDB == nil && n.cl.follower.Load() == nil:
		return 0, false
	}
	return max(now.Sub(n.viewFresh(now)), 0), true
}

// viewFresh is when the node's view of the ownership map was last known
// current (cluster.Locate): now on the leader node unless the leader
// could not persist its decisions since (renewals acknowledged from
// memory), else when the store last confirmed the follower's view.
func (n *Node) viewFresh(now time.Time) time.Time {
	if n.cl.leaderDB != nil {
		if ns := n.cl.leaderStale.Load(); ns != 0 {
			return time.Unix(0, ns)
		}
		return now
	}
	if f := n.cl.follower.Load(); f != nil {
		return f.Fresh()
	}
	return now
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
	Repo names.Repo
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
		if e, ok := v.decode(b); ok {
			out = append(out, MapEntry{Repo: r, Entry: e})
		}
	}
	return out
}

// MapMark is a point in the node's map view for NewlyNamedHere.
type MapMark struct {
	v  refView
	at time.Time
}

// mapMark is the node's map view now.
func (n *Node) mapMark() MapMark {
	cur, _ := n.OwnershipView().(refView)
	return MapMark{v: cur, at: time.Now()}
}

// NewlyNamedHere lists the repositories whose live entry in this node's
// map view names it now (granted, steered or handed over to it) but did
// not at mark; the zero mark lists every one. It returns the mark for
// the next call. It decodes only the entries written since mark
// (mapChanges), so a node watching the map pays for its changes, not for
// its size.
func (n *Node) NewlyNamedHere(mark MapMark) ([]names.Repo, MapMark) {
	changed, next := n.mapChanges(mark)
	if n.cl == nil {
		return nil, next
	}
	self := n.cl.cfg.Self
	named := func(v refView, repo names.Repo, at time.Time) bool {
		e, ok := v.Get(repo)
		return ok && e.Node == self && e.Live(at)
	}
	var out []names.Repo
	for _, repo := range changed {
		if named(next.v, repo, next.at) && !named(mark.v, repo, mark.at) {
			out = append(out, repo)
		}
	}
	return out, next
}

// mapChanges lists the repositories whose entry in this node's map view
// changed since mark (added, changed or removed; the zero mark: every
// one), and returns the view now as the next mark. It costs what
// changed (refdb.Diff), not the map's size.
func (n *Node) mapChanges(mark MapMark) ([]names.Repo, MapMark) {
	next := n.mapMark()
	return n.changedBetween(mark, next), next
}

// changedBetween lists the repositories whose entry differs between the
// views of two marks.
func (n *Node) changedBetween(from, to MapMark) []names.Repo {
	if n.cl == nil || to.v.v == nil {
		return nil
	}
	var out []names.Repo
	for k := range refdb.Diff(from.v.v, to.v.v, cluster.KeyPrefix) {
		if repo, err := cluster.RepoOfKey(k); err == nil {
			out = append(out, repo)
		}
	}
	return out
}
