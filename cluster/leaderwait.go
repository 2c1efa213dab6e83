package cluster

import "time"

// AbsenceKind is what a node does when the leader could not be reached for
// a request that needs it.
type AbsenceKind uint8

const (
	// AbsenceRetry: ask the leader again once it answers the node (its
	// heartbeat, sent every LeaderRetry while requests wait) or the view
	// changes, and at LeaderAbsence.At, the end of the wait, at the latest.
	AbsenceRetry AbsenceKind = iota
	// AbsenceAdopt: serve under the entry the view shows: the leader
	// granted the repository to this node (it handed it over while
	// draining, or granted it before this process restarted), so the
	// grant is the leader's, only its confirmation is missing.
	AbsenceAdopt
	// AbsenceGiveUp: the wait is over; answer 503.
	AbsenceGiveUp
	// AbsenceForward: the view now names another node live (the leader
	// handed the repository over, or granted it elsewhere, and this
	// node's view caught up while it waited): forward there.
	AbsenceForward
)

// LeaderAbsence is the outcome of OnLeaderUnreachable.
type LeaderAbsence struct {
	Kind AbsenceKind
	At   time.Time // AbsenceRetry: when to ask again at the latest
	Node string    // AbsenceForward: the owner the view names
}

// OnLeaderUnreachable decides for a request that asked the leader first at
// since and found it unreachable now. e (ok: present) is the view's entry
// for the repository, re-read at every try; claim says whether the request
// follows it (a claim does; a force-grant does not: its entry names the
// dead owner). A claim serves under a live entry naming self and forwards
// to a live entry naming another node. Otherwise the request asks again
// when the leader is back, until wait has passed since the first try,
// then gives up: a leader restart is waited out with the client's
// connection kept, a longer absence still answers 503.
//
//	entry (claims only)   waited   → kind
//	live, names self      any      → adopt
//	live, names other     any      → forward
//	otherwise             < wait   → retry when the leader answers, by since+wait
//	otherwise             ≥ wait   → give up
func OnLeaderUnreachable(e Entry, ok, claim bool, self string, since, now time.Time, wait time.Duration) LeaderAbsence {
	if claim && ok && e.Live(now) {
		if e.Node == self {
			return LeaderAbsence{Kind: AbsenceAdopt}
		}
		return LeaderAbsence{Kind: AbsenceForward, Node: e.Node}
	}
	end := since.Add(wait)
	if !now.Before(end) {
		return LeaderAbsence{Kind: AbsenceGiveUp}
	}
	return LeaderAbsence{Kind: AbsenceRetry, At: end}
}
