package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/refdb"
)

// leaderCommitTimeout bounds one persisted decision of the leader.
const leaderCommitTimeout = 5 * time.Second

// Messages to the leader actor: cluster.ClaimLease, cluster.RenewLeases,
// cluster.ReleaseLease and cluster.ForceGrantLease (the same values other nodes send
// in a peer envelope), and the leader node's own below; each is answered
// with a *leaderReply.
type (
	// leaderHandOver: the draining leader node closed repos; move those
	// still naming it to live nodes (cluster.Map.HandOver).
	leaderHandOver struct{ repos []string }
	leaderReply    struct {
		d      cluster.Decision
		renew  cluster.LeasesRenewed
		handed []cluster.Decision // leaderHandOver
		err    error
	}
)

// leaderActor is the single writer of the ownership map: it applies the
// pure decisions of cluster.Map and persists each with one refdb Commit
// before answering. A failed commit discards the in-memory map (it may
// hold the unpersisted decision) and reloads it from the database; a
// fenced database (another leader process opened it) stops the actor, and
// every later request then fails as unreachable.
type leaderActor struct {
	node *Node
	db   *refdb.DB
	m    *cluster.Map

	// Placement: liveness heard by this actor, or cfg.Live when set.
	steer    bool
	liveness *cluster.Liveness
	live     func() cluster.LiveSet
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
	m, err := loadMap(db.View, cfg.Timings)
	if err != nil {
		db.Close(ctx)
		return nil, nil, err
	}
	props := actor.PropsFromProducer(func() actor.Actor {
		a := &leaderActor{node: n, db: db, m: m, steer: cfg.Steer.steers(), live: cfg.Live,
			liveness: cluster.NewLiveness(cfg.Self, cfg.Timings.TTL, cfg.Weights, time.Now())}
		if a.live == nil {
			a.live = func() cluster.LiveSet { return a.liveness.Live(time.Now()) }
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
// map's decisions), with the sessions and the floor loaded. The entries
// stay in the database's state, not copied (cluster.NewMapOver), but every
// one is decoded once here: a corrupt entry fails the load, as granting
// from a map missing an entry could reuse epochs.
func loadMap(view func() *refdb.View, t cluster.Timings) (*cluster.Map, error) {
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
		var s cluster.Session
		if err := s.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("load ownership map: session of %s: %w", node, err)
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
	now := time.Now()
	var r leaderReply
	switch m := ctx.Message().(type) {
	case *actor.Stopping:
		cctx, cancel := context.WithTimeout(context.Background(), leaderCommitTimeout)
		defer cancel()
		if err := a.db.Close(cctx); err != nil && !errors.Is(err, refdb.ErrFenced) {
			a.node.log.Warn("close ownership map", zap.Error(err))
		}
		return
	case *cluster.ClaimLease:
		a.liveness.Heard(m.Node, now)
		var live cluster.LiveSet
		opts := a.liveness.Options(a.steer, now)
		if opts.Steer {
			live = a.live()
		}
		r.d, r.err = a.m.Claim(m.Repo, m.Node, now, live, opts)
		if r.err == nil {
			r.err = a.persist(ctx, r.d)
		}
		if r.err == nil && r.d.Outcome == cluster.Granted {
			a.node.metrics.grants.Inc()
		}
	case *cluster.ReleaseLease:
		a.liveness.Left(m.Node)
		r.d, r.err = a.m.Release(m.Node, m.Repo, now)
		if r.err == nil {
			r.err = a.persist(ctx, r.d)
		}
	case *cluster.ForceGrantLease:
		a.liveness.Heard(m.Requester, now)
		r.d, r.err = a.m.ForceGrant(m.Repo, m.Requester, m.Dead, now)
		if r.err == nil && r.d.Outcome == cluster.Granted {
			a.liveness.Left(m.Dead)
		}
		if r.err == nil {
			r.err = a.persist(ctx, r.d)
		}
		if r.err == nil && r.d.Outcome == cluster.Granted {
			a.node.metrics.forceGrants.Inc()
		}
	case *leaderHandOver:
		self := a.node.cl.cfg.Self
		a.liveness.Left(self)
		r.handed = a.m.HandOver(self, m.repos, a.live(), now)
		repos := make([]string, len(r.handed))
		for i, d := range r.handed {
			repos[i] = d.Repo
		}
		if r.err = a.persistEntries(ctx, repos); r.err != nil {
			r.handed = nil
		}
	case *cluster.RenewLeases:
		r.renew, r.err = a.heartbeat(ctx, m, now)
	case *leaderPrune:
		r = a.prune(ctx, m, now)
	default:
		return
	}
	ctx.Respond(&r)
}

// heartbeat opens or renews a node's session (cluster.Map.Heartbeat):
// one write of its session record, however many entries are bound to it,
// plus the entries of the repositories it listed.
func (a *leaderActor) heartbeat(ctx actor.Context, m *cluster.RenewLeases, now time.Time) (cluster.LeasesRenewed, error) {
	a.liveness.Heard(m.Node, now)
	h, err := a.m.Heartbeat(*m, now)
	if err != nil {
		return cluster.LeasesRenewed{}, err
	}
	var txn refdb.Txn
	if h.WriteSession {
		s, _ := a.m.Session(m.Node)
		op, err := sessionOp(m.Node, s)
		if err != nil {
			return cluster.LeasesRenewed{}, err
		}
		txn = append(txn, op)
	}
	if err := a.persistEntries(ctx, h.Reply.Renewed, txn...); err != nil {
		return cluster.LeasesRenewed{}, err
	}
	a.node.metrics.renewals.Add(float64(len(h.Reply.Renewed)))
	return h.Reply, nil
}

func sessionOp(node string, s cluster.Session) (refdb.Op, error) {
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

// persist writes d's entry if the decision changed it.
func (a *leaderActor) persist(ctx actor.Context, d cluster.Decision) error {
	if !d.Write {
		return nil
	}
	op, err := entryOp(d.Repo, d.Entry)
	if err == nil {
		err = a.commit(ctx, refdb.Txn{op})
	}
	if err != nil {
		a.reload()
	}
	return err
}

// persistEntries writes the map's entries of repos, after the ops in
// also, in one commit; a failure reloads the map (it holds the
// unpersisted decisions).
func (a *leaderActor) persistEntries(ctx actor.Context, repos []string, also ...refdb.Op) error {
	txn := append(make(refdb.Txn, 0, len(repos)+len(also)), also...)
	var err error
	for _, repo := range repos {
		e, _ := a.m.Get(repo)
		var op refdb.Op
		if op, err = entryOp(repo, e); err != nil {
			break
		}
		txn = append(txn, op)
	}
	if err == nil {
		err = a.commit(ctx, txn)
	}
	if err != nil {
		a.reload()
	}
	return err
}

func entryOp(repo string, e cluster.Entry) (refdb.Op, error) {
	key, err := cluster.Key(repo)
	if err != nil {
		return refdb.Op{}, err
	}
	b, err := e.MarshalBinary()
	if err != nil {
		return refdb.Op{}, fmt.Errorf("entry of %s: %w", repo, err)
	}
	return refdb.Set(key, b), nil
}

func (a *leaderActor) commit(ctx actor.Context, txn refdb.Txn) error {
	if len(txn) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.Background(), leaderCommitTimeout)
	defer cancel()
	_, err := a.db.Commit(cctx, txn)
	if errors.Is(err, refdb.ErrFenced) {
		a.node.log.Error("ownership map fenced by another leader; stopping the leader actor")
		ctx.Stop(ctx.Self())
	}
	if err != nil {
		return fmt.Errorf("persist ownership map: %w", err)
	}
	return nil
}

// viewBase reads a Map's entries from a refdb view (the current one at
// each call). An entry that does not decode reads as absent; loadMap
// checked them all, and only the leader writes them.
type viewBase func() *refdb.View

func (b viewBase) Get(repo string) (cluster.Entry, bool) {
	key, err := cluster.Key(repo)
	if err != nil {
		return cluster.Entry{}, false
	}
	v, ok := b().Get(key)
	if !ok {
		return cluster.Entry{}, false
	}
	var e cluster.Entry
	return e, e.UnmarshalBinary(v) == nil
}

func (b viewBase) Range(yield func(repo string, e cluster.Entry) bool) {
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
	m, err := loadMap(a.db.View, a.m.Timings())
	if err != nil {
		// The view only holds what this writer committed, so this means a
		// bug; keep the old map rather than serving from nothing.
		a.node.log.Error("reload ownership map", zap.Error(err))
		return
	}
	a.m = m
}

// localLeader is the leader node's cluster.LeaderService: the messages go
// to the leader actor.
// Every failure, including a persist failure, wraps ErrLeaderUnreachable:
// for the caller the leader could not decide.
type localLeader struct {
	n   *Node
	pid *actor.PID
}

func (l *localLeader) ask(ctx context.Context, msg any) (*leaderReply, error) {
	v, err := l.n.request(ctx, l.pid, msg, leaderCommitTimeout+time.Second)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLeaderUnreachable, err)
	}
	r := v.(*leaderReply)
	if r.err != nil {
		if errors.Is(r.err, cluster.ErrInvalidName) {
			return nil, r.err
		}
		return nil, fmt.Errorf("%w: %w", ErrLeaderUnreachable, r.err)
	}
	return r, nil
}

func (l *localLeader) Claim(ctx context.Context, m cluster.ClaimLease) (cluster.Decision, error) {
	r, err := l.ask(ctx, &m)
	if err != nil {
		return cluster.Decision{}, err
	}
	return r.d, nil
}

func (l *localLeader) Renew(ctx context.Context, m cluster.RenewLeases) (cluster.LeasesRenewed, error) {
	r, err := l.ask(ctx, &m)
	if err != nil {
		return cluster.LeasesRenewed{}, err
	}
	return r.renew, nil
}

func (l *localLeader) Release(ctx context.Context, m cluster.ReleaseLease) (cluster.Decision, error) {
	r, err := l.ask(ctx, &m)
	if err != nil {
		return cluster.Decision{}, err
	}
	return r.d, nil
}

func (l *localLeader) ForceGrant(ctx context.Context, m cluster.ForceGrantLease) (cluster.Decision, error) {
	r, err := l.ask(ctx, &m)
	if err != nil {
		return cluster.Decision{}, err
	}
	return r.d, nil
}

// handOver moves the repositories the leader node released in its drain
// to live nodes. Best effort: what is not handed over is claimed as
// before, the claim waiting out the leader's restart.
func (l *localLeader) handOver(ctx context.Context, repos []string) {
	r, err := l.ask(ctx, &leaderHandOver{repos: repos})
	if err != nil {
		l.n.log.Warn("hand over the leader's repositories", zap.Error(err))
		return
	}
	for _, d := range r.handed {
		l.n.log.Info("handed over repository", zap.String("repo", d.Repo), zap.String("to", d.Owner), zap.Uint64("epoch", d.Entry.Epoch))
	}
}
