package actors

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
)

// repoActor owns one open repository: its database handle, its session
// count, its idle timer and, in cluster mode, its lease (holder state,
// epoch and drain timer). Every write to the repository is a message here,
// so writes are serialized by construction; sessions stream bytes on their
// own goroutines with the snapshot they were handed.
type repoActor struct {
	node     *Node
	key      names.Repo
	repo     *repo.Repo
	openErr  error
	sessions int
	closing  bool
	// lease is nil on a single node. It is allocated by the supervisor
	// when the lease is granted and handed to every incarnation of the
	// actor, so that a restart after a panic keeps the lease's state; no
	// one else touches it.
	lease *actorLease
	// lingering: the lease's drain ended while sessions were running,
	// such as a push forwarded here during the drain: they finish and the
	// actor then closes; no new session starts meanwhile.
	lingering bool
	// lastActive is when the last message other than idleTick arrived;
	// idleTimer, when armed, sends idleTick. protoactor's own receive
	// timeout is not used: its timer goroutine writes the actor context
	// unsynchronized (a data race under -race).
	lastActive time.Time
	idleTimer  *time.Timer
	// hooks is the webhook delivery worker while deliveries wait
	// (hooks.go); nil when none runs.
	hooks HookWorker
}

// actorLease is a repo actor's lease on its repository.
type actorLease struct {
	h     cluster.Holder
	epoch uint64
	// session is the node session the entry is bound to: the actor
	// serves only while the node's ServeLease covers it.
	session uint64
	drain   *time.Timer // sends drainTick at the end of the drain
}

// idleTick is the repo actor's idle timer firing.
type idleTick struct{}

// life is the actor's state as its lifecycle decisions read it.
func (a *repoActor) life() life {
	l := life{open: a.repo != nil, closing: a.closing, sessions: a.sessions, deliveries: a.deliveriesWaiting()}
	if a.lease != nil {
		l.lease = &a.lease.h
	}
	return l
}

