package hooks

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
)

// DefaultSweep is how often a node looks for deliveries nobody is
// sending (RGIT_HOOK_SWEEP_SECS).
const DefaultSweep = 30 * time.Second

// Sweep runs until ctx ends. Every interval (jittered ±25%) it lists the
// repositories marked as having webhook deliveries waiting
// (repo.PendingRepos) and visits each (actors.Node.SweepHooks): the node
// holding it, or the node that claims it when nobody does, opens it, which
// resumes deliveries whose owner crashed or drained while nothing else
// touched the repository since; a repository with nothing waiting loses
// its markers. A repository another node holds is left to that node's
// sweep.
func Sweep(ctx context.Context, node *actors.Node, d repo.Deps, every time.Duration, log *zap.Logger) {
	if every <= 0 {
		every = DefaultSweep
	}
	for {
		wait := every*3/4 + time.Duration(rand.Int64N(int64(every/2)+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		sweepOnce(ctx, node, d, log)
	}
}

func sweepOnce(ctx context.Context, node *actors.Node, d repo.Deps, log *zap.Logger) {
	repos, err := repo.PendingRepos(ctx, d)
	if err != nil {
		log.Warn("webhook sweep: list pending-delivery markers", zap.Error(err))
		return
	}
	for _, r := range repos {
		if ctx.Err() != nil || node.Draining() {
			return
		}
		owner, name, _ := strings.Cut(r, "/")
		rp, err := names.New(owner, name)
		if err != nil {
			log.Warn("webhook sweep: a marker names no possible repository", zap.String("repo", r), zap.Error(err))
			continue
		}
		vctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = node.SweepHooks(vctx, rp)
		switch {
		case err == nil, errors.Is(err, actors.ErrNotOwner):
		case errors.Is(err, repo.ErrNotFound):
			err = repo.ClearMarkers(vctx, d, rp)
		}
		cancel()
		if err != nil && !errors.Is(err, actors.ErrNotOwner) {
			log.Info("webhook sweep: visit a repository with deliveries waiting", zap.String("repo", r), zap.Error(err))
		}
	}
}
