package actors

// Store outages on the leader: while its writes fail or hang, the leader
// still acknowledges session renewals of live sessions from memory, up to
// the horizon of its last landed commit (cluster.Horizon), so that the
// nodes keep serving their warm repositories; everything else still needs
// a durable write. The acknowledged renewals (cluster.Unpersisted) are put
// back into the map at each reload and persisted by the next commit, which
// also writes its own horizon for the next leader process to read
// (startLeader).

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/refdb"
)

// leaderSlowWrite is how long a batch write may take before the renewals
// waiting for it are acknowledged from memory: well within a node's
// renewal timeout (cluster.RenewEvery), well above a healthy store's
// commit.
const leaderSlowWrite = time.Second

type (
	// sessionWrite is a session record a decision writes.
	sessionWrite struct {
		node string
		s    cluster.NodeSession
	}
	// renewal is a session renewal the leader decided at at.
	renewal struct {
		node  string
		id    uint64
		at    time.Time
		repos []names.Repo // listed per-repository leases
	}
	// batchSlow: the batch write seq has taken leaderSlowWrite.
	batchSlow struct{ seq uint64 }
	// leaderDrained: the leader node drained (SIGTERM); from now on no
	// renewal is acknowledged from memory, and the horizon written says
	// so (cluster.Horizon.Floor then holds nothing for the next process).
	leaderDrained struct{}
)

// outage is the leader actor's state for store outages.
type outage struct {
	// horizon is the last landed commit's (zero: none yet).
	horizon cluster.Horizon
	// unpersisted: renewals acknowledged from memory, not yet persisted.
	unpersisted cluster.Unpersisted
	flight      flight
	seq         uint64
	// on: renewals were acknowledged from memory since the last landed
	// commit (logged once each way; the rebalancer pauses).
	on      bool
	drained bool
}

// flight is the batch write in flight.
type flight struct {
	seq      uint64
	horizon  cluster.Horizon                // what it writes
	sessions map[string]cluster.NodeSession // the session records it writes
	slow     bool                           // it took leaderSlowWrite
}

// grace is the leader's cluster.Timings.StoreGrace, zero once drained.
func (a *leaderActor) grace() time.Duration {
	if a.drained {
		return 0
	}
	return a.m.Timings().StoreGrace
}

// compose returns what a commit of batch, composed at now, writes besides
// the batch's decisions: the sessions renewed from memory (as the map
// holds them now) and the commit's horizon. It starts the flight.
func (a *leaderActor) compose(batch []*leaderWrite, now time.Time) (refdb.Txn, error) {
	a.seq++
	f := flight{seq: a.seq, horizon: cluster.HorizonAt(now, a.grace()), sessions: map[string]cluster.NodeSession{}}
	for _, w := range batch {
		if w.sess != nil {
			f.sessions[w.sess.node] = w.sess.s
		}
	}
	var txn refdb.Txn
	for node := range a.unpersisted {
		s, _ := a.m.Session(node)
		op, err := sessionOp(node, s)
		if err != nil {
			return nil, err
		}
		txn = append(txn, op)
		f.sessions[node] = s
	}
	op, err := horizonOp(f.horizon)
	if err != nil {
		return nil, err
	}
	a.flight = f
	return append(txn, op), nil
}

func horizonOp(h cluster.Horizon) (refdb.Op, error) {
	b, err := h.MarshalBinary()
	if err != nil {
		return refdb.Op{}, err
	}
	return refdb.Set(cluster.HorizonKey, b), nil
}

// loadHorizon reads the horizon the last leader process's last commit
// wrote (zero: none).
func loadHorizon(v *refdb.View) (cluster.Horizon, error) {
	var h cluster.Horizon
	b, ok := v.Get(cluster.HorizonKey)
	if !ok {
		return h, nil
	}
	if err := h.UnmarshalBinary(b); err != nil {
		return h, fmt.Errorf("load ownership map: %w", err)
	}
	return h, nil
}

// landed records the commit in flight as durable: its horizon is the
// leader's, and the renewals it persisted leave the unpersisted ones.
func (a *leaderActor) landed() {
	a.horizon = a.flight.horizon
	a.unpersisted.Persisted(a.flight.sessions)
	a.flight = flight{}
	if a.on && len(a.unpersisted) == 0 {
		a.on = false
		a.node.cl.leaderStale.Store(0)
		a.node.log.Info("ownership map persisted again: session renewals acknowledged from memory are durable")
	}
}

// slow acknowledges from memory the renewals waiting for batch write
// m.seq, still in flight after leaderSlowWrite, and from then on those
// decided while it lasts.
func (a *leaderActor) slow(m *batchSlow) {
	if m.seq != a.flight.seq || a.flight.seq == 0 {
		return
	}
	a.flight.slow = true
	for w := range a.q.Queued() {
		a.ackFromMemory(w)
	}
}

// ackFromMemory answers w, a session renewal not durable yet, if the
// horizon allows (cluster.Map.RenewUnpersisted): the renewed session
// joins the unpersisted ones, and the per-repository leases the node
// listed are declined (renewing them needs a write of their entries; the
// node closes them). w stays queued, to be persisted when its batch
// lands. It reports whether it answered.
func (a *leaderActor) ackFromMemory(w *leaderWrite) bool {
	r := w.renewal
	if r == nil || w.to == nil || w.err != nil || w.reply.err != nil || a.drained {
		return false
	}
	s, ok := a.m.RenewUnpersisted(r.node, r.id, r.at, a.horizon)
	if !ok {
		return false
	}
	a.unpersisted.Add(r.node, s)
	if !a.on {
		a.on = true
		a.node.cl.leaderStale.Store(a.horizon.Since.UnixNano())
		a.node.log.Warn(fmt.Sprintf("store unavailable: acknowledging session renewals from memory until %s", a.horizon.Until.Format(time.RFC3339)),
			zap.Time("last_commit", a.horizon.Since))
	}
	a.node.metrics.unpersisted.Inc()
	a.answer(w, &leaderReply{renew: cluster.LeasesRenewed{Session: r.id, Declined: r.repos}})
	w.to, w.metric = nil, nil
	return true
}

// drain is the leaderDrained decision: a commit whose horizon ends now.
func (a *leaderActor) drain(w *leaderWrite, now time.Time) {
	a.drained = true
	op, err := horizonOp(cluster.HorizonAt(now, 0))
	if err != nil {
		w.err = err
		return
	}
	w.txn = refdb.Txn{op}
}

// drained tells the leader actor the node drained. Best effort: without
// it the next leader process holds the sessions up to this one's horizon.
func (l *localLeader) drained(ctx context.Context) {
	if _, err := l.answer(askLeader(ctx, l.n, l.pid, &leaderDrained{})); err != nil {
		l.n.log.Warn("write the drained leader's renewal horizon", zap.Error(err))
	}
}