func (a *repoActor) Receive(ctx actor.Context) {
	if isActivity(ctx.Message()) {
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
	if a.closing && !lifecycleMessage(ctx.Message()) {
		// Closed and waiting for the supervisor's PoisonPill: a request
		// goes to the fresh actor the supervisor spawns next.
		if ctx.Sender() != nil {
			ctx.Respond(&errRetry{})
		}
		return
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// A granted lease (cluster.NewServing) or a single node's request
		// opens the database: the OpenDB action, carried out on spawn.
		a.open()
		a.wakeHooks(ctx)
	case *actor.Restarting:
		// A panic restarts the actor: drop the handle; Started reopens it.
		a.node.log.Error("repo actor restarting after a panic", zap.Stringer("repo", a.key))
		a.stopIdle()
		a.closeDB()
	case *actor.Stopping:
		a.stopIdle()
		if a.lease != nil && a.lease.drain != nil {
			a.lease.drain.Stop()
		}
		a.closeDB()
	case *idleTick:
		a.idleTimer = nil
		v, wait := onIdleTimer(a.life(), a.lastActive, time.Now(), a.node.cfg.WarmTTL)
		if v == rearmIdle {
			a.armIdle(ctx, wait)
			return
		}
		a.idleVerdict(ctx, v)
	case *evictIfIdle:
		a.idleVerdict(ctx, onEvict(a.life()))
	case *startRelease:
		if a.lease != nil && a.lease.h.State == cluster.Serving {
			a.stepLease(ctx, cluster.Event{Kind: cluster.EvReleaseStarted}, whyLeaseEnded)
		}
	case *drainTick:
		if a.lease != nil {
			a.stepLease(ctx, cluster.Event{Kind: cluster.EvTick}, whyLeaseEnded)
		}
	case *regranted:
		// The leader granted this node the lease it holds again (a claim
		// or force-grant in flight): only the epoch changes. A draining
		// lease keeps draining; the next request claims again.
		if a.lease != nil {
			a.lease.epoch, a.lease.session = m.epoch, m.session
			if m.revive != nil {
				a.lease.h, a.lingering = *m.revive, false
			}
		}
	case *renewAnswer:
		if a.lease != nil && m.epoch == a.lease.epoch {
			a.node.log.Warn("lease renewal declined; closing repository", zap.Stringer("repo", a.key))
			a.stepLease(ctx, cluster.Event{Kind: cluster.EvRenewDeclined}, whyLeaseEnded)
		}
	case *acquire:
		a.endDueDrain(ctx)
		if onSession(a.lingering) == retryElsewhere {
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
		var epoch uint64
		if a.lease != nil {
			epoch = a.lease.epoch
		}
		ctx.Respond(&acquired{snap: snap, info: a.repo.Info(), pid: ctx.Self(), epoch: epoch})
	case *release:
		if a.sessions > 0 {
			a.sessions--
		}
		if a.lingering && a.sessions == 0 {
			a.goIdle(ctx, whyLingered)
		}
	case *updateRefs:
		if !a.ready(ctx) {
			return
		}
		var errs []error
		a.writeAs(ctx, m.by, func(c context.Context) (err error) {
			errs, err = a.repo.UpdateRefs(c, m.staged, m.cmds, m.atomic)
			return err
		}, func(err error) repoReply { return &refsUpdated{errs: errs, err: err} })
		a.wakeHooks(ctx)
	case *setVisibility:
		if a.ready(ctx) {
			a.writeAs(ctx, m.by, func(c context.Context) error { return a.repo.SetVisibility(c, m.public) }, writtenReply)
			a.wakeHooks(ctx)
		}
	case *setHead:
		if a.ready(ctx) {
			a.write(ctx, func(c context.Context) error { return a.repo.SetHead(c, m.target) }, writtenReply)
		}
	case *commitRepack:
		// Background work does not write to a repository whose lease
		// ended: the next owner may have opened it (its pack is garbage
		// for GC).
		if a.endDueDrain(ctx); a.lingering {
			ctx.Respond(&errRetry{})
			return
		}
		if !a.ready(ctx) {
			return
		}
		var pack repo.PackInfo
		a.write(ctx, func(c context.Context) (err error) {
			pack, err = a.repo.CommitRepack(c, m.build)
			return err
		}, func(err error) repoReply { return &repackCommitted{pack: pack, err: err} })
	case *planGC:
		if a.endDueDrain(ctx); a.lingering {
			ctx.Respond(&errRetry{})
			return
		}
		if !a.ready(ctx) {
			return
		}
		var plan repo.GCPlan
		a.write(ctx, func(c context.Context) (err error) {
			plan, err = a.repo.PlanGC(c, m.now, m.minAge)
			return err
		}, func(err error) repoReply { return &gcPlanned{plan: plan, err: err} })
	case *closeRepo:
		why := whyClosed
		if m.shutdown {
			why = whyShutdown
		}
		a.goIdle(ctx, why)
		ctx.Respond(&written{})
	case repoMessage:
		if !a.receiveHooks(ctx, m) && !a.receiveLocks(ctx, m) {
			a.receiveAccess(ctx, m)
		}
	}
}

// write runs one database write of a typed message and answers with
// reply(its error). A panic is answered first (so the caller is not left
// waiting) and then restarts the actor with a fresh handle; a fenced
// database closes the actor.
func writtenReply(err error) repoReply { return &written{err: err} }

// writeAs is write with the identity the change is made by in the
// operation's context (the pusher or operator its webhook events name).
func (a *repoActor) writeAs(ctx actor.Context, id auth.Identity, op func(context.Context) error, reply func(error) repoReply) {
	a.write(ctx, func(c context.Context) error { return op(auth.WithIdentity(c, id)) }, reply)
}

func (a *repoActor) write(ctx actor.Context, op func(context.Context) error, reply func(error) repoReply) {
	wctx, cancel := context.WithTimeout(context.Background(), a.node.cfg.CallTimeout)
	defer cancel()
	panicked, err := guard(func() error { return op(wctx) })
	ctx.Respond(reply(err))
	if panicked != nil {
		panic(panicked)
	}
	if errors.Is(err, refdb.ErrFenced) {
		a.fenced(ctx)
	}
}

// idleVerdict carries out onIdleTimer's or onEvict's decision.
func (a *repoActor) idleVerdict(ctx actor.Context, v idleVerdict) {
	switch v {
	case closeIdle:
		a.goIdle(ctx, whyIdle)
	case releaseLease:
		a.stepLease(ctx, cluster.Event{Kind: cluster.EvReleaseStarted}, whyLeaseEnded)
	}
}

// stepLease applies ev to the lease (cluster.Step) and carries out every
// action it returns; why is the reason the actor gives if the lease closes
// the database. The supervisor learns when the lease leaves its renewal
// batch.
func (a *repoActor) stepLease(ctx actor.Context, ev cluster.Event, why closeWhy) {
	l := a.lease
	renewed := l.h.Renews()
	h, acts := cluster.Step(l.h, ev, time.Now())
	l.h = h
	if renewed && !h.Renews() {
		ctx.Send(ctx.Parent(), &leaseChanged{key: a.key, pid: ctx.Self(), renews: false})
	}
	for _, act := range acts {
		switch act.Kind {
		case cluster.SendRelease:
			a.sendRelease()
		case cluster.WakeAt:
			self, root := ctx.Self(), a.node.system.Root
			l.drain = time.AfterFunc(time.Until(act.At), func() { root.Send(self, &drainTick{}) })
		case cluster.CloseDB:
			if onLeaseClosed(ev.Kind, a.sessions) == lingerThenClose {
				a.lingering = true
				a.stopHooks() // the next owner delivers
				ctx.Send(ctx.Parent(), &leaseChanged{key: a.key, pid: ctx.Self(), renews: false, released: true})
				a.holdEntry()
				continue
			}
			a.goIdle(ctx, why)
		case cluster.OpenDB:
			if a.repo == nil && a.openErr == nil {
				a.open()
				a.wakeHooks(ctx)
			}
		default:
			// Respond503 and ForwardTo answer a claim, which is decided
			// before a repo actor exists (Node.apply).
			a.node.log.Error("lease action a repo actor cannot carry out", zap.Stringer("repo", a.key),
				zap.Stringer("event", ev.Kind), zap.Stringer("action", act.Kind))
		}
	}
}

// holdEntry renews the entry once when the drain ended with sessions still
// running (a push forwarded here late in the drain): an entry lapsing
// under them would let another node open the repository and fence their
// commit. Closing after them (whyLingered) releases it again.
func (a *repoActor) holdEntry() {
	leader, self, log, key, session := a.node.cl.leader, a.node.cl.cfg.Self, a.node.log, a.key, a.node.cl.session.Load()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cluster.RenewEvery)
		defer cancel()
		r, err := leader.Renew(ctx, cluster.RenewLeases{Node: self, Session: session, Repos: []names.Repo{key}})
		if err == nil && len(r.Declined) > 0 {
			err = errors.New("renewal declined")
		}
		if err != nil {
			// A new owner may then fence the running sessions' commits.
			log.Warn("hold the entry of a repository with sessions after its drain", zap.Stringer("repo", key), zap.Error(err))
		}
	}()
}

