package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/storage/repo"
)

// Webhooks: a repository's hooks and outbox are in its database
// (storage/outbox), changed only through its repo actor like every other
// write. The repo actor runs the delivery of its outbox while it is open:
// it starts a worker (Config.Hooks, transport/product/hooks) when it opens a
// database with deliveries waiting or commits new ones, and stops it when
// it closes, so a new owner after a crash, drain or hand-over resumes
// from the outbox when it opens the repository. An open repository with
// deliveries waiting is not closed for idleness (onEvict).

// HookRunner runs webhook deliveries; transport/product/hooks implements it.
type HookRunner interface {
	// Start begins delivering q's outbox in the background.
	Start(q *HookQueue) HookWorker
}

// HookWorker is one repository's delivery in the background.
type HookWorker interface {
	// Wake says new deliveries may be waiting; it never blocks.
	Wake()
	// Stop ends the delivery (the repository closes) without waiting for
	// it: an attempt in flight is abandoned, and its delivery, still
	// waiting in the outbox, is sent again by whoever opens the
	// repository next.
	Stop()
}

// Messages of the webhooks to a repo actor.
type (
	// readOutbox asks for the outbox as of the last commit; *outboxRead
	// answers.
	readOutbox struct{ toRepo[*outboxRead] }
	outboxRead struct{ view outbox.View }
	// finishDeliveries records the worker's results
	// (repo.FinishDeliveries); *written answers.
	finishDeliveries struct {
		toRepo[*written]
		results []outbox.Result
	}
	// addHook adds a hook; *written answers.
	addHook struct {
		toRepo[*written]
		hook outbox.Hook
	}
	// removeHook removes a hook; *hookRemoved answers.
	removeHook struct {
		toRepo[*hookRemoved]
		id string
	}
	hookRemoved struct {
		hook outbox.Hook
		err  error
	}
	// redeliver queues a delivery again; *redelivered answers.
	redeliver struct {
		toRepo[*redelivered]
		id string
	}
	redelivered struct {
		d   outbox.Delivery
		err error
	}
	// sweepHooks is the sweep's visit (repo.SweepMarkers): deliveries
	// waiting are being sent (the actor opened the repository to answer),
	// or the markers are removed; *written answers.
	sweepHooks struct{ toRepo[*written] }
)

// receiveHooks handles the webhook messages and reports whether msg was
// one.
func (a *repoActor) receiveHooks(ctx actor.Context, msg repoMessage) bool {
	switch m := msg.(type) {
	case *readOutbox:
		if a.ready(ctx) {
			ctx.Respond(&outboxRead{view: a.repo.Outbox()})
		}
	case *finishDeliveries:
		if a.ready(ctx) {
			a.write(ctx, func(c context.Context) error { return a.repo.FinishDeliveries(c, m.results) }, writtenReply)
		}
	case *addHook:
		if a.ready(ctx) {
			a.write(ctx, func(c context.Context) error { return a.repo.AddHook(c, m.hook) }, writtenReply)
		}
	case *removeHook:
		if a.ready(ctx) {
			var h outbox.Hook
			a.write(ctx, func(c context.Context) (err error) {
				h, err = a.repo.RemoveHook(c, m.id)
				return err
			}, func(err error) repoReply { return &hookRemoved{hook: h, err: err} })
		}
	case *sweepHooks:
		if a.ready(ctx) {
			a.write(ctx, func(c context.Context) error {
				_, err := a.repo.SweepMarkers(c)
				return err
			}, writtenReply)
			a.wakeHooks(ctx)
		}
	case *redeliver:
		if a.ready(ctx) {
			var d outbox.Delivery
			a.write(ctx, func(c context.Context) (err error) {
				d, err = a.repo.Redeliver(c, m.id)
				return err
			}, func(err error) repoReply { return &redelivered{d: d, err: err} })
			a.wakeHooks(ctx)
		}
	default:
		return false
	}
	return true
}

// wakeHooks starts the delivery worker when deliveries wait and none
// runs, or wakes the one running: after the database opened, and after
// a write that may have queued events.
func (a *repoActor) wakeHooks(ctx actor.Context) {
	if a.repo == nil || a.closing || a.lingering || a.node.cfg.Hooks == nil {
		return
	}
	if a.hooks != nil {
		a.hooks.Wake()
		return
	}
	if !a.deliveriesWaiting() {
		return
	}
	a.hooks = a.node.cfg.Hooks.Start(&HookQueue{node: a.node, pid: ctx.Self(), Repo: a.key})
}

// deliveriesWaiting reports whether the open repository's outbox has
// deliveries waiting.
func (a *repoActor) deliveriesWaiting() bool {
	if a.repo == nil {
		return false
	}
	n, _, err := a.repo.Outbox().Pending()
	if err != nil {
		a.node.log.Warn("read the webhook outbox", zap.Stringer("repo", a.key), zap.Error(err))
	}
	return n > 0
}

