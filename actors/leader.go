package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/refdb"
)

// leaderCommitTimeout bounds one batch write of the leader;
// leaderAnswerTimeout bounds a request to it, which may wait for the batch
// in flight and then its own.
const (
	leaderCommitTimeout = 5 * time.Second
	leaderAnswerTimeout = 2*leaderCommitTimeout + time.Second
)

// Messages to the leader actor: cluster.ClaimLease, cluster.RenewLeases,
// cluster.ReleaseLease and cluster.ForceGrantLease (the same values other nodes send
// in a peer envelope), and the leader node's own below; each is answered
// with a *leaderReply.
type (
	// leaderHandOver: the draining leader node closed repos; move those
	// still naming it to live nodes (cluster.Map.HandOver).
	leaderHandOver struct{ repos []names.Repo }
	leaderReply    struct {
		d      cluster.Decision
		renew  cluster.LeasesRenewed
		handed []cluster.Decision // leaderHandOver
		pruned cluster.Pruned     // leaderPrune
		err    error
	}
)

// leaderActor is the single writer of the ownership map: it applies the
// pure decisions of cluster.Map in arrival order and persists them in
// batches (leaderbatch.go), answering each request once its batch is
// durable. A failed write fails its batch and every decision queued after
// it, and reloads the in-memory map (it holds those unpersisted decisions)
// from the database; a fenced database (another leader process opened
// it) stops the actor, and every later request then fails as unreachable.
// Session renewals alone are still acknowledged while the store fails,
// up to the horizon of the last landed commit (leaderoutage.go).
type leaderActor struct {
	node *Node
	db   *refdb.DB
	m    *cluster.Map
	q    cluster.WriteQueue[*leaderWrite]
	outage

	// Placement: liveness heard by this actor, or cfg.Live when set.
	steer    bool
	liveness *cluster.Liveness
	live     func() cluster.LiveSet
	// rebal moves warm repositories toward their placement; nil: off.
	rebal *cluster.Rebalancer
	scans leaderScans
}

// startLeader opens (creating if needed) the map's database, loads it and
// spawns the leader actor.
func (n *Node) startLeader(cfg ClusterConfig) (*localLeader, *refdb.DB, error) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.OpenTimeout)
	defer cancel()
	db, err := refdb.Open(ctx, n.cfg.Deps.Store, OwnershipPrefix, refdb.Options{Logger: n.log})
	if err != nil {
		return nil, nil, fmt.Errorf("open ownership map: %w", err)
	}
	h, err := loadHorizon(db.View())
	if err != nil {
		db.Close(ctx)
		return nil, nil, err
	}
	// The previous leader process may have acknowledged renewals it never
	// persisted, up to its horizon: no entry bound to a session live then
	// is granted elsewhere before they have run out.
	m, err := loadMap(db.View, cfg.Timings, h, cfg.Self)
	if err != nil {
		db.Close(ctx)
		return nil, nil, err
	}
	if h.Until.After(h.Since) {
		n.log.Info("previous leader process's renewal horizon: sessions live at its last commit are held at least until the horizon plus a TTL",
			zap.Time("last_commit", h.Since), zap.Time("horizon", h.Until))
	}
	props := actor.PropsFromProducer(func() actor.Actor {
		a := &leaderActor{node: n, db: db, m: m, steer: cfg.Steer.steers(), live: cfg.Live,
			liveness: cluster.NewLiveness(cfg.Self, cfg.Timings.TTL, cfg.Weights, time.Now()),
			outage:   outage{unpersisted: cluster.Unpersisted{}}}
		if a.live == nil {
			a.live = func() cluster.LiveSet { return a.liveness.Live(time.Now()) }
		}
		if cfg.Rebalance > 0 {
			a.rebal = cluster.NewRebalancer(cluster.DefaultRebalanceLimits(cfg.Rebalance))
		}
		return a
	})
	pid, err := n.system.Root.SpawnNamed(props, "leader")
	if err != nil {
		db.Close(ctx)
		return nil, nil, fmt.Errorf("spawn leader actor: %w", err)
	}
	return &localLeader{n: n, pid: pid}, db, nil
}

