package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
)

// Git LFS locks are messages to the repository's actor, like every other
// write: one writer per repository, on whichever node owns it, so two
// users locking one path are ordered there.
type (
	// createLock asks for repo.Repo.CreateLock; *locksAnswered answers.
	createLock struct {
		toRepo[*locksAnswered]
		path, holder string
	}
	// deleteLock asks for repo.Repo.DeleteLock (holder "": forced);
	// *locksAnswered answers.
	deleteLock struct {
		toRepo[*locksAnswered]
		id, holder string
	}
	// listLocks asks for every lock; *locksAnswered answers.
	listLocks struct{ toRepo[*locksAnswered] }
	// locksAnswered answers the lock messages: the lock created or
	// removed, or all of them.
	locksAnswered struct {
		lock  repo.Lock
		locks []repo.Lock
		err   error
	}
)

// receiveLocks handles the lock messages; false for any other message.
func (a *repoActor) receiveLocks(ctx actor.Context, msg repoMessage) bool {
	switch m := msg.(type) {
	case *createLock:
		if a.ready(ctx) {
			var res locksAnswered
			a.write(ctx, func(c context.Context) (err error) {
				res.lock, err = a.repo.CreateLock(c, m.path, m.holder)
				return err
			}, func(err error) repoReply { res.err = err; return &res })
		}
	case *deleteLock:
		if a.ready(ctx) {
			var res locksAnswered
			a.write(ctx, func(c context.Context) (err error) {
				res.lock, err = a.repo.DeleteLock(c, m.id, m.holder)
				return err
			}, func(err error) repoReply { res.err = err; return &res })
		}
	case *listLocks:
		if a.ready(ctx) {
			locks, err := a.repo.Locks()
			ctx.Respond(&locksAnswered{locks: locks, err: err})
		}
	default:
		return false
	}
	return true
}

// askLocks sends msg to key's repo actor (opening it, claiming it
// in cluster mode) and returns its answer.
func (n *Node) askLocks(ctx context.Context, key names.Repo, msg repoRequest[*locksAnswered]) (*locksAnswered, error) {
	r, err := askRepo(ctx, n, key, msg)
	if err != nil {
		return nil, err
	}
	return r, r.err
}

// CreateLock locks path of key for holder through its repo actor;
// a path locked already is a *repo.LockedError.
func (n *Node) CreateLock(ctx context.Context, key names.Repo, path, holder string) (repo.Lock, error) {
	r, err := n.askLocks(ctx, key, &createLock{path: path, holder: holder})
	if err != nil {
		return repo.Lock{}, err
	}
	return r.lock, nil
}

// DeleteLock removes lock id of key if holder took it, any lock
// when holder is "" (forced), and returns it.
func (n *Node) DeleteLock(ctx context.Context, key names.Repo, id, holder string) (repo.Lock, error) {
	r, err := n.askLocks(ctx, key, &deleteLock{id: id, holder: holder})
	if r != nil {
		return r.lock, err
	}
	return repo.Lock{}, err
}

// Locks returns key's locks as its writer holds them.
func (n *Node) Locks(ctx context.Context, key names.Repo) ([]repo.Lock, error) {
	r, err := n.askLocks(ctx, key, &listLocks{})
	if err != nil {
		return nil, err
	}
	return r.locks, nil
}
