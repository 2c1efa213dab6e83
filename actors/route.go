package actors

// Routing: where a request for a repository goes (serve here, forward to
// the owner, or claim from the leader first), decided by cluster.Locate on
// the node's view of the ownership map and the leases its repo actors hold.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/repo"
)

// Route says where a request for a repository goes.
type Route struct {
	Local bool
	Node  string // owner when !Local
}

// Route is one local map read: serve here, forward to another node, or
// claim (one round trip to the leader) and then serve or forward. Errors
// wrapping ErrLeaderUnreachable or ErrDraining mean 503. In single-node
// mode every repository is local.
func (n *Node) Route(ctx context.Context, key names.Repo) (Route, error) {
	if n.cl == nil {
		return Route{Local: true}, nil
	}
	return n.route(ctx, key)
}

func (n *Node) route(ctx context.Context, key names.Repo) (Route, error) {
	l := n.leaseOf(key)
	view := n.OwnershipView()
	if r, decided := routeHeld(view, key, n.cl.cfg.Self, l); decided {
		return r, nil
	}
	now := time.Now()
	d := cluster.Locate(view, key, n.cl.cfg.Self, now, n.viewFresh(now))
	if d.Kind == cluster.Forward {
		return Route{Node: d.Node}, nil
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
		_ = n.releaseUnheld(ctx, key)
		return Route{}, &MovedError{Repo: key.String(), Node: n.cl.cfg.Self}
	}
	if err := n.awaitServing(ctx); err != nil {
		return Route{}, fmt.Errorf("claim %s: %w", key, err)
	}
	// Claim only repositories that exist, so requests for made-up names
	// cannot grow the ownership map. It costs cold repositories one list.
	if ok, err := repo.Exists(ctx, n.cfg.Deps, key); err != nil {
		if node, fwd := cluster.OnClaimStoreDown(view, key, n.cl.cfg.Self); fwd && errors.Is(err, objstore.ErrUnavailable) {
			return Route{Node: node}, nil
		}
		return Route{}, fmt.Errorf("route %s: %w", key, err)
	} else if !ok {
		return Route{}, fmt.Errorf("route %s: %w", key, repo.ErrNotFound)
	}
	dec, err := n.awaitLeader(ctx, key, true, func() (cluster.Decision, error) {
		if _, err := n.cl.ensureSession(ctx); err != nil {
			return cluster.Decision{}, err
		}
		return n.cl.leader.Claim(ctx, cluster.ClaimLease{Repo: key, Node: n.cl.cfg.Self})
	})
	if err != nil {
		return Route{}, fmt.Errorf("claim %s: %w", key, unreachable(err))
	}
	return n.apply(ctx, key, dec)
}

// awaitLeader runs ask (a claim or force-grant of key) and waits out an
// unreachable leader as cluster.OnLeaderUnreachable decides: look every
// LeaderRetry, and ask again once the leader has answered the node's
// heartbeat (which the supervisor sends every LeaderRetry while requests
// wait: one probe per node, however many wait, and they hold a timer and
// their connection), up to Timings.LeaderWait (a leader restart, with the
// client's connection kept); or, for a claim whose view now names a live
// owner, serve under that grant without the leader's confirmation (this
// node, while its ServeLease covers the entry's session) or forward
// (another). Other errors, and the last unreachable one,
// are returned.
func (n *Node) awaitLeader(ctx context.Context, key names.Repo, claim bool, ask func() (cluster.Decision, error)) (cluster.Decision, error) {
	since := time.Now()
	for try := 0; ; try++ {
		asked := time.Now()
		d, err := ask()
		if err == nil || !errors.Is(err, ErrLeaderUnreachable) {
			return d, err
		}
		if try == 0 {
			// A leader that drained wrote its hand-over just before it
			// went: read it now rather than at the next poll.
			n.RefreshView(ctx)
		}
		for again := false; !again; {
			e, ok := n.OwnershipView().Get(key)
			now := time.Now()
			a := cluster.OnLeaderUnreachable(e, ok, claim, n.cl.cfg.Self, n.cl.serves(e.Session, now), since, now,
				n.cl.cfg.Timings.LeaderWait, n.cl.answeredBetween(asked, now))
			switch a.Kind {
			case cluster.AbsenceAdopt:
				n.log.Info("ownership leader unreachable; serving under the grant the map names",
					zap.Stringer("repo", key), zap.Uint64("epoch", e.Epoch), zap.Error(err))
				return cluster.Decision{Outcome: cluster.Granted, Repo: key, Owner: n.cl.cfg.Self, Entry: e}, nil
			case cluster.AbsenceForward:
				return cluster.Decision{Outcome: cluster.Refused, Reason: cluster.ReasonOwned, Repo: key, Owner: a.Node, Entry: e}, nil
			case cluster.AbsenceGiveUp:
				return d, err
			case cluster.AbsenceRetry:
				again = true
			case cluster.AbsenceWait:
				if err := n.waitLeader(ctx, a.At); err != nil {
					return cluster.Decision{}, err
				}
			}
		}
	}
}

// waitLeader sleeps until at, counted among the requests waiting for the
// leader, which keeps the supervisor probing it (probeLeader).
func (n *Node) waitLeader(ctx context.Context, at time.Time) error {
	if n.cl.waiting.Add(1) == 1 {
		n.system.Root.Send(n.sup, &probeLeader{})
	}
	defer n.cl.waiting.Add(-1)
	return sleepUntil(ctx, at)
}

