package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/rgit/rgit/storage/repo"
)

// Messages between the node, its supervisor and repo actors. They stay in
// process for now; pack bytes never travel in them, only handles.

// repoKey names a repository: "owner/name".
type repoKey string

func keyOf(owner, name string) repoKey { return repoKey(owner + "/" + name) }

// getRepo asks the supervisor for the repo actor of key, spawning it.
type getRepo struct{ key repoKey }

// repoPID answers getRepo.
type repoPID struct{ pid *actor.PID }

// idle tells the supervisor that a repo actor is closing; the supervisor
// forgets it so the next request spawns a fresh one.
type idle struct {
	key repoKey
	pid *actor.PID
}

// evictIfIdle asks a repo actor to close if no session is using it.
type evictIfIdle struct{}

// acquire opens a session: the actor hands back a read view and counts the
// session so the database is not closed under it.
type acquire struct{}

// acquired answers acquire.
type acquired struct {
	snap *repo.Snapshot
	info repo.RepoInfo
}

// release ends a session started by acquire.
type release struct{}

// errRetry answers a message that reached an actor already closing; the
// caller asks the supervisor again.
type errRetry struct{}

// call runs fn against the open repository inside the actor, serialized with
// every other write to it, and answers with fn's error and result.
type call struct {
	fn func(r *repo.Repo) (any, error)
}

// callResult answers call.
type callResult struct {
	v   any
	err error
}

// closeRepo closes the repository (delete-repo needs it closed) and stops the
// actor; it answers once the database is closed.
type closeRepo struct{}

// listOpen asks the supervisor for the keys of the open repositories.
type listOpen struct{}

// openKeys answers listOpen.
type openKeys struct{ keys []repoKey }
