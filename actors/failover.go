package actors

// Failover: what a forwarder does when the owner it was sent to answers
// that it drained (Moved) or cannot be reached (ConnectFailed and the
// force-grant), decided by cluster.OnConnectFailure and movedStep.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
)

// Moved is called by a forwarder whose request for key was
// answered by node with the moved signal: node does not hold the
// repository (it drained) although this node's view named it. Moved
// re-reads the map and waits, up to Drain plus a follower poll, for an
// entry still naming node to expire (the drained node's release shortened
// it to the drain), then routes again: usually a claim, which the leader
// now grants here or steers elsewhere. Nothing was written for the
// request, so the caller may send it wherever this says.
func (n *Node) Moved(ctx context.Context, key names.Repo, node string) (Route, error) {
	if n.cl == nil {
		return Route{Local: true}, nil
	}
	// A release shortens the entry to the drain; an owner whose drain
	// ended with sessions still running holds the entry until they end,
	// so wait as long as for an absent leader.
	movedAt := time.Now()
	deadline := movedAt.Add(max(n.cl.cfg.Timings.Drain+cluster.FollowerPoll, n.cl.cfg.Timings.LeaderWait))
	for {
		n.RefreshView(ctx)
		e, ok := n.OwnershipView().Get(key)
		now := time.Now()
		step := movedStep(e, ok, node, movedAt, now, deadline)
		if step.again {
			return Route{Node: node}, nil
		}
		if step.giveUp {
			return Route{}, fmt.Errorf("%s released %s but the map names it until %s: %w",
				node, key, e.Expires.UTC().Format(time.RFC3339Nano), ErrOwnerUnreachable)
		}
		if !step.until.IsZero() {
			if err := sleepUntil(ctx, step.until); err != nil {
				return Route{}, err
			}
			continue
		}
		r, err := n.route(ctx, key)
		if err != nil || r.Local || r.Node != node {
			return r, err
		}
		// The leader still names node (its clock is behind this one's):
		// try again after a poll, within the deadline.
		if now.Add(cluster.FollowerPoll).After(deadline) {
			return Route{}, fmt.Errorf("%s released %s but the leader still names it: %w", node, key, ErrOwnerUnreachable)
		}
		if err := sleepUntil(ctx, now.Add(cluster.FollowerPoll)); err != nil {
			return Route{}, err
		}
	}
}

// movedDecision is movedStep's answer: route now (zero value), wait until
// a time, or give up.
type movedDecision struct {
	until  time.Time
	giveUp bool
	again  bool // send it to the node again: it holds the repository anew
}

// movedStep decides Moved's next step from the view's entry for the
// repository: an entry that no longer names the node that answered moved
// at movedAt (or has expired) routes now; one the leader wrote for that
// node after movedAt means the node holds it anew (a restarted process
// claimed it, or the lease came back to it) and the request goes there
// again; one that still names it live is waited out if it expires by
// deadline; a longer one is re-read every follower poll until the
// deadline (the node holds it while sessions it admitted in its drain
// finish, then releases it), and then Moved gives up (the release was
// lost: the entry lapses only at its TTL).
func movedStep(e cluster.Entry, ok bool, node string, movedAt, now, deadline time.Time) movedDecision {
	switch {
	case !ok || e.Node != node || !e.Live(now):
		return movedDecision{}
	case e.Written.After(movedAt):
		return movedDecision{again: true}
	case !e.Expires.After(deadline):
		return movedDecision{until: e.Expires}
	case !now.Before(deadline):
		return movedDecision{giveUp: true}
	}
	if next := now.Add(cluster.FollowerPoll); next.Before(deadline) {
		return movedDecision{until: next}
	}
	return movedDecision{until: deadline}
}

// ConnectFailed is called by a forwarder that could not connect to node
// for key, having consumed nothing of the request (method names
// it, for the log). It applies cluster.OnConnectFailure: the first failure
// waits ForceGrantWait, re-reads the map and routes again; a second one
// asks the leader to force the repository over (waiting once for
// cluster.ForceAt: the quiet period, and the owner's session's lapse).
func (n *Node) ConnectFailed(ctx context.Context, key names.Repo, node, method string) (Route, error) {
	if n.cl == nil {
		return Route{Local: true}, nil
	}
	n.cl.suspMu.Lock()
	d := cluster.OnConnectFailure(n.cl.susp, key, node, time.Now())
	n.cl.suspMu.Unlock()
	n.log.Info("cannot connect to repository owner", zap.Stringer("repo", key), zap.String("owner", node),
		zap.String("method", method), zap.Stringer("failover", d))
	switch d.Kind {
	case cluster.Reread:
		if err := sleepUntil(ctx, d.At); err != nil {
			return Route{}, err
		}
		n.RefreshView(ctx)
		return n.route(ctx, key)
	}
	return n.force(ctx, key, d.Dead)
}

