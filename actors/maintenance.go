package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/repo"
)

// repackAttempts bounds how often Repack builds again after a push landed
// during a build; a repository pushed to that often is repacked later.
const repackAttempts = 3

// Repack rewrites key into one pack without blocking it. Each
// attempt builds and uploads the pack outside the repo actor, from a
// session's snapshot (clones, fetches and pushes go on meanwhile), and
// only the switch is a message to the actor, checked against the state
// the pack was built from. A push that lands during a build fails the
// switch; the repack then starts again from a fresh snapshot, at most
// repackAttempts times, and otherwise fails with repo.ErrConcurrentUpdate.
// With nothing to repack it returns a zero PackInfo.
func (n *Node) Repack(ctx context.Context, key names.Repo, progress pack.ProgressFunc) (repo.PackInfo, error) {
	if progress == nil {
		progress = func(string, uint64, uint64) {}
	}
	var err error
	for attempt := 1; attempt <= repackAttempts; attempt++ {
		if attempt > 1 {
			progress("Repository changed during the repack; attempt", uint64(attempt), 0)
		}
		var info repo.PackInfo
		info, err = n.repackOnce(ctx, key, progress)
		if !errors.Is(err, repo.ErrConcurrentUpdate) {
			return info, err
		}
	}
	return repo.PackInfo{}, fmt.Errorf("gave up after %d attempts: %w", repackAttempts, err)
}

// repackOnce is one attempt of Repack.
func (n *Node) repackOnce(ctx context.Context, key names.Repo, progress pack.ProgressFunc) (repo.PackInfo, error) {
	s, err := n.Session(ctx, key)
	if err != nil {
		return repo.PackInfo{}, err
	}
	// The session keeps the repository open (and its snapshot's packs
	// readable) until the switch is answered.
	defer s.Release()
	b, err := repo.BuildRepack(ctx, n.cfg.Deps, s.Snapshot, progress)
	if err != nil || b == nil {
		return repo.PackInfo{}, err
	}
	return n.commitRepack(ctx, s, b)
}

// commitRepack asks the repo actor of s to switch to the built pack b.
func (n *Node) commitRepack(ctx context.Context, s *RepoSession, b *repo.RepackBuild) (repo.PackInfo, error) {
	r, err := askRepoActor(ctx, n, s.pid, &commitRepack{build: b}, n.cfg.CallTimeout)
	if err != nil {
		return repo.PackInfo{}, err
	}
	return r.pack, r.err
}

// PlanGC runs the database half of a garbage collection of key in
// its repo actor (dropping retired entries past their grace period) and
// returns the plan; repo.Collect, the listing and deleting of store
// objects, runs outside the actor. A missing repository yields an error
// wrapping repo.ErrNotFound (see repo.PlanOrphanGC).
func (n *Node) PlanGC(ctx context.Context, key names.Repo, now time.Time, minAge time.Duration) (repo.GCPlan, error) {
	r, err := askRepo(ctx, n, key, &planGC{now: now, minAge: minAge})
	if err != nil {
		return repo.GCPlan{}, err
	}
	return r.plan, r.err
}