// stopHooks stops the delivery worker (the database closes).
func (a *repoActor) stopHooks() {
	if a.hooks != nil {
		a.hooks.Stop()
		a.hooks = nil
	}
}

// HookQueue is a delivery worker's handle on one open repository: its
// reads and writes go to that repository's actor, and fail (ErrBusy) once
// it has closed. Each returns when ctx ends (the worker stops) without
// waiting for an actor that will not answer.
type HookQueue struct {
	node *Node
	pid  *actor.PID
	Repo names.Repo
}

// queueRequest sends msg to q's actor and waits for its answer, ctx or
// the call timeout; abandoned is run on an answer that arrives after ctx
// ended.
func queueRequest[R repoReply](ctx context.Context, q *HookQueue, msg repoRequest[R], timeout time.Duration, abandoned func(R)) (R, error) {
	type answer struct {
		v   R
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		v, err := askRepoActor(ctx, q.node, q.pid, msg, timeout)
		ch <- answer{v, err}
	}()
	select {
	case a := <-ch:
		return a.v, a.err
	case <-ctx.Done():
		if abandoned != nil {
			go func() {
				if a := <-ch; a.err == nil {
					abandoned(a.v)
				}
			}()
		}
		var zero R
		return zero, ctx.Err()
	}
}

// Outbox returns the outbox as of the repository's last commit.
func (q *HookQueue) Outbox(ctx context.Context) (outbox.View, error) {
	r, err := queueRequest(ctx, q, &readOutbox{}, q.node.cfg.CallTimeout, nil)
	if err != nil {
		return outbox.View{}, err
	}
	return r.view, nil
}

// Finish records attempts' results in the outbox.
func (q *HookQueue) Finish(ctx context.Context, results []outbox.Result) error {
	r, err := queueRequest(ctx, q, &finishDeliveries{results: results}, q.node.cfg.CallTimeout, nil)
	if err != nil {
		return err
	}
	return r.err
}

// Snapshot takes a read view of the repository (for the commits a push
// event lists); call release when done with it.
func (q *HookQueue) Snapshot(ctx context.Context) (*repo.Snapshot, func(), error) {
	a, err := queueRequest(ctx, q, &acquire{}, q.node.cfg.OpenTimeout, func(a *acquired) {
		// A session granted after all is handed back.
		a.snap.Close()
		q.node.system.Root.Send(q.pid, &release{})
	})
	if err != nil {
		return nil, nil, err
	}
	return a.snap, func() {
		a.snap.Close()
		q.node.system.Root.Send(q.pid, &release{})
	}, nil
}

// Log is the node's logger.
func (q *HookQueue) Log() *zap.Logger { return q.node.log }

// Outbox returns key's webhooks and outbox as its writer holds
// them.
func (n *Node) Outbox(ctx context.Context, key names.Repo) (outbox.View, error) {
	r, err := askRepo(ctx, n, key, &readOutbox{})
	if err != nil {
		return outbox.View{}, err
	}
	return r.view, nil
}

// AddHook adds a webhook to key.
func (n *Node) AddHook(ctx context.Context, key names.Repo, h outbox.Hook) error {
	r, err := askRepo(ctx, n, key, &addHook{hook: h})
	if err != nil {
		return err
	}
	return r.err
}

// RemoveHook removes webhook id of key and returns it.
func (n *Node) RemoveHook(ctx context.Context, key names.Repo, id string) (outbox.Hook, error) {
	r, err := askRepo(ctx, n, key, &removeHook{id: id})
	if err != nil {
		return outbox.Hook{}, err
	}
	return r.hook, r.err
}

// Redeliver queues delivery id of key again.
func (n *Node) Redeliver(ctx context.Context, key names.Repo, id string) (outbox.Delivery, error) {
	r, err := askRepo(ctx, n, key, &redeliver{id: id})
	if err != nil {
		return outbox.Delivery{}, err
	}
	return r.d, r.err
}

// SweepHooks visits key for the sweep of pending-delivery
// markers (transport/product/hooks): it opens the repository here (claiming it
// in cluster mode, a *NotOwnerError when another node holds it), which
// resumes its waiting deliveries, or removes its markers when none wait.
func (n *Node) SweepHooks(ctx context.Context, key names.Repo) error {
	r, err := askRepo(ctx, n, key, &sweepHooks{})
	if err != nil {
		return err
	}
	return r.err
}

// by is the identity a write is made by: the caller's in ctx, which the
// repo actor hands to the repository for its events.
func by(ctx context.Context) auth.Identity { return auth.IdentityFrom(ctx) }