// ConnectSucceeded is called by a forwarder that connected to node for
// key after an earlier connect failure: a suspicion of node for
// the repository ends (cluster.OnConnectSuccess), so that failure never
// counts as the first of two that move it.
func (n *Node) ConnectSucceeded(key names.Repo, node string) {
	if n.cl == nil {
		return
	}
	n.cl.suspMu.Lock()
	defer n.cl.suspMu.Unlock()
	if s, ok := n.cl.susp[key]; ok && s.Owner == node {
		cluster.OnConnectSuccess(n.cl.susp, key)
	}
}

// force asks the leader to move key from dead to this node. If it had to
// wait for the leader, it asks only if the map still shows dead's entry
// as it was (cluster.ForceStillDue), and routes again otherwise.
func (n *Node) force(ctx context.Context, key names.Repo, dead string) (Route, error) {
	if n.cl.draining.Load() {
		return Route{}, fmt.Errorf("force-grant %s: %w", key, ErrDraining)
	}
	if err := n.awaitServing(ctx); err != nil {
		return Route{}, fmt.Errorf("force-grant %s: %w", key, err)
	}
	before, _ := n.OwnershipView().Get(key)
	for attempt := 0; ; attempt++ {
		asked := false
		d, err := n.awaitLeader(ctx, key, false, func() (cluster.Decision, error) {
			if asked {
				// It waited for the leader: force only if the map shows
				// the owner as it was when it could not be reached.
				n.RefreshView(ctx)
				if now, ok := n.OwnershipView().Get(key); !cluster.ForceStillDue(before, now, ok, dead) {
					return cluster.Decision{}, errRouteAgain
				}
			}
			asked = true
			if _, err := n.cl.ensureSession(ctx); err != nil {
				return cluster.Decision{}, err
			}
			return n.cl.leader.ForceGrant(ctx, cluster.ForceGrantLease{Repo: key, Requester: n.cl.cfg.Self, Dead: dead})
		})
		if errors.Is(err, errRouteAgain) {
			return n.route(ctx, key)
		}
		if err != nil {
			return Route{}, fmt.Errorf("force-grant %s: %w", key, unreachable(err))
		}
		if d.Reason != cluster.ReasonQuiet {
			return n.apply(ctx, key, d)
		}
		if attempt > 0 {
			return Route{}, fmt.Errorf("force-grant %s from %s: still in the quiet period: %w", key, dead, ErrOwnerUnreachable)
		}
		// Too early to take it from the owner (cluster.ForceAt): the
		// entry was written within the quiet period, or the owner's
		// session, which it may still be serving under, has not lapsed
		// yet. Wait that out once; a session renewed meanwhile means the
		// owner is alive, and the request fails as unreachable.
		if err := sleepUntil(ctx, inPhase(cluster.ForceAt(d.Entry, n.cl.cfg.Timings.QuietPeriod), time.Now())); err != nil {
			return Route{}, err
		}
	}
}

// inPhase returns the first instant at or after at whose offset within
// its millisecond is now's. Requests that wait for one deadline (the
// owner's lapse, which every survivor reads from the same entry) then
// resume one after another in the order they came, instead of all at one
// instant where the scheduler would pick the order (and a seed of
// testkit/cluster's randomized run would not replay). It costs under a
// millisecond.
func inPhase(at, now time.Time) time.Time {
	next := at.Truncate(time.Millisecond).Add(now.Sub(now.Truncate(time.Millisecond)))
	if next.Before(at) {
		next = next.Add(time.Millisecond)
	}
	return next
}

// errRouteAgain: a force-grant that waited for the leader found the
// owner alive or the repository moved (cluster.ForceStillDue).
var errRouteAgain = errors.New("owner renewed or repository moved while the leader was away")

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