// sendRelease tells the leader the lease is being let go (the entry is
// shortened to the drain). Off the actor: the drain already bounds what
// happens if the leader is away; Node.Drain waits for it to be sent.
func (a *repoActor) sendRelease() {
	leader, self, log, key := a.node.cl.leader, a.node.cl.cfg.Self, a.node.log, a.key
	a.node.cl.releases.Add(1)
	go func() {
		defer a.node.cl.releases.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cluster.RenewEvery)
		defer cancel()
		if _, err := leader.Release(ctx, cluster.ReleaseLease{Node: self, Repo: key}); err != nil {
			// The entry then lapses at its TTL instead of the drain.
			log.Warn("release lease", zap.Stringer("repo", key), zap.Error(err))
		}
	}()
}

// open opens the repository's database; a missing repository is remembered
// as openErr (creating nothing) and reported to every request.
func (a *repoActor) open() {
	ctx, cancel := context.WithTimeout(context.Background(), a.node.cfg.OpenTimeout)
	defer cancel()
	start := time.Now()
	r, err := repo.Open(ctx, a.node.cfg.Deps, a.key)
	if err != nil {
		a.openErr = err
		return
	}
	a.repo = r
	a.node.metrics.openRepos.Inc()
	a.node.metrics.openLatency.Observe(time.Since(start).Seconds())
}