// releaseUnheld tells the leader to shorten this node's entry for key.
// Best effort: if it fails the entry lapses at its TTL and forwarders that
// wait for it give up with a 503, as without the release.
func (n *Node) releaseUnheld(ctx context.Context, key names.Repo) error {
	ctx, cancel := context.WithTimeout(ctx, cluster.RenewEvery)
	defer cancel()
	_, err := n.cl.leader.Release(ctx, cluster.ReleaseLease{Node: n.cl.cfg.Self, Repo: key})
	if err != nil {
		n.log.Warn("release unheld lease while draining", zap.Stringer("repo", key), zap.Error(err))
	}
	return err
}

// OwnedElsewhere reports whether the node's map view names another node
// as key's owner, so that a request for it would be forwarded: a hint for
// work started ahead of an open (repo.ListAhead). Always false on a
// single node.
func (n *Node) OwnedElsewhere(key names.Repo) bool {
	if n.cl == nil {
		return false
	}
	now := time.Now()
	return cluster.Locate(n.OwnershipView(), key, n.cl.cfg.Self, now, n.viewFresh(now)).Kind == cluster.Forward
}

// routeHeld decides for a repository this node holds a lease on: serve
// unless the view shows a newer epoch granted to another node (the lease
// was moved away; the renewal will be declined). A view that lags the
// grant, or an entry that expired while the leader was unreachable, still
// routes here: the repo actor serves only while the node's ServeLease
// covers the lease (ready), and routes the request again otherwise.
func routeHeld(view cluster.View, repo names.Repo, self string, l leaseInfo) (Route, bool) {
	if !l.held {
		return Route{}, false
	}
	e, ok := view.Get(repo)
	if ok && e.Epoch > l.epoch && e.Node != self {
		return Route{}, false
	}
	return Route{Local: true}, true
}

// apply acts on the leader's answer to this node's claim or force-grant:
// the claim's holder steps from Claiming and its action is carried out
// here (open the database: spawn the repo actor, which owns the lease from
// then on; forward; or answer 503).
func (n *Node) apply(ctx context.Context, key names.Repo, d cluster.Decision) (Route, error) {
	return n.applyGrant(ctx, key, d, false)
}

// applyGrant is apply; with release, the repo actor a grant spawns lets
// the lease go through the drain at once.
func (n *Node) applyGrant(ctx context.Context, key names.Repo, d cluster.Decision, release bool) (Route, error) {
	h, acts := cluster.Step(cluster.NewHolder(n.cl.drain()), cluster.EventOf(d, n.cl.cfg.Self), time.Now())
	for _, act := range acts {
		switch act.Kind {
		case cluster.OpenDB:
			g := &granted{key: key, epoch: d.Entry.Epoch, session: d.Entry.Session, holder: h, release: release}
			if _, err := askSupervisor(ctx, n, g, 10*time.Second); err != nil {
				return Route{}, fmt.Errorf("record lease on %s: %w", key, err)
			}
			return Route{Local: true}, nil
		case cluster.ForwardTo:
			return Route{Node: act.Node}, nil
		}
	}
	return Route{}, fmt.Errorf("claim %s: %s without an owner: %w", key, d.Outcome, ErrLeaderUnreachable)
}

// claimToRelease claims key, which the map names this node for but no
// repo actor holds, and lets it go through the drain once granted
// (cluster.ReleaseClaim). Best effort: if the leader refuses or does not
// answer, the move waits, and the next heartbeat's answer asks again.
func (n *Node) claimToRelease(key names.Repo) {
	if n.cl.draining.Load() {
		return // the drain hands over what the map names here (Drain)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cluster.RenewEvery)
	defer cancel()
	d, err := n.cl.leader.Claim(ctx, cluster.ClaimLease{Repo: key, Node: n.cl.cfg.Self})
	if err == nil {
		_, err = n.applyGrant(ctx, key, d, true)
	}
	if err != nil {
		n.log.Warn("claim a repository to release it", zap.Stringer("repo", key), zap.Error(err))
	}
}

func unreachable(err error) error {
	if errors.Is(err, ErrLeaderUnreachable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrLeaderUnreachable, err)
}

// leaseOf is this node's lease on key, as the supervisor published it.
func (n *Node) leaseOf(key names.Repo) leaseInfo {
	if e, ok := n.cl.leases.Load(key); ok {
		return leaseInfo{held: true, epoch: e.(uint64)}
	}
	return leaseInfo{}
}

// ensureLocal routes key and reports a *NotOwnerError when another node
// owns it.
func (n *Node) ensureLocal(ctx context.Context, key names.Repo) error {
	r, err := n.route(ctx, key)
	if err != nil {
		return err
	}
	if !r.Local {
		return &NotOwnerError{Repo: key.String(), Node: r.Node}
	}
	return nil
}

// RefreshView re-reads the ownership map now rather than at the next
// follower poll (a no-op on the leader, whose view is its own writes, and
// on a single node). A failure is logged: the old view stays.
func (n *Node) RefreshView(ctx context.Context) {
	if n.cl == nil {
		return
	}
	if f := n.cl.follower.Load(); f != nil {
		if err := f.Refresh(ctx); err != nil {
			n.log.Warn("re-read ownership map", zap.Error(err))
		}
	}
}
