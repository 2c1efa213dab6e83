package actors

import (
	"context"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
)

// supervisor is the node's parent of every repo actor: it spawns them on
// demand, forgets them when they close, restarts them on panic (the default
// one-for-one strategy of their props) and keeps the warm pool within
// RGIT_MAX_WARM by asking the least recently requested repos to close
// (evictions).
//
// In cluster mode a repo actor exists exactly while this node holds its
// lease: the supervisor spawns it when the leader grants the lease, and
// the actor owns the lease from then on (its holder state, epoch and drain
// timer; see repoActor). The supervisor keeps only what the renewal needs:
// every RenewEvery it renews the node's session, which renews every entry
// bound to it (cluster.NodeSession: one small write, whatever the node
// holds), and tells each child whose lease was declined: all when the
// session was, or one whose repository the node's map view shows granted
// again elsewhere (cluster.Lost), which it checks only for the entries
// that changed since the last heartbeat (heartbeatLosses).
type supervisor struct {
	node     *Node
	children map[names.Repo]*child
	// lingering are repo actors whose lease ended while sessions ran: no
	// longer the repository's actor (a new grant spawns another), still
	// open until their sessions finish. Keyed by actor id.
	lingering map[string]lingerer

	// Cluster mode only.
	renewTimer *time.Timer
	renewing   bool      // a renewal batch is in flight
	lastRenew  time.Time // when the last batch was sent
	probeTimer *time.Timer
	started    time.Time // the probes' grid: started + LeaderRetry/2 + k·LeaderRetry
	draining   bool
	drainDone  chan struct{}
	// checked is the map view the last answered heartbeat was checked
	// against, under session checkedSession; recheck are the children
	// granted since, checked at the next answer whatever the view shows.
	checked        MapMark
	checkedSession uint64
	recheck        map[names.Repo]bool
}

// lingerer is a lingering repo actor.
type lingerer struct {
	key names.Repo
	pid *actor.PID
}

type child struct {
	pid      *actor.PID
	lastUsed time.Time
	// Cluster mode: the lease's epoch and session (the supervisor records
	// every grant), whether the actor renews it (not draining), and
	// whether the map view last showed it as a per-repository lease
	// (granted before the node had a session), which the heartbeat lists.
	epoch, session  uint64
	renews, unbound bool
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.started = time.Now()
		if s.node.cl != nil {
			s.scheduleRenew(ctx)
		}
	case *actor.Stopping:
		if s.renewTimer != nil {
			s.renewTimer.Stop()
		}
		if s.probeTimer != nil {
			s.probeTimer.Stop()
		}
	case delivery:
		c, ok := s.children[m.target()]
		switch {
		case ok:
		case s.node.cl != nil:
			ctx.Respond(&notHeld{})
			return
		default:
			c = s.spawn(ctx, m.target(), nil)
		}
		c.lastUsed = time.Now()
		ctx.RequestWithCustomSender(c.pid, m.payload(), ctx.Sender())
	case *idle:
		if c, ok := s.children[m.key]; ok && c.pid.Equal(m.pid) {
			delete(s.children, m.key)
			s.dropLease(m.key)
		}
		delete(s.lingering, m.pid.Id)
		// Queued behind every request handed to it: each is answered
		// (errRetry) before the actor stops.
		ctx.Poison(m.pid)
		s.checkDrained()
	case *listOpen:
		keys := make([]names.Repo, 0, len(s.children)+len(s.lingering))
		for k := range s.children {
			keys = append(keys, k)
		}
		for _, l := range s.lingering {
			if _, dup := s.children[l.key]; !dup {
				keys = append(keys, l.key)
			}
		}
		ctx.Respond(&openKeys{keys: keys})
	case *listDraining:
		// In cluster mode a child exists from its grant until it closes,
		// and stops renewing only when its lease starts to drain.
		var keys []names.Repo
		for k, c := range s.children {
			if s.node.cl != nil && !c.renews {
				keys = append(keys, k)
			}
		}
		ctx.Respond(&openKeys{keys: keys})

	case *granted:
		s.granted(ctx, m)
	case *leaseChanged:
		if c, ok := s.children[m.key]; ok && c.pid.Equal(m.pid) {
			c.renews = m.renews
			if m.released {
				delete(s.children, m.key)
				s.dropLease(m.key)
				s.lingering[m.pid.Id] = lingerer{key: m.key, pid: m.pid}
			}
		}
	case *renewTick:
		// After Shutdown the actor may never see Stopping (system shutdown
		// does not deliver it): stop renewing, or heartbeats to the leader
		// would go on forever.
		if s.node.cl.stopped() {
			return
		}
		s.renew(ctx, false)
		s.scheduleRenew(ctx)
	case *renewNow:
		if !s.node.cl.stopped() {
			s.renew(ctx, false)
		}
	case *probeLeader:
		s.probe(ctx, m)
	case *renewResult:
		s.renewing = false
		s.renewed(ctx, m)
	case *drainAll:
		s.draining = true
		if s.drainDone == nil {
			s.drainDone = make(chan struct{})
		}
		keys := sortedKeys(s.children)
		for _, k := range keys {
			ctx.Send(s.children[k].pid, &startRelease{})
		}
		s.checkDrained()
		ctx.Respond(&drainWait{done: s.drainDone, released: keys})
	}
}

