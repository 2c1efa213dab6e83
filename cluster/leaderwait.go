package cluster

import "time"

// AbsenceKind is what a node does when the leader could not be reached for
// a request that needs it.
type AbsenceKind uint8

const (
	// AbsenceRetry: ask the leader again now: it answered the node (its
	// heartbeat, sent every LeaderRetry while requests wait) since this
	// request last asked.
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
	// AbsenceWait: the leader has not answered the node since; look again
	// (view and answer) at LeaderAbsence.At, without asking the leader.
	AbsenceWait
)

// LeaderAbsence is the outcome of OnLeaderUnreachable.
type LeaderAbsence struct {
	Kind AbsenceKind
	At   time.Time // AbsenceWait: when to look again
	Node string    // AbsenceForward: the owner the view names
}

// OnLeaderUnreachable decides for a request that asked the leader first at
// since and found it unreachable now. e (ok: present) is the view's entry
// for the repository, re-read at every look; claim says whether the
// request follows it (a claim does; a force-grant does not: its entry
// names the dead owner). answered says whether the leader answered the
// node's heartbeat since the request last asked; serves whether the
// node's ServeLease covers e (ServeLease.Serves of e.Session). A claim
// serves under a live entry naming self that its ServeLease covers (a
// node that could not renew for its lease's length serves nothing until
// the leader answers) and forwards to a live entry naming another node. Otherwise the request asks again once the leader has answered
// the node, looking every LeaderRetry, until wait has passed since the
// first try, then gives up: a leader restart is waited out with the
// client's connection kept, a longer absence still answers 503. Waiting
// requests never ask the leader themselves; the node's one heartbeat
// does, so a thousand of them cost one probe per LeaderRetry.
//
//	entry (claims only)   waited   answered → kind
//	live, names self,     any      any      → adopt
//	  lease serves
//	live, names other     any      any      → forward
//	otherwise             ≥ wait   any      → give up
//	otherwise             < wait   yes      → retry (ask now)
//	otherwise             < wait   no       → wait until min(now+LeaderRetry, since+wait)
func OnLeaderUnreachable(e Entry, ok, claim bool, self string, serves bool, since, now time.Time, wait time.Duration, answered bool) LeaderAbsence {
	switch {
	case !claim || !ok || !e.Live(now):
	case e.Node != self:
		return LeaderAbsence{Kind: AbsenceForward, Node: e.Node}
	case serves:
		return LeaderAbsence{Kind: AbsenceAdopt}
	}
	end := since.Add(wait)
	switch {
	case !now.Before(end):
		return LeaderAbsence{Kind: AbsenceGiveUp}
	case answered:
		return LeaderAbsence{Kind: AbsenceRetry}
	}
	at := now.Add(LeaderRetry)
	if at.After(end) {
		at = end
	}
	return LeaderAbsence{Kind: AbsenceWait, At: at}
}