// loadMap returns a Map over the ownership entries of view (the current
// one each time it is called: the leader's database, which commits the
// map's decisions), with the sessions (read as h makes them:
// cluster.Horizon.Floor; a zero h changes nothing) and the floor loaded.
// The leader node's own session, self's, is not held: the renewals of it
// acknowledged from memory went to this node's previous process, which is
// gone (rule 2 of the cluster package doc). The entries stay in the
// database's state, not copied (cluster.NewMapOver), but every one is
// decoded once here: a corrupt entry fails the load, as granting from a
// map missing an entry could reuse epochs.
func loadMap(view func() *refdb.View, t cluster.Timings, h cluster.Horizon, self string) (*cluster.Map, error) {
	v := view()
	for k, b := range v.Scan(cluster.KeyPrefix) {
		repo, err := cluster.RepoOfKey(k)
		if err != nil {
			return nil, fmt.Errorf("load ownership map: %w", err)
		}
		var e cluster.Entry
		if err := e.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("load ownership map: entry %s: %w", repo, err)
		}
	}
	m := cluster.NewMapOver(t, viewBase(view))
	for k, b := range v.Scan(cluster.SessionPrefix) {
		node, err := cluster.NodeOfSessionKey(k)
		if err != nil {
			return nil, fmt.Errorf("load ownership map: %w", err)
		}
		var s cluster.NodeSession
		if err := s.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("load ownership map: session of %s: %w", node, err)
		}
		if node != self {
			s = h.Floor(s, t.TTL)
		}
		if err := m.PutSession(node, s); err != nil {
			return nil, fmt.Errorf("load ownership map: %w", err)
		}
	}
	if err := loadFloor(v, m); err != nil {
		return nil, err
	}
	return m, nil
}

func (a *leaderActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.scans.self = ctx.Self()
		return
	case *actor.Stopping:
		a.stopping()
		return
	case *leaderScanned:
		a.scanned(m)
		return
	case *batchWritten:
		a.written(ctx, m)
		return
	case *batchSlow:
		a.slow(m)
		return
	case *flushBatch:
		a.carry(ctx, a.q.Flush(), nil)
		return
	}
	w, ok := a.decide(ctx.Message(), time.Now())
	if !ok {
		return
	}
	w.to = ctx.Sender()
	a.submit(ctx, w)
	if a.flight.slow {
		a.ackFromMemory(w)
	}
}

// decide applies the pure decision for a request to the in-memory map and
// returns it with what must be persisted before it is answered.
func (a *leaderActor) decide(msg any, now time.Time) (*leaderWrite, bool) {
	w := &leaderWrite{}
	r := &w.reply
	switch m := msg.(type) {
	case *cluster.ClaimLease:
		a.liveness.Heard(m.Node, now)
		a.due(w, m.Repo, now)
		var live cluster.LiveSet
		opts := a.liveness.Options(a.steer, now)
		if opts.Steer {
			live = a.live()
		}
		r.d, r.err = a.m.Claim(m.Repo, m.Node, now, live, opts)
		w.decided(r.d)
		if r.d.Outcome == cluster.Granted {
			w.metric, w.n = a.node.metrics.grants, 1
		}
	case *cluster.ReleaseLease:
		// A release the rebalancer asked for is no node leaving: taking
		// it out of placement would make the next round move its other
		// repositories' neighbours to their second choice.
		if a.rebal == nil || !a.rebal.Moving(m.Repo, m.Node) {
			a.liveness.Left(m.Node)
		}
		r.d, r.err = a.m.Release(m.Node, m.Repo, now)
		w.decided(r.d)
	case *cluster.ForceGrantLease:
		a.liveness.Heard(m.Requester, now)
		r.d, r.err = a.m.ForceGrant(m.Repo, m.Requester, m.Dead, now)
		if r.err == nil && r.d.Outcome == cluster.Granted {
			a.liveness.Left(m.Dead)
			w.metric, w.n = a.node.metrics.forceGrants, 1
		}
		w.decided(r.d)
	case *leaderHandOver:
		self := a.node.cl.cfg.Self
		a.liveness.Left(self)
		r.handed = a.m.HandOver(self, m.repos, a.live(), now)
		for _, d := range r.handed {
			w.decided(d)
		}
	case *cluster.RenewLeases:
		a.heartbeat(w, m, now)
	case *leaderPrune:
		a.prune(w, m, now)
	case *leaderRebalance:
		a.rebalance(w, now)
	case *leaderDrained:
		a.drain(w, now)
	default:
		return nil, false
	}
	return w, true
}