// spawn returns key's repo actor, starting it if needed; lease is its
// lease in cluster mode (nil on a single node).
func (s *supervisor) spawn(ctx actor.Context, key names.Repo, lease *actorLease) *child {
	if c, ok := s.children[key]; ok {
		return c
	}
	props := actor.PropsFromProducer(func() actor.Actor {
		return &repoActor{node: s.node, key: key, lease: lease}
	}, actor.WithSupervisor(repoStrategy))
	c := &child{pid: ctx.Spawn(props), lastUsed: time.Now()}
	s.children[key] = c
	if lease != nil {
		c.renews = lease.h.Renews()
		s.holdLease(key, c, lease.epoch, lease.session)
	}
	s.enforceMaxWarm(ctx, key)
	return c
}

// granted spawns the repo actor of a newly granted lease (spawning opens
// the database), or tells the actor holding it of the new epoch. A grant
// that was in flight when the drain began, or claimed only to be let go
// (release), is served through the drain and then let go.
func (s *supervisor) granted(ctx actor.Context, m *granted) {
	c, ok := s.children[m.key]
	switch l, lingers := s.lingererOf(m.key); {
	case ok:
		s.holdLease(m.key, c, m.epoch, m.session)
		ctx.Send(c.pid, &regranted{epoch: m.epoch, session: m.session})
	case lingers:
		// Granted again while its sessions finish: the same actor (and
		// open database) serves on, rather than a second one fencing it.
		delete(s.lingering, l.pid.Id)
		c = &child{pid: l.pid, lastUsed: time.Now(), renews: m.holder.Renews()}
		s.children[m.key] = c
		s.holdLease(m.key, c, m.epoch, m.session)
		ctx.Send(c.pid, &regranted{epoch: m.epoch, session: m.session, revive: &m.holder})
	default:
		c = s.spawn(ctx, m.key, &actorLease{h: m.holder, epoch: m.epoch, session: m.session})
		if f := s.node.cl.cfg.OnGrant; f != nil {
			f(m.key)
		}
	}
	ctx.Respond(&leaseInfo{held: true, epoch: c.epoch})
	if s.draining || m.release {
		ctx.Send(c.pid, &startRelease{})
	}
}

// holdLease records c's grant of key under epoch and session, checked at
// the next heartbeat's answer (recheck), and with dropLease publishes the
// children's leases (clusterState.leases) as they change.
func (s *supervisor) holdLease(key names.Repo, c *child, epoch, session uint64) {
	c.epoch, c.session, c.unbound = epoch, session, session == 0
	if s.node.cl != nil {
		s.recheck[key] = true
		s.node.cl.leases.Store(key, epoch)
	}
}

func (s *supervisor) dropLease(key names.Repo) {
	if s.node.cl != nil {
		s.node.cl.leases.Delete(key)
	}
}

// lingererOf finds key's lingering actor.
func (s *supervisor) lingererOf(key names.Repo) (lingerer, bool) {
	for _, l := range s.lingering {
		if l.key == key {
			return l, true
		}
	}
	return lingerer{}, false
}

func (s *supervisor) scheduleRenew(ctx actor.Context) {
	self, root := ctx.Self(), s.node.system.Root
	s.renewTimer = time.AfterFunc(cluster.RenewEvery, func() { root.Send(self, &renewTick{}) })
}

