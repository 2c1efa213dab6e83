package actors

import (
	"slices"
	"time"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
)

// The lifecycle decisions of repo actors and their supervisor, as pure
// functions of their state and the time: when an open repository closes or
// lets its lease go, which session it refuses, and which repositories the
// warm pool evicts. The actors only carry them out; the tables in
// lifecycle_test.go are their specification.

// life is what a repo actor's lifecycle decisions read.
type life struct {
	open     bool // the database is open
	closing  bool // the actor is closing: it serves nothing more
	sessions int  // sessions holding a snapshot
	// deliveries: webhook deliveries wait in the outbox, which only an
	// open repository delivers.
	deliveries bool
	// lease is the actor's lease holder in cluster mode; nil on a single
	// node, which owns every repository.
	lease *cluster.Holder
}

// isActivity reports whether a repo actor's message is use of the
// repository (a session, a write, maintenance or an admin command), which
// restarts the idle TTL; the actor's own timers and the lease's
// bookkeeping are not.
func isActivity(msg any) bool {
	switch msg.(type) {
	case *acquire, *release, *updateRefs, *setVisibility, *setHead, *commitRepack, *planGC, *closeRepo,
		*grantAccess, *revokeAccess, *protectRef, *unprotectRef, *readSettings, *addHook, *removeHook, *redeliver,
		*createLock, *deleteLock, *listLocks:
		return true
	}
	return false
}

// idleVerdict is what an unused repository does.
type idleVerdict uint8

const (
	stayOpen     idleVerdict = iota // in use, closing, or already letting go
	rearmIdle                       // used since the timer was armed: wait again
	closeIdle                       // single node: close now
	releaseLease                    // cluster: release the lease, close after the drain
)

var idleVerdictNames = [...]string{stayOpen: "stay-open", rearmIdle: "rearm", closeIdle: "close", releaseLease: "release"}

func (v idleVerdict) String() string { return idleVerdictNames[v] }

// onIdleTimer decides when the idle timer fires at now for a repository
// last used at lastActive: a repository used within the TTL waits the rest
// of it (rearmIdle, after the returned wait), one with sessions stays
// open, and an unused one goes (onEvict).
func onIdleTimer(l life, lastActive, now time.Time, ttl time.Duration) (idleVerdict, time.Duration) {
	if left := ttl - now.Sub(lastActive); left > 0 {
		if l.closing || !l.open {
			return stayOpen, 0
		}
		return rearmIdle, left
	}
	return onEvict(l), 0
}

// onEvict decides for a repository asked to close (idle, or evicted by the
// warm pool): only one without sessions or waiting webhook deliveries goes
// (deliveries wait at most the retry window); on a single node it closes
// at once, in cluster mode it releases its lease and closes when the
// drain ends, serving meanwhile. A lease already draining or closed is
// left to finish.
func onEvict(l life) idleVerdict {
	switch {
	case l.closing || l.sessions > 0 || l.deliveries:
		return stayOpen
	case l.lease == nil:
		return closeIdle
	case l.lease.State == cluster.Serving:
		return releaseLease
	}
	return stayOpen
}

// sessionVerdict is the answer to a request for a session or a write.
type sessionVerdict uint8

const (
	serveRequest   sessionVerdict = iota
	retryElsewhere                // closing: the caller asks the supervisor again
	failOpen                      // the database did not open: answer its error, then stop
)

// onRequest decides whether a repo actor serves a request: a closing actor
// refuses (a fresh actor will serve it), one whose database failed to open
// answers that error.
func onRequest(closing bool, openErr error) sessionVerdict {
	switch {
	case closing:
		return retryElsewhere
	case openErr != nil:
		return failOpen
	}
	return serveRequest
}

// onSession decides a request for a new session beyond onRequest: an
// actor lingering after its lease ended (sessions finishing) starts none;
// the caller routes again and claims the repository anew.
func onSession(lingering bool) sessionVerdict {
	if lingering {
		return retryElsewhere
	}
	return serveRequest
}

// closeVerdict is what a repo actor does when its lease closes the
// database.
type closeVerdict uint8

const (
	closeAtOnce     closeVerdict = iota
	lingerThenClose              // finish the running sessions first
)

// onLeaseClosed decides how a lease's end (the cluster.CloseDB action of
// event ev) closes a repository with sessions running. At the end of a
// drain the lease was released, not lost: a push the drain admitted (one
// forwarded here while it ran) finishes rather than fails, and a new owner
// opening meanwhile fences this handle, so nothing is acknowledged twice.
// A lost lease (renewal declined, fenced) closes at once.
func onLeaseClosed(ev cluster.EventKind, sessions int) closeVerdict {
	if ev == cluster.EvTick && sessions > 0 {
		return lingerThenClose
	}
	return closeAtOnce
}

// releaseOnClose reports whether a repo actor that closes for why must
// tell the leader its lease is free. Nothing is open any more after a
// failed open or a delete, so no drain is needed; a shutdown keeps the
// lease (to the cluster it looks like a crash, and the node's restart
// reclaims it), and every other reason closed through the lease already.
func releaseOnClose(why closeWhy, lease *cluster.Holder) bool {
	if why == whyLingered {
		return lease != nil // undo holdEntry's renewal
	}
	return lease != nil && lease.State == cluster.Serving && (why == whyOpenFailed || why == whyClosed)
}

// warmChild is the warm pool's view of one open repository.
type warmChild struct {
	key      names.Repo
	lastUsed time.Time
}

// evictions picks the repositories to ask to close when the warm pool holds
// more than maxWarm: the least recently used first, never fresh (the one
// just opened). A repository with sessions refuses (onEvict) and is asked
// again on the next open, so the pool may stay over the bound while every
// repository is in use.
func evictions(children []warmChild, fresh names.Repo, maxWarm int) []names.Repo {
	over := len(children) - maxWarm
	if over <= 0 {
		return nil
	}
	cand := slices.DeleteFunc(slices.Clone(children), func(c warmChild) bool { return c.key == fresh })
	slices.SortFunc(cand, func(a, b warmChild) int {
		if c := a.lastUsed.Compare(b.lastUsed); c != 0 {
			return c
		}
		return names.Compare(a.key, b.key)
	})
	out := make([]names.Repo, 0, over)
	for _, c := range cand[:min(over, len(cand))] {
		out = append(out, c.key)
	}
	return out
}
