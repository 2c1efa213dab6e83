package actors

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
)

// repoActor owns one open repository: its database handle, its session
// count and its idle timer. Every write to the repository is a message here,
// so writes are serialized by construction; sessions stream bytes on their
// own goroutines with the snapshot they were handed.
type repoActor struct {
	node     *Node
	key      repoKey
	owner    string
	name     string
	repo     *repo.Repo
	openErr  error
	sessions int
	closing  bool
	// releasing: cluster mode, idle, waiting for the supervisor to end the
	// lease's drain (the actor keeps serving meanwhile).
	releasing bool
	// lingering: the lease's drain ended (closeNow) while sessions were
	// running, such as a push forwarded here during the drain: they
	// finish and the actor then closes; no new session starts meanwhile.
	lingering bool
	// lastActive is when the last message other than idleTick arrived;
	// idleTimer, when armed, sends idleTick. protoactor's own receive
	// timeout is not used: its timer goroutine writes the actor context
	// unsynchronized (a data race under -race).
	lastActive time.Time
	idleTimer  *time.Timer
}

// idleTick is the repo actor's idle timer firing.
type idleTick struct{}

func (a *repoActor) Receive(ctx actor.Context) {
	if _, tick := ctx.Message().(*idleTick); !tick {
		a.lastActive = time.Now()
	}
	a.receive(ctx)
	if !a.closing && a.repo != nil && a.idleTimer == nil {
		a.armIdle(ctx, a.node.cfg.WarmTTL)
	}
}

// armIdle sends idleTick to the actor after d; only the timer's callback
// runs elsewhere, and it touches nothing but the mailbox.
func (a *repoActor) armIdle(ctx actor.Context, d time.Duration) {
	self, root := ctx.Self(), a.node.system.Root
	a.idleTimer = time.AfterFunc(d, func() { root.Send(self, &idleTick{}) })
}

func (a *repoActor) stopIdle() {
	if a.idleTimer != nil {
		a.idleTimer.Stop()
		a.idleTimer = nil
	}
}

func (a *repoActor) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.open()
	case *actor.Restarting:
		// A panic restarts the actor: drop the handle; Started reopens it.
		a.node.log.Error("repo actor restarting after a panic", zap.String("repo", string(a.key)))
		a.stopIdle()
		a.closeDB()
	case *actor.Stopping:
		a.stopIdle()
		a.closeDB()
	case *idleTick:
		a.idleTimer = nil
		// Busy since the timer was armed: check again when the TTL since
		// the last message has passed.
		if left := a.node.cfg.WarmTTL - time.Since(a.lastActive); left > 0 {
			if !a.closing && a.repo != nil {
				a.armIdle(ctx, left)
			}
			return
		}
		if a.sessions == 0 {
			a.idleNow(ctx)
		}
	case *evictIfIdle:
		if a.sessions == 0 {
			a.idleNow(ctx)
		}
	case *closeNow:
		if m.drained && a.sessions > 0 {
			// Cutting them would fail a push the drain admitted. The
			// supervisor keeps the entry naming this node meanwhile; a
			// new owner opening anyway fences this handle, so nothing is
			// acknowledged twice. A lost lease (declined, fenced) closes
			// at once.
			if !a.lingering {
				a.lingering = true
				ctx.Send(ctx.Parent(), &lingerHold{key: a.key})
			}
			return
		}
		a.goIdle(ctx, whyLeaseEnded)
	case *acquire:
		if a.lingering {
			ctx.Respond(&errRetry{})
			return
		}
		if !a.ready(ctx) {
			return
		}
		snap, err := a.repo.Snapshot(context.Background())
		if err != nil {
			a.fail(ctx, err)
			return
		}
		a.sessions++
		ctx.Respond(&acquired{snap: snap, info: a.repo.Info()})
	case *release:
		if a.sessions > 0 {
			a.sessions--
		}
		if a.lingering && a.sessions == 0 {
			a.goIdle(ctx, whyLingered)
		}
	case *call:
		if !a.ready(ctx) {
			return
		}
		v, panicked, err := guard(func() (any, error) { return m.fn(a.repo) })
		ctx.Respond(&callResult{v: v, err: err})
		if panicked != nil {
			// Answer first so the caller is not left waiting, then let the
			// supervisor restart the actor with a fresh handle.
			panic(panicked)
		}
		if errors.Is(err, refdb.ErrFenced) {
			a.fenced(ctx)
		}
	case *commitRepack:
		if !a.ready(ctx) {
			return
		}
		var pack repo.PackInfo
		a.write(ctx, func(c context.Context) (err error) {
			pack, err = a.repo.CommitRepack(c, m.build)
			return err
		}, func(err error) any { return &repackCommitted{pack: pack, err: err} })
	case *planGC:
		if !a.ready(ctx) {
			return
		}
		var plan repo.GCPlan
		a.write(ctx, func(c context.Context) (err error) {
			plan, err = a.repo.PlanGC(c, m.now, m.minAge)
			return err
		}, func(err error) any { return &gcPlanned{plan: plan, err: err} })
	case *closeRepo:
		why := whyClosed
		if m.shutdown {
			why = whyShutdown
		}
		a.closing = true
		a.closeDB()
		ctx.Send(ctx.Parent(), &idle{key: a.key, pid: ctx.Self(), why: why})
		ctx.Respond(&callResult{})
		ctx.Stop(ctx.Self())
	}
}

