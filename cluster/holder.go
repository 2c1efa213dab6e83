package cluster

import (
	"fmt"
	"time"
)

// HolderState is where a node is with one repo it claims or holds open.
type HolderState uint8

const (
	// Claiming: the claim is with the leader; nothing is open.
	Claiming HolderState = iota
	// Serving: lease held, database open, renewed in the node's batch.
	Serving
	// Draining: released; still serving until DrainUntil, then closes.
	Draining
	// Closed: terminal; the database is closed (or was never opened).
	Closed
)

var holderStateNames = [...]string{Claiming: "claiming", Serving: "serving", Draining: "draining", Closed: "closed"}

func (s HolderState) String() string {
	if int(s) < len(holderStateNames) {
		return holderStateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// EventKind names what happened to a held repo.
type EventKind uint8

const (
	// EvGranted: the leader granted (or extended) the lease to this node.
	EvGranted EventKind = iota
	// EvRedirected: the claim was refused or steered; Event.Node owns it.
	EvRedirected
	// EvRenewDeclined: the leader declined the renewal; the lease is lost.
	EvRenewDeclined
	// EvReleaseStarted: the node decided to let go (idle, eviction, SIGTERM).
	EvReleaseStarted
	// EvTick: time passed; ends a drain whose deadline is reached.
	EvTick
	// EvFenced: a newer writer fenced the database.
	EvFenced
	// EvLeaderUnreachable: a claim or renewal could not reach the leader.
	EvLeaderUnreachable
)

var eventNames = [...]string{
	EvGranted: "granted", EvRedirected: "redirected", EvRenewDeclined: "renew-declined",
	EvReleaseStarted: "release-started", EvTick: "tick", EvFenced: "fenced", EvLeaderUnreachable: "leader-unreachable",
}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", k)
}

// Event is an input to Step.
type Event struct {
	Kind EventKind
	Node string // owner, for EvRedirected
}

// ActionKind names an effect the node's actor must perform.
type ActionKind uint8

const (
	OpenDB ActionKind = iota
	CloseDB
	// SendRelease: tell the leader to shorten the entry to the drain.
	SendRelease
	// Respond503: answer waiting requests 503 (claim could not be made).
	Respond503
	// ForwardTo: send waiting requests to Action.Node.
	ForwardTo
	// WakeAt: deliver EvTick at Action.At.
	WakeAt
)

var actionNames = [...]string{OpenDB: "open-db", CloseDB: "close-db", SendRelease: "send-release", Respond503: "respond-503", ForwardTo: "forward", WakeAt: "wake-at"}

func (k ActionKind) String() string {
	if int(k) < len(actionNames) {
		return actionNames[k]
	}
	return fmt.Sprintf("action(%d)", k)
}

// Action is an effect returned by Step.
type Action struct {
	Kind ActionKind
	Node string    // ForwardTo
	At   time.Time // WakeAt
}

// Holder is a node's state for one repo. The zero value is Claiming with
// the production Drain: a
// node creates a holder when Route says Claim. When Route says Serve for a
// repo with no holder (the map names this node, e.g. steered to it), the
// node starts from NewServing instead.
type Holder struct {
	State      HolderState
	DrainUntil time.Time // set while Draining
	drain      time.Duration
}

// NewHolder returns a holder in Claiming with drain length d (Drain in
// production).
func NewHolder(d time.Duration) Holder { return Holder{State: Claiming, drain: d} }

// NewServing returns a holder for a repo the map already names this node
// for, and the action to open it.
func NewServing(d time.Duration) (Holder, []Action) {
	return Holder{State: Serving, drain: d}, []Action{{Kind: OpenDB}}
}

// Renews reports whether the repo belongs in the node's renewal batch.
// Draining repos are excluded so a renewal never undoes a release.
func (h Holder) Renews() bool { return h.State == Serving }

// Step applies ev at now. Unlisted (state, event) pairs change nothing:
// duplicates and late messages are expected.
//
//	Claiming  granted            → Serving   open-db
//	Claiming  redirected(n)      → Closed    forward n
//	Claiming  leader-unreachable → Closed    respond-503 (never serve on a failed claim)
//	Claiming  release/fenced     → Closed
//	Serving   renew-declined     → Closed    close-db (at once, not waiting to be fenced)
//	Serving   release-started    → Draining  send-release, wake-at now+drain
//	Serving   leader-unreachable → Serving   (keep it; served while the ServeLease lasts)
//	Draining  tick ≥ DrainUntil  → Closed    close-db
//	Draining  renew-declined     → Closed    close-db
//	Serving/Draining fenced      → Closed    close-db
//
// The drain starts before the release is sent, so the node's drain ends no
// later than the leader's shortened expiry and the database is closed
// before anyone else can be granted it. The node ticks at DrainUntil and
// also before each new session and background write, so a late timer
// message does not stretch the drain.
func Step(h Holder, ev Event, now time.Time) (Holder, []Action) {
	closed := func(acts ...Action) (Holder, []Action) {
		return Holder{State: Closed, drain: h.drain}, acts
	}
	switch h.State {
	case Claiming:
		switch ev.Kind {
		case EvGranted:
			h.State = Serving
			return h, []Action{{Kind: OpenDB}}
		case EvRedirected:
			return closed(Action{Kind: ForwardTo, Node: ev.Node})
		case EvLeaderUnreachable:
			return closed(Action{Kind: Respond503})
		case EvReleaseStarted, EvFenced, EvRenewDeclined:
			return closed()
		}
	case Serving:
		switch ev.Kind {
		case EvRenewDeclined, EvFenced:
			return closed(Action{Kind: CloseDB})
		case EvReleaseStarted:
			d := h.drain
			if d <= 0 {
				d = Drain
			}
			h.State, h.DrainUntil = Draining, now.Add(d)
			return h, []Action{{Kind: SendRelease}, {Kind: WakeAt, At: h.DrainUntil}}
		}
	case Draining:
		switch ev.Kind {
		case EvRenewDeclined, EvFenced:
			return closed(Action{Kind: CloseDB})
		case EvTick:
			if !now.Before(h.DrainUntil) {
				return closed(Action{Kind: CloseDB})
			}
		}
	}
	return h, nil
}

// EventOf turns the leader's answer to this node's claim into the event
// for its holder.
func EventOf(d Decision, self string) Event {
	if (d.Outcome == Granted || d.Outcome == Extended) && d.Owner == self {
		return Event{Kind: EvGranted}
	}
	if d.Owner == "" || d.Owner == self {
		// Refused without an owner to forward to: treat as a failed claim.
		return Event{Kind: EvLeaderUnreachable}
	}
	return Event{Kind: EvRedirected, Node: d.Owner}
}