// ready reports whether the actor can serve a request, answering it
// otherwise: with the open error (and stopping), or errRetry when closing
// or when the node's ServeLease no longer covers the lease (the node did
// not renew its session for the lease's length: another node may be
// granted the repository by now). The lease then ends here, and the
// request routes again: a claim, which waits for the leader.
func (a *repoActor) ready(ctx actor.Context) bool {
	if a.lease != nil && !a.closing && !a.node.cl.serves(a.lease.session, time.Now()) {
		a.node.log.Warn("session not renewed for the serve lease's length; closing repository",
			zap.Stringer("repo", a.key), zap.Uint64("session", a.lease.session))
		a.node.metrics.leaseEnded.Inc()
		a.stepLease(ctx, cluster.Event{Kind: cluster.EvRenewDeclined}, whyLeaseEnded)
		ctx.Respond(&errRetry{})
		return false
	}
	switch onRequest(a.closing, a.openErr) {
	case retryElsewhere:
		ctx.Respond(&errRetry{})
		return false
	case failOpen:
		ctx.Respond(&failed{err: a.openErr})
		a.goIdle(ctx, whyOpenFailed)
		return false
	}
	return true
}

// endDueDrain ends a drain whose end (DrainUntil) has passed by this
// node's clock, when the leader may grant the repository to another node,
// even if the drain's timer message is still queued behind others: a
// session asked for after it must not start here (it would read a state
// the next owner may already have moved past).
func (a *repoActor) endDueDrain(ctx actor.Context) {
	if a.lease != nil {
		a.stepLease(ctx, cluster.Event{Kind: cluster.EvTick}, whyLeaseEnded)
	}
}

// fail answers a request with err; a fenced database stops the actor.
func (a *repoActor) fail(ctx actor.Context, err error) {
	ctx.Respond(&failed{err: err})
	if errors.Is(err, refdb.ErrFenced) {
		a.fenced(ctx)
	}
}

func (a *repoActor) fenced(ctx actor.Context) {
	a.node.log.Error("repository database fenced by another writer; closing it",
		zap.Stringer("repo", a.key))
	a.node.metrics.fenced.Inc()
	if a.lease != nil {
		a.stepLease(ctx, cluster.Event{Kind: cluster.EvFenced}, whyFenced)
	}
	a.goIdle(ctx, whyFenced)
}

// lifecycleMessage reports whether m is protoactor's own (start, stop,
// restart), which a closing actor still handles.
func lifecycleMessage(m any) bool {
	switch m.(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return true
	}
	return false
}

// goIdle tells the supervisor first (so new requests spawn a fresh actor),
// then closes the database; the supervisor stops the actor once it has
// forgotten it, so no request it handed over is dropped. The lease is
// released when nothing else will (releaseOnClose).
func (a *repoActor) goIdle(ctx actor.Context, why closeWhy) {
	if a.closing {
		return
	}
	a.closing = true
	a.node.log.Debug("closing repository", zap.Stringer("repo", a.key), zap.Stringer("why", why))
	if releaseOnClose(why, a.life().lease) {
		a.sendRelease()
	}
	ctx.Send(ctx.Parent(), &idle{key: a.key, pid: ctx.Self(), why: why})
	a.closeDB()
}

func (a *repoActor) closeDB() {
	a.stopHooks()
	if a.repo == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.node.cfg.OpenTimeout)
	defer cancel()
	if err := a.repo.Close(ctx); err != nil && !errors.Is(err, refdb.ErrFenced) {
		a.node.log.Warn("close repository", zap.Stringer("repo", a.key), zap.Error(err))
	}
	a.repo = nil
	a.node.metrics.openRepos.Dec()
}

// errPanic reports a write that panicked inside the repo actor.
var errPanic = errors.New("internal error: repository write panicked")

// guard runs fn, turning a panic into errPanic plus the panic value.
func guard(fn func() error) (panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked, err = p, errPanic
		}
	}()
	return nil, fn()
}