// write runs one database write of a typed message and answers with
// reply(its error). A panic is answered first (so the caller is not left
// waiting) and then restarts the actor with a fresh handle; a fenced
// database closes the actor.
func (a *repoActor) write(ctx actor.Context, op func(context.Context) error, reply func(error) any) {
	wctx, cancel := context.WithTimeout(context.Background(), a.node.cfg.CallTimeout)
	defer cancel()
	_, panicked, err := guard(func() (any, error) { return nil, op(wctx) })
	ctx.Respond(reply(err))
	if panicked != nil {
		panic(panicked)
	}
	if errors.Is(err, refdb.ErrFenced) {
		a.fenced(ctx)
	}
}

// idleNow closes an unused repository; in cluster mode it first asks the
// supervisor to release the lease, which closes it after the drain.
func (a *repoActor) idleNow(ctx actor.Context) {
	if a.node.cl == nil {
		a.goIdle(ctx, whyIdle)
		return
	}
	if !a.releasing && !a.closing {
		a.releasing = true
		ctx.Send(ctx.Parent(), &wantRelease{key: a.key, pid: ctx.Self()})
	}
}

// open opens the repository's database; a missing repository is remembered
// as openErr (creating nothing) and reported to every request.
func (a *repoActor) open() {
	ctx, cancel := context.WithTimeout(context.Background(), a.node.cfg.OpenTimeout)
	defer cancel()
	start := time.Now()
	r, err := repo.Open(ctx, a.node.cfg.Deps, a.owner, a.name)
	if err != nil {
		a.openErr = err
		return
	}
	a.repo = r
	a.node.metrics.openRepos.Inc()
	a.node.metrics.openLatency.Observe(time.Since(start).Seconds())
}

// ready reports whether the actor can serve a request, answering it
// otherwise: with the open error (and stopping), or errRetry when closing.
func (a *repoActor) ready(ctx actor.Context) bool {
	switch {
	case a.closing:
		ctx.Respond(&errRetry{})
		return false
	case a.openErr != nil:
		ctx.Respond(&callResult{err: a.openErr})
		a.closing = true
		ctx.Send(ctx.Parent(), &idle{key: a.key, pid: ctx.Self(), why: whyOpenFailed})
		ctx.Stop(ctx.Self())
		return false
	}
	return true
}

// fail answers a request with err; a fenced database stops the actor.
func (a *repoActor) fail(ctx actor.Context, err error) {
	ctx.Respond(&callResult{err: err})
	if errors.Is(err, refdb.ErrFenced) {
		a.fenced(ctx)
	}
}

func (a *repoActor) fenced(ctx actor.Context) {
	a.node.log.Error("repository database fenced by another writer; closing it",
		zap.String("repo", string(a.key)))
	a.node.metrics.fenced.Inc()
	a.goIdle(ctx, whyFenced)
}

// goIdle tells the supervisor first (so new requests spawn a fresh actor),
// then closes the database and stops.
func (a *repoActor) goIdle(ctx actor.Context, why closeWhy) {
	if a.closing {
		return
	}
	a.closing = true
	a.node.log.Debug("closing repository", zap.String("repo", string(a.key)), zap.Stringer("why", why))
	ctx.Send(ctx.Parent(), &idle{key: a.key, pid: ctx.Self(), why: why})
	a.closeDB()
	ctx.Stop(ctx.Self())
}

func (a *repoActor) closeDB() {
	if a.repo == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.node.cfg.OpenTimeout)
	defer cancel()
	if err := a.repo.Close(ctx); err != nil && !errors.Is(err, refdb.ErrFenced) {
		a.node.log.Warn("close repository", zap.String("repo", string(a.key)), zap.Error(err))
	}
	a.repo = nil
	a.node.metrics.openRepos.Dec()
}

// errPanic reports a write that panicked inside the repo actor.
var errPanic = errors.New("internal error: repository write panicked")

// guard runs fn, turning a panic into errPanic plus the panic value.
func guard(fn func() (any, error)) (v any, panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			v, panicked, err = nil, p, errPanic
		}
	}()
	v, err = fn()
	return v, nil, err
}
