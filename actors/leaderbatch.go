package actors

// Group commit of the leader's decisions: the leader actor decides every
// request at once on its in-memory map and persists the decisions in
// batches, one write in flight at a time, answering each requester once
// its batch is durable (cluster.WriteQueue says when). The write runs on
// its own goroutine, so the actor keeps deciding while it is in flight.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/refdb"
)

// leaderWrite is one decided request waiting for its batch.
type leaderWrite struct {
	to    *actor.PID // the requester
	reply leaderReply
	// txn persists the decision; empty when nothing changed.
	txn refdb.Txn
	// err: the decision changed the map but could not be encoded. Its
	// batch then fails without a write, which reloads the map once the
	// batch before it has settled.
	err error
	// metric counts n once the decision is durable (nil: none).
	metric prometheus.Counter
	n      float64
	// sess is the session record txn writes (an open or a renewal), and
	// renewal what the leader needs to acknowledge a renewal from memory
	// (leaderoutage.go); nil otherwise.
	sess    *sessionWrite
	renewal *renewal
}

// decided adds decision d's entry to w's transaction if d changed it.
func (w *leaderWrite) decided(d cluster.Decision) {
	if w.reply.err != nil || w.err != nil || !d.Write {
		return
	}
	op, err := entryOp(d.Repo, d.Entry)
	if err != nil {
		w.err = err
		return
	}
	w.txn = append(w.txn, op)
}

// writes reports whether w must go through a batch write.
func (w *leaderWrite) writes() bool { return len(w.txn) > 0 || w.err != nil }

type (
	// batchWritten reports the end of the write of the batch in flight,
	// which took took.
	batchWritten struct {
		err  error
		took time.Duration
		// local: the batch failed before its write (a decision that
		// could not be encoded), not in the store.
		local bool
	}
	// flushBatch ends a hold of the next batch (cluster.QueueStep.HoldFor).
	flushBatch struct{}
)

// submit queues a decided request and carries out the queue's step.
func (a *leaderActor) submit(ctx actor.Context, w *leaderWrite) {
	a.carry(ctx, a.q.Add(w, w.writes()), nil)
}

// written ends the batch in flight. A failed batch reloads the map: it
// may hold that batch's decisions and those made on top of them, which
// the queue fails with it, except the session renewals it may still
// acknowledge from memory when the store failed (leaderoutage.go).
func (a *leaderActor) written(ctx actor.Context, m *batchWritten) {
	err := m.err
	if err == nil {
		a.landed()
		a.carry(ctx, a.q.Done(true, m.took), nil)
		return
	}
	a.flight = flight{}
	fenced := errors.Is(err, refdb.ErrFenced)
	if fenced {
		a.node.log.Error("ownership map fenced by another leader; stopping the leader actor")
		ctx.Stop(ctx.Self())
	}
	a.reload()
	step := a.q.Done(false, m.took)
	failed := 0
	for _, w := range step.Fail {
		if !fenced && !m.local {
			a.ackFromMemory(w)
		}
		if w.to != nil {
			failed++
		}
	}
	log := a.node.log.Warn
	if failed == 0 {
		// Renewals answered from memory: said once per outage
		// (ackFromMemory), not at every batch.
		log = a.node.log.Debug
	}
	log("ownership map write failed; failing the requests of its batch and those queued on it, map reloaded",
		zap.Int("requests", failed), zap.Int("sessions_renewed_from_memory", len(a.unpersisted)), zap.Error(err))
	a.carry(ctx, step, fmt.Errorf("persist ownership map: %w", err))
}

// carry answers, fails and starts writing as step says.
func (a *leaderActor) carry(ctx actor.Context, step cluster.QueueStep[*leaderWrite], err error) {
	for _, w := range step.Answer {
		if w.metric != nil && w.reply.err == nil {
			w.metric.Add(w.n)
		}
		a.answer(w, &w.reply)
	}
	for _, w := range step.Fail {
		a.answer(w, &leaderReply{err: err})
	}
	if step.Write != nil {
		a.write(ctx, step.Write)
	}
	if step.HoldFor > 0 {
		self, root := ctx.Self(), a.node.system.Root
		time.AfterFunc(step.HoldFor, func() { root.Send(self, &flushBatch{}) })
	}
}

// write persists batch in one commit on its own goroutine and reports the
// outcome to the actor. The commit also persists every renewal
// acknowledged from memory so far and the horizon it starts
// (leaderoutage.go).
func (a *leaderActor) write(ctx actor.Context, batch []*leaderWrite) {
	var txn refdb.Txn
	for _, w := range batch {
		if w.err != nil {
			ctx.Send(ctx.Self(), &batchWritten{err: w.err, local: true})
			return
		}
		txn = append(txn, w.txn...)
	}
	more, err := a.compose(batch, time.Now())
	if err != nil {
		ctx.Send(ctx.Self(), &batchWritten{err: err, local: true})
		return
	}
	txn = append(txn, more...)
	self, root, db := ctx.Self(), a.node.system.Root, a.db
	if seq := a.flight.seq; a.grace() > 0 {
		time.AfterFunc(leaderSlowWrite, func() { root.Send(self, &batchSlow{seq: seq}) })
	}
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), leaderCommitTimeout)
		defer cancel()
		start := time.Now()
		_, err := db.Commit(cctx, txn)
		root.Send(self, &batchWritten{err: err, took: time.Since(start)})
	}()
}

// stopping ends the rebalancer's scan, closes the map's database and
// fails every request still waiting for a write: whether the write in
// flight lands is unknown to them, so they must not act on it.
func (a *leaderActor) stopping() {
	a.scans.stop()
	cctx, cancel := context.WithTimeout(context.Background(), leaderCommitTimeout)
	defer cancel()
	if err := a.db.Close(cctx); err != nil && !errors.Is(err, refdb.ErrFenced) {
		a.node.log.Warn("close ownership map", zap.Error(err))
	}
	for _, w := range a.q.Drop() {
		a.answer(w, &leaderReply{err: errLeaderStopped})
	}
}

func (a *leaderActor) answer(w *leaderWrite, r *leaderReply) {
	if w.to != nil {
		a.node.system.Root.Send(w.to, r)
	}
}

// errLeaderStopped fails the requests waiting when the leader stops.
var errLeaderStopped = errors.New("ownership leader stopped")
