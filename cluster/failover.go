package cluster

import (
	"fmt"
	"time"
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
}

// Suspicions is a node's record of owners it failed to connect to, by
// repo. The zero value is not usable; make one with make(Suspicions).
// Owned by one actor; not safe for concurrent use.
type Suspicions map[string]Suspicion

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
// named it, asks the leader to force. One dropped connect never moves a
// repo.
func OnConnectFailure(s Suspicions, repo, owner string, now time.Time) FailoverDecision {
	prev, ok := s[repo]
	if !ok || prev.Owner != owner || now.Sub(prev.First) > suspicionMaxAge || now.Before(prev.First) {
		s[repo] = Suspicion{Owner: owner, First: now}
		return FailoverDecision{Kind: Reread, At: now.Add(ForceGrantWait)}
	}
	if ready := prev.First.Add(ForceGrantWait); now.Before(ready) {
		// A concurrent request failed inside the wait: it waits for the
		// same re-read rather than counting as the second failure.
		return FailoverDecision{Kind: Reread, At: ready}
	}
	delete(s, repo)
	return FailoverDecision{Kind: AskForce, Dead: owner}
}

// OnConnectSuccess clears a suspicion: the owner answered.
func OnConnectSuccess(s Suspicions, repo string) { delete(s, repo) }