// probe heartbeats every LeaderRetry while requests wait for an
// unreachable leader: one probe of the leader per node, however many
// requests wait, and each new waiter's probeLeader only sends one sooner
// if the last is LeaderRetry old.
func (s *supervisor) probe(ctx actor.Context, m *probeLeader) {
	if m.tick {
		s.probeTimer = nil
	}
	cl := s.node.cl
	if cl.stopped() || cl.waiting.Load() == 0 {
		return
	}
	if time.Since(s.lastRenew) >= cluster.LeaderRetry {
		s.renew(ctx, true)
	}
	if s.probeTimer == nil {
		// On the node's own grid, half a period off its renewals and map
		// polls, not at a waiting request's instants: the simulated
		// cluster's runs then never have two chains of events meet at one
		// instant, where their order would be the scheduler's.
		now := time.Now()
		k := now.Sub(s.started.Add(cluster.LeaderRetry/2))/cluster.LeaderRetry + 1
		next := s.started.Add(cluster.LeaderRetry/2 + time.Duration(k)*cluster.LeaderRetry)
		self, root := ctx.Self(), s.node.system.Root
		s.probeTimer = time.AfterFunc(next.Sub(now), func() { root.Send(self, &probeLeader{tick: true}) })
	}
}

// renew sends the node's heartbeat: the renewal of its session (opening
// one if it has none), listing only the leases its map view showed as
// per-repository ones (child.unbound: granted before the node had a
// session), which the leader then binds to the session. A heartbeat still in flight (slow
// leader) is not doubled up. It is sent with nothing held too, to keep an
// idle node live for placement, except while joining or draining: such a
// node must stay out of placement.
func (s *supervisor) renew(ctx actor.Context, probe bool) {
	if s.renewing {
		return
	}
	listed := map[names.Repo]uint64{}
	var repos []names.Repo
	renewing := false
	for k, c := range s.children {
		if c.renews {
			renewing = true
			if c.unbound {
				listed[k] = c.epoch
				repos = append(repos, k)
			}
		}
	}
	// Sorted for a deterministic request; only the unbound leases, which
	// are few, not every child on every heartbeat.
	slices.SortFunc(repos, names.Compare)
	if !renewing && (s.draining || s.node.cl.joining()) {
		return
	}
	s.renewing, s.lastRenew = true, time.Now()
	cl, sup, root := s.node.cl, ctx.Self(), s.node.system.Root
	go func() {
		rctx, cancel := context.WithTimeout(context.Background(), cluster.RenewEvery)
		defer cancel()
		res := &renewResult{listed: listed, session: cl.session.Load(), probe: probe, at: time.Now()}
		if res.session == 0 {
			res.r.Session, res.err = cl.ensureSession(rctx)
		} else {
			res.r, res.err = cl.leader.Renew(rctx, cluster.RenewLeases{Node: cl.cfg.Self, Session: res.session, Repos: repos})
		}
		root.Send(sup, res)
	}()
}

// renewed tells each child of the heartbeat whose lease was declined,
// which closes its repository at once; a renewed one hears nothing. A declined session loses
// every lease, and the node opens a new one. An accepted one extends the
// node's ServeLease from when the heartbeat was sent. A failed heartbeat
// changes nothing: a node cut off from the leader keeps serving until
// its ServeLease ends.
func (s *supervisor) renewed(ctx actor.Context, m *renewResult) {
	if m.err != nil {
		// Probes fail every LeaderRetry while the leader is away; the
		// periodic heartbeat's failure says it at warn level.
		log := s.node.log.Warn
		if m.probe {
			log = s.node.log.Debug
		}
		log("renew session", zap.Error(m.err))
		return
	}
	cl := s.node.cl
	cl.answered(time.Now())
	if !m.r.SessionDeclined && m.session != 0 {
		cl.acked(m.session, m.at)
	}
	if m.r.SessionDeclined {
		s.node.log.Warn("session declined by the leader (replaced by a newer one); closing every repository",
			zap.Uint64("session", m.session), zap.Uint64("current", m.r.Session))
		cl.dropSession(m.session)
	}
	// A node holding nothing skips the Diff: nothing it could tell.
	var changed []names.Repo
	mark := s.node.mapMark()
	if len(s.children) > 0 {
		changed = s.node.changedBetween(s.checked, mark)
	}
	for k := range s.recheck {
		changed = append(changed, k)
	}
	told := heartbeatLosses(s.children, heartbeatCheck{self: cl.cfg.Self, session: m.session, reply: m.r, listed: m.listed,
		changed: changed, all: m.r.Session != s.checkedSession, view: mark.v})
	for _, t := range told {
		// The actor compares the epoch: a lease granted again since
		// is not the one declined.
		ctx.Send(s.children[t.key].pid, &renewAnswer{epoch: t.epoch})
	}
	if !m.r.SessionDeclined {
		s.checked, s.checkedSession = mark, m.r.Session
		clear(s.recheck)
	}
	if f := cl.cfg.OnGrant; f != nil {
		for _, k := range m.r.Prewarm {
			f(k) // a repository about to move here: prewarm it
		}
	}
	s.releaseMoved(ctx, m.r.Release)
}