// heartbeat opens or renews a node's session (cluster.Map.Heartbeat):
// one write of its session record, however many entries are bound to it,
// plus the entries of the repositories it listed.
func (a *leaderActor) heartbeat(w *leaderWrite, m *cluster.RenewLeases, now time.Time) {
	a.liveness.Heard(m.Node, now)
	if m.Leaving {
		a.liveness.Left(m.Node)
	}
	h, err := a.m.Heartbeat(*m, now)
	if err != nil {
		w.reply.err = err
		return
	}
	w.reply.renew = h.Reply
	if a.rebal != nil && !h.Reply.SessionDeclined {
		w.reply.renew.Prewarm, w.reply.renew.Release = a.rebal.Prewarms(m.Node), a.rebal.Releases(m.Node)
	}
	if h.WriteSession {
		s, _ := a.m.Session(m.Node)
		op, err := sessionOp(m.Node, s)
		if err != nil {
			w.err = err
			return
		}
		w.txn = append(w.txn, op)
		w.sess = &sessionWrite{node: m.Node, s: s}
		if !m.Open {
			w.renewal = &renewal{node: m.Node, id: m.Session, at: now, repos: m.Repos}
		}
	}
	ops, err := a.entriesTxn(h.Reply.Renewed)
	if err != nil {
		w.err = err
		return
	}
	w.txn = append(w.txn, ops...)
	w.metric, w.n = a.node.metrics.renewals, float64(len(h.Reply.Renewed))
}

func sessionOp(node string, s cluster.NodeSession) (refdb.Op, error) {
	key, err := cluster.SessionKey(node)
	if err != nil {
		return refdb.Op{}, err
	}
	b, err := s.MarshalBinary()
	if err != nil {
		return refdb.Op{}, fmt.Errorf("session of %s: %w", node, err)
	}
	return refdb.Set(key, b), nil
}

// entriesTxn sets the map's entries of repos.
func (a *leaderActor) entriesTxn(repos []names.Repo) (refdb.Txn, error) {
	txn := make(refdb.Txn, 0, len(repos))
	for _, repo := range repos {
		e, _ := a.m.Get(repo)
		op, err := entryOp(repo, e)
		if err != nil {
			return nil, err
		}
		txn = append(txn, op)
	}
	return txn, nil
}

func entryOp(repo names.Repo, e cluster.Entry) (refdb.Op, error) {
	b, err := e.MarshalBinary()
	if err != nil {
		return refdb.Op{}, fmt.Errorf("entry of %s: %w", repo, err)
	}
	return refdb.Set(cluster.Key(repo), b), nil
}

// viewBase reads a Map's entries from a refdb view (the current one at
// each call). An entry that does not decode reads as absent; loadMap
// checked them all, and only the leader writes them.
type viewBase func() *refdb.View

// Fixed pins the view current now: a refdb view is immutable.
func (b viewBase) Fixed() cluster.Base {
	v := b()
	return viewBase(func() *refdb.View { return v })
}

func (b viewBase) Get(repo names.Repo) (cluster.Entry, bool) {
	v, ok := b().Get(cluster.Key(repo))
	if !ok {
		return cluster.Entry{}, false
	}
	var e cluster.Entry
	return e, e.UnmarshalBinary(v) == nil
}

