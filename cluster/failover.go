package cluster

import (
	"fmt"
	"time"

	"github.com/rgit/rgit/storage/names"
)

// FailoverKind is what a node does after failing to connect to an owner.
type FailoverKind uint8

const (
	// Reread: wait until FailoverDecision.At, re-read the map, Route again
	// and retry; a second connect failure to the same owner comes back here.
	Reread FailoverKind = iota
	// AskForce: ask the leader to ForceGrant the repo away from Dead.
	AskForce
)

var failoverNames = [...]string{Reread: "reread", AskForce: "ask-force"}

func (k FailoverKind) String() string {
	if int(k) < len(failoverNames) {
		return failoverNames[k]
	}
	return fmt.Sprintf("failover(%d)", k)
}

// FailoverDecision is the outcome of OnConnectFailure.
type FailoverDecision struct {
	Kind FailoverKind
	At   time.Time // Reread: when to re-read
	Dead string    // AskForce: the unreachable owner
}

func (d FailoverDecision) String() string {
	switch d.Kind {
	case AskForce:
		return "ask-force dead=" + d.Dead
	case Reread:
		return "reread at " + d.At.Format(time.RFC3339Nano)
	}
	return d.Kind.String()
}

// Suspicion records a first connect failure to a repo's owner.
type Suspicion struct {
	Owner string
	First time.Time
	// Asked is when a failure asked the leader to force (zero: none yet).
	// Failures at that instant ask too: they rest on the same evidence,
	// and which of them came first is the scheduler's choice. A later
	// failure starts over.
	Asked time.Time
}

// Suspicions is a node's record of owners it failed to connect to, by
// repo. The zero value is not usable; make one with make(Suspicions).
// Owned by one actor; not safe for concurrent use.
type Suspicions map[names.Repo]Suspicion

// suspicionMaxAge bounds how long a first failure counts: a failure from
// long ago says nothing about the owner now.
const suspicionMaxAge = TTL

// OnConnectFailure decides what a node does when connecting to owner for
// repo failed. Callers report connect failures only (not timeouts or
// errors after connecting), and only while nothing of the request was
// consumed: then any request, a push too, may be served elsewhere, so
// any may move the repo. The first failure is recorded and answered with
// Reread after ForceGrantWait; only a second failure to the same owner,
// at least ForceGrantWait after the first and after the re-read still
// named it, asks the leader to force, as does any failure at that same
// instant; a concurrent failure inside the first one's wait re-reads
// after a wait of its own, and one after the ask starts over. One dropped
// connect never moves a repo.
func OnConnectFailure(s Suspicions, repo names.Repo, owner string, now time.Time) FailoverDecision {
	prev, ok := s[repo]
	fresh := ok && prev.Owner == owner && now.Sub(prev.First) <= suspicionMaxAge && !now.Before(prev.First)
	switch {
	case fresh && !prev.Asked.IsZero() && now.Equal(prev.Asked):
		return FailoverDecision{Kind: AskForce, Dead: owner}
	case !fresh || !prev.Asked.IsZero():
		s[repo] = Suspicion{Owner: owner, First: now}
		return FailoverDecision{Kind: Reread, At: now.Add(ForceGrantWait)}
	case now.Before(prev.First.Add(ForceGrantWait)):
		// A concurrent request failed inside the wait: not the second
		// failure. It re-reads after its own wait, not at the first
		// request's instant: requests that wake together race for the
		// suspicion, and which one asks the leader to force would be the
		// scheduler's choice.
		return FailoverDecision{Kind: Reread, At: now.Add(ForceGrantWait)}
	}
	prev.Asked = now
	s[repo] = prev
	return FailoverDecision{Kind: AskForce, Dead: owner}
}

// OnConnectSuccess clears a suspicion: the owner answered.
func OnConnectSuccess(s Suspicions, repo names.Repo) { delete(s, repo) }

// ForceStillDue decides whether a force-grant that waited for the leader
// may still be asked: the connect failures it rests on were against
// before, the entry naming the dead owner then; now (ok: present) is the
// view's entry once the leader is back. If the map meanwhile names
// another owner or epoch, or the owner renewed (a later expiry), the
// owner is alive or the repository moved: the request routes again
// instead of moving it from a live node on old evidence.
//
//	now                                      → force
//	absent                                   → route again
//	other node or other epoch                → route again
//	same node and epoch, expiry not later    → force
//	same node and epoch, expiry later        → route again (it renewed)
func ForceStillDue(before, now Entry, ok bool, dead string) bool {
	return ok && now.Node == dead && now.Epoch == before.Epoch && !now.Expires.After(before.Expires)
}