// releaseMoved starts the release, through the drain, of the repositories
// the leader moves elsewhere (cluster.LeasesRenewed.Release) that this
// node holds (cluster.OnHolderRelease); the leader hands each to its
// target once the entry lapsed. One the map names here that no actor
// ever opened is claimed first, as a request would, and released once
// granted (granted.release). One already draining, lingering or not held
// is left as it is: the move times out if the holder never lets go.
func (s *supervisor) releaseMoved(ctx actor.Context, repos []names.Repo) {
	if s.draining || len(repos) == 0 {
		return
	}
	cl, view, now := s.node.cl, s.node.OwnershipView(), time.Now()
	for _, k := range repos {
		c, held := s.children[k]
		_, lingers := s.lingererOf(k)
		e, ok := view.Get(k)
		switch cluster.OnHolderRelease(held || lingers, held && c.renews, e, ok, cl.cfg.Self, cl.session.Load(), now) {
		case cluster.ReleaseDrain:
			s.node.log.Info("releasing a repository the leader moves to another node", zap.Stringer("repo", k))
			ctx.Send(c.pid, &startRelease{})
		case cluster.ReleaseClaim:
			if _, busy := cl.claiming.LoadOrStore(k, struct{}{}); busy {
				continue
			}
			s.node.log.Info("releasing a repository the leader moves to another node, never opened here: claiming it first",
				zap.Stringer("repo", k))
			// Counted with the releases: a drain that starts meanwhile
			// waits for it, as for every release in flight.
			cl.releases.Go(func() {
				defer cl.claiming.Delete(k)
				s.node.claimToRelease(k)
			})
		}
	}
}

func (s *supervisor) checkDrained() {
	if s.draining && s.drainDone != nil && len(s.children) == 0 && len(s.lingering) == 0 {
		select {
		case <-s.drainDone:
		default:
			close(s.drainDone)
		}
	}
}

func sortedKeys[V any](m map[names.Repo]V) []names.Repo {
	out := make([]names.Repo, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, names.Compare)
	return out
}

// enforceMaxWarm asks the repositories evictions picks to close. One with
// sessions ignores the request and is asked again on the next spawn.
func (s *supervisor) enforceMaxWarm(ctx actor.Context, fresh names.Repo) {
	if len(s.children) <= s.node.cfg.MaxWarm {
		// Nothing to evict; without this check every spawn would copy the
		// pool, quadratic in a restart storm of thousands of repositories.
		return
	}
	pool := make([]warmChild, 0, len(s.children))
	for k, c := range s.children {
		pool = append(pool, warmChild{key: k, lastUsed: c.lastUsed})
	}
	for _, k := range evictions(pool, fresh, s.node.cfg.MaxWarm) {
		s.node.log.Debug("max warm reached; asking repo to close", zap.Stringer("repo", k))
		c := s.children[k]
		ctx.Send(c.pid, &evictIfIdle{})
		// Not picked again before it closes unless it stays in use.
		c.lastUsed = time.Now()
	}
}

// repoStrategy restarts a panicking repo actor, up to 5 times a minute.
var repoStrategy = actor.NewOneForOneStrategy(5, time.Minute, func(reason any) actor.Directive {
	return actor.RestartDirective
})