func (b viewBase) Range(yield func(repo names.Repo, e cluster.Entry) bool) {
	for k, v := range b().Scan(cluster.KeyPrefix) {
		repo, err := cluster.RepoOfKey(k)
		var e cluster.Entry
		if err != nil || e.UnmarshalBinary(v) != nil {
			continue
		}
		if !yield(repo, e) {
			return
		}
	}
}

// reload replaces the map with the database's committed state.
func (a *leaderActor) reload() {
	m, err := loadMap(a.db.View, a.m.Timings(), cluster.Horizon{}, "")
	if err != nil {
		// The view only holds what this writer committed, so this means a
		// bug; keep the old map rather than serving from nothing.
		a.node.log.Error("reload ownership map", zap.Error(err))
		return
	}
	a.m = m
	a.unpersisted.Reapply(m)
}

// localLeader is the leader node's cluster.LeaderService: the messages go
// to the leader actor.
// Every failure, including a persist failure, wraps ErrLeaderUnreachable:
// for the caller the leader could not decide.
type localLeader struct {
	n   *Node
	pid *actor.PID
}

// leaderMessage is the leader actor's mailbox: every request it answers,
// each with a *leaderReply.
type leaderMessage interface {
	*cluster.ClaimLease | *cluster.RenewLeases | *cluster.ReleaseLease | *cluster.ForceGrantLease |
		*leaderHandOver | *leaderPrune | *leaderDrained
}

// askLeader sends msg to the leader actor at pid and waits for its reply.
func askLeader[M leaderMessage](ctx context.Context, n *Node, pid *actor.PID, msg M) (*leaderReply, error) {
	return await[*leaderReply](ctx, n, pid, msg, leaderAnswerTimeout)
}

// answer turns the leader actor's reply into the LeaderService's error.
func (l *localLeader) answer(r *leaderReply, err error) (*leaderReply, error) {
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLeaderUnreachable, err)
	}
	if r.err != nil {
		if errors.Is(r.err, cluster.ErrInvalidName) {
			return nil, r.err
		}
		return nil, fmt.Errorf("%w: %w", ErrLeaderUnreachable, r.err)
	}
	return r, nil
}

func (l *localLeader) Claim(ctx context.Context, m cluster.ClaimLease) (cluster.Decision, error) {
	r, err := l.answer(askLeader(ctx, l.n, l.pid, &m))
	if err != nil {
		return cluster.Decision{}, err
	}
	return r.d, nil
}

func (l *localLeader) Renew(ctx context.Context, m cluster.RenewLeases) (cluster.LeasesRenewed, error) {
	r, err := l.answer(askLeader(ctx, l.n, l.pid, &m))
	if err != nil {
		return cluster.LeasesRenewed{}, err
	}
	return r.renew, nil
}

func (l *localLeader) Release(ctx context.Context, m cluster.ReleaseLease) (cluster.Decision, error) {
	r, err := l.answer(askLeader(ctx, l.n, l.pid, &m))
	if err != nil {
		return cluster.Decision{}, err
	}
	return r.d, nil
}

func (l *localLeader) ForceGrant(ctx context.Context, m cluster.ForceGrantLease) (cluster.Decision, error) {
	r, err := l.answer(askLeader(ctx, l.n, l.pid, &m))
	if err != nil {
		return cluster.Decision{}, err
	}
	return r.d, nil
}

// handOver moves the repositories the leader node released in its drain
// to live nodes. Best effort: what is not handed over is claimed as
// before, the claim waiting out the leader's restart.
func (l *localLeader) handOver(ctx context.Context, repos []names.Repo) {
	r, err := l.answer(askLeader(ctx, l.n, l.pid, &leaderHandOver{repos: repos}))
	if err != nil {
		l.n.log.Warn("hand over the leader's repositories", zap.Error(err))
		return
	}
	for _, d := range r.handed {
		l.n.log.Info("handed over repository", zap.Stringer("repo", d.Repo), zap.String("to", d.Owner), zap.Uint64("epoch", d.Entry.Epoch))
	}
}
