package cluster

import (
	"fmt"
	"time"

	"github.com/rgit/rgit/storage/names"
)

// RouteKind is what a node does with a request for a repo.
type RouteKind uint8

const (
	// Serve: the local view names this node and the lease is live.
	Serve RouteKind = iota
	// Forward: a live lease names another node (RouteDecision.Node).
	Forward
	// Claim: unowned or expired; ask the leader (503 if that fails).
	Claim
)

var routeNames = [...]string{Serve: "serve", Forward: "forward", Claim: "claim"}

func (k RouteKind) String() string {
	if int(k) < len(routeNames) {
		return routeNames[k]
	}
	return fmt.Sprintf("route(%d)", k)
}

// RouteDecision is the outcome of Locate.
type RouteDecision struct {
	Kind RouteKind
	Node string // the owner, for Forward
}

func (d RouteDecision) String() string {
	if d.Kind == Forward {
		return "forward " + d.Node
	}
	return d.Kind.String()
}

// View is a node's local copy of the ownership map; *Map implements it.
type View interface {
	Get(repo names.Repo) (Entry, bool)
}

// Locate decides from the local view alone. A follower's view lags the
// leader by up to a poll (FollowerPoll), which is harmless: Forward to a
// former owner costs a hop (the target routes again, under the hop limit),
// Claim on a repo just granted elsewhere is refused with the owner's name,
// and Serve on a repo granted away cannot happen while the node's
// ServeLease holds (the leader takes a bound entry only after its
// session lapsed). Only the leader grants, so staleness never makes a
// second owner.
//
// fresh is when the view was last known current. A view that stopped
// (the store failing: the leader renews sessions from memory then, and
// cannot persist them) shows entries lapsing that may well be live: one
// naming another node that was live when the view was last current is
// forwarded to once the view is StaleView old. The owner serves it only
// under its ServeLease, and routes it again otherwise; a dead owner is
// met as any unreachable one.
//
//	entry at now                              → route
//	none                                      → claim
//	live, names self                          → serve
//	live, names other                         → forward
//	lapsed, names other, live at fresh,
//	  now − fresh ≥ StaleView                 → forward
//	lapsed, otherwise                         → claim
func Locate(view View, repo names.Repo, self string, now, fresh time.Time) RouteDecision {
	e, ok := view.Get(repo)
	switch {
	case !ok:
		return RouteDecision{Kind: Claim}
	case !e.Live(now) && (e.Node == self || !e.Live(fresh) || now.Sub(fresh) < StaleView):
		return RouteDecision{Kind: Claim}
	case e.Node == self:
		return RouteDecision{Kind: Serve, Node: self}
	default:
		return RouteDecision{Kind: Forward, Node: e.Node}
	}
}

// OnClaimStoreDown is where a request goes that Locate sent to claim
// when the claim cannot start because the store is unavailable (the
// repository's existence cannot be checked): to the node the view last
// named for it, if another, whether or not its entry looks live. The view
// shows entries lapsing whenever the leader renews sessions from memory
// and cannot persist them, also when a poll got through between two
// outages and made the view look current; the named node serves only
// under its own lease and routes again otherwise (under the hop limit).
//
//	entry in view          → route
//	none                   → fail (503)
//	names self             → fail (503: a claim it is, and it cannot start)
//	names another node     → forward there
func OnClaimStoreDown(view View, repo names.Repo, self string) (string, bool) {
	e, ok := view.Get(repo)
	if !ok || e.Node == "" || e.Node == self {
		return "", false
	}
	return e.Node, true
}

// StaleView is how old a view must be for Locate to take it as stopped:
// a renewal period, fifteen polls.
const StaleView = RenewEvery
