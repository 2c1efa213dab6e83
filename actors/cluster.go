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
	draining  atomic.Bool
	// releases counts release calls in flight, so that a drain returns
	// (and the process may exit) only once they are sent.
	releases sync.WaitGroup

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
	c := &clusterState{cfg: cfg, susp: make(cluster.Suspicions), stop: make(chan struct{}), followDone: make(chan struct{})}
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

// LeaderService returns the leader actor's cluster.LeaderService on the
// leader node (nil elsewhere); the peer server exposes it to other nodes.
func (n *Node) LeaderService() cluster.LeaderService {
	if n.cl == nil || n.cl.service == nil {
		return nil
	}
	return n.cl.service
}
