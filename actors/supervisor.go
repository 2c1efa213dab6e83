package actors

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
)

// supervisor is the node's parent of every repo actor: it spawns them on
// demand, forgets them when they close, restarts them on panic (the default
// one-for-one strategy of their props) and enforces RGIT_MAX_WARM by asking
// the least recently requested idle repo to close.
//
// In cluster mode it also holds the node's leases (one cluster.Holder per
// repository, driven by cluster.Step): a repo actor is spawned only for a
// lease granted to this node, renewals are batched into one LeaderClient
// call every RenewEvery, a declined renewal closes the database at once,
// and an idle repo is released through the drain before it closes.
type supervisor struct {
	node     *Node
	children map[repoKey]*child

	// Cluster mode only.
	leases     map[repoKey]*lease
	renewTimer *time.Timer
	renewing   bool // a renewal batch is in flight
	draining   bool
	drainDone  chan struct{}
}

type child struct {
	pid      *actor.PID
	lastUsed time.Time
}

type lease struct {
	h     cluster.Holder
	epoch uint64
	timer *time.Timer // drain end
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if s.node.cl != nil {
			s.scheduleRenew(ctx)
		}
	case *actor.Stopping:
		if s.renewTimer != nil {
			s.renewTimer.Stop()
		}
		for _, l := range s.leases {
			if l.timer != nil {
				l.timer.Stop()
			}
		}
	case *getRepo:
		var epoch uint64
		if s.node.cl != nil {
			l, ok := s.leases[m.key]
			if !ok {
				ctx.Respond(&notHeld{})
				return
			}
			epoch = l.epoch
		}
		c := s.spawn(ctx, m.key)
		c.lastUsed = time.Now()
		ctx.Respond(&repoPID{pid: c.pid, epoch: epoch})
	case *idle:
		c, ok := s.children[m.key]
		if !ok || !c.pid.Equal(m.pid) {
			return
		}
		delete(s.children, m.key)
		if s.node.cl != nil {
			s.actorClosed(ctx, m.key, m.why)
		}
	case *listOpen:
		keys := make([]repoKey, 0, len(s.children))
		for k := range s.children {
			keys = append(keys, k)
		}
		ctx.Respond(&openKeys{keys: keys})

	case *leaseQuery:
		var info leaseInfo
		if l, ok := s.leases[m.key]; ok {
			info = leaseInfo{held: true, epoch: l.epoch}
		}
		ctx.Respond(&info)
	case *granted:
		s.granted(ctx, m)
	case *wantRelease:
		l, ok := s.leases[m.key]
		switch {
		case !ok:
			ctx.Send(m.pid, &closeNow{})
		case l.h.State == cluster.Serving:
			s.step(ctx, m.key, l, cluster.Event{Kind: cluster.EvReleaseStarted})
		}
	case *lingerHold:
		s.holdLinger(m.key)
	case *drainTick:
		if l, ok := s.leases[m.key]; ok && l.epoch == m.epoch {
			s.step(ctx, m.key, l, cluster.Event{Kind: cluster.EvTick})
		}
	case *renewTick:
		// After Shutdown the actor may never see Stopping (system shutdown
		// does not deliver it): stop renewing, or heartbeats to the leader
		// would go on forever.
		if s.node.cl.stopped() {
			return
		}
		s.renew(ctx)
		s.scheduleRenew(ctx)
	case *renewResult:
		s.renewing = false
		s.renewed(ctx, m)
	case *drainAll:
		s.draining = true
		if s.drainDone == nil {
			s.drainDone = make(chan struct{})
		}
		keys := sortedKeys(s.leases)
		for _, k := range keys {
			if l := s.leases[k]; l.h.State == cluster.Serving {
				s.step(ctx, k, l, cluster.Event{Kind: cluster.EvReleaseStarted})
			}
		}
		s.checkDrained()
		ctx.Respond(&drainWait{done: s.drainDone, released: keys})
	}
}

// spawn returns key's repo actor, starting it if needed.
func (s *supervisor) spawn(ctx actor.Context, key repoKey) *child {
	if c, ok := s.children[key]; ok {
		return c
	}
	owner, name := key.split()
	props := actor.PropsFromProducer(func() actor.Actor {
		return &repoActor{node: s.node, key: key, owner: owner, name: name}
	}, actor.WithSupervisor(repoStrategy))
	c := &child{pid: ctx.Spawn(props), lastUsed: time.Now()}
	s.children[key] = c
	s.enforceMaxWarm(ctx, key)
	return c
}

// granted records a lease and opens the repository (spawning its actor
// opens the database). A grant for a lease already held only updates the
// epoch; a draining one keeps draining and the next request claims again.
func (s *supervisor) granted(ctx actor.Context, m *granted) {
	l, ok := s.leases[m.key]
	if !ok {
		h, _ := cluster.NewServing(s.node.cl.drain())
		l = &lease{h: h}
		s.leases[m.key] = l
	}
	l.epoch = m.epoch
	s.spawn(ctx, m.key)
	ctx.Respond(&leaseInfo{held: true, epoch: l.epoch})
	if s.draining && l.h.State == cluster.Serving {
		// A claim or force-grant that was in flight when the drain began:
		// serve the request that made it, through the drain, then let go.
		s.step(ctx, m.key, l, cluster.Event{Kind: cluster.EvReleaseStarted})
	}
}

// step applies ev to key's holder and performs the actions.
func (s *supervisor) step(ctx actor.Context, key repoKey, l *lease, ev cluster.Event) {
	h, acts := cluster.Step(l.h, ev, time.Now())
	l.h = h
	for _, a := range acts {
		switch a.Kind {
		case cluster.SendRelease:
			s.sendRelease(key)
		case cluster.WakeAt:
			self, root, epoch := ctx.Self(), s.node.system.Root, l.epoch
			l.timer = time.AfterFunc(time.Until(a.At), func() { root.Send(self, &drainTick{key: key, epoch: epoch}) })
		case cluster.CloseDB:
			if c, ok := s.children[key]; ok {
				ctx.Send(c.pid, &closeNow{drained: ev.Kind == cluster.EvTick})
			}
		}
	}
	if h.State == cluster.Closed {
		s.dropLease(key)
	}
}

func (s *supervisor) dropLease(key repoKey) {
	if l, ok := s.leases[key]; ok && l.timer != nil {
		l.timer.Stop()
	}
	delete(s.leases, key)
	s.checkDrained()
}

// actorClosed updates the lease of a repo actor that closed on its own.
func (s *supervisor) actorClosed(ctx actor.Context, key repoKey, why closeWhy) {
	l, ok := s.leases[key]
	if !ok {
		if why == whyLingered {
			s.sendRelease(key) // undo holdLinger's renewal
		}
		s.checkDrained()
		return
	}
	switch why {
	case whyFenced:
		s.step(ctx, key, l, cluster.Event{Kind: cluster.EvFenced})
	case whyOpenFailed, whyClosed:
		// Nothing is open any more, so no drain is needed: let the lease
		// go now rather than block the repository for the TTL.
		if l.h.State == cluster.Serving {
			s.sendRelease(key)
		}
		s.dropLease(key)
	case whyShutdown:
		s.dropLease(key)
	default:
		s.checkDrained()
	}
}

// holdLinger renews key's entry once: its drain ended with sessions still
// running (a push forwarded here late in the drain), and an entry lapsing
// under them would let another node open the repository and fence their
// commit. The actor's close (whyLingered) releases the entry again.
func (s *supervisor) holdLinger(key repoKey) {
	leader, self, log := s.node.cl.leader, s.node.cl.cfg.Self, s.node.log
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cluster.RenewEvery)
		defer cancel()
		_, declined, err := leader.Renew(ctx, self, []string{string(key)})
		if err == nil && len(declined) > 0 {
			err = errors.New("renewal declined")
		}
		if err != nil {
			// A new owner may then fence the running sessions' commits.
			log.Warn("hold the entry of a repository with sessions after its drain", zap.String("repo", string(key)), zap.Error(err))
		}
	}()
}

func (s *supervisor) sendRelease(key repoKey) {
	leader, self, log := s.node.cl.leader, s.node.cl.cfg.Self, s.node.log
	s.node.cl.releases.Add(1)
	go func() {
		defer s.node.cl.releases.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cluster.RenewEvery)
		defer cancel()
		if _, err := leader.Release(ctx, self, string(key)); err != nil {
			// The entry then lapses at its TTL instead of the drain.
			log.Warn("release lease", zap.String("repo", string(key)), zap.Error(err))
		}
	}()
}

func (s *supervisor) scheduleRenew(ctx actor.Context) {
	self, root := ctx.Self(), s.node.system.Root
	s.renewTimer = time.AfterFunc(cluster.RenewEvery, func() { root.Send(self, &renewTick{}) })
}

// renew sends one batch with every serving lease. A batch still in flight
// (slow leader) is not doubled up. An empty batch is still sent, as the
// heartbeat that keeps an idle node live for placement, except while
// draining: a draining node must drop out of placement.
func (s *supervisor) renew(ctx actor.Context) {
	if s.renewing {
		return
	}
	sent := make(map[repoKey]uint64)
	var repos []string
	for _, k := range sortedKeys(s.leases) {
		if l := s.leases[k]; l.h.Renews() {
			sent[k] = l.epoch
			repos = append(repos, string(k))
		}
	}
	if len(repos) == 0 && s.draining {
		return
	}
	s.renewing = true
	leader, self, sup, root := s.node.cl.leader, s.node.cl.cfg.Self, ctx.Self(), s.node.system.Root
	go func() {
		rctx, cancel := context.WithTimeout(context.Background(), cluster.RenewEvery)
		defer cancel()
		_, declined, err := leader.Renew(rctx, self, repos)
		root.Send(sup, &renewResult{sent: sent, declined: declined, err: err})
	}()
}

// renewed closes every declined repository at once. A failed batch
// changes nothing: a node cut off from the leader keeps serving.
func (s *supervisor) renewed(ctx actor.Context, m *renewResult) {
	if m.err != nil {
		s.node.log.Warn("renew leases", zap.Error(m.err))
		return
	}
	for _, r := range m.declined {
		k := repoKey(r)
		l, ok := s.leases[k]
		if !ok || l.epoch != m.sent[k] {
			continue // closed or re-granted since the batch left
		}
		s.node.log.Warn("lease renewal declined; closing repository", zap.String("repo", r))
		s.step(ctx, k, l, cluster.Event{Kind: cluster.EvRenewDeclined})
	}
}

func (s *supervisor) checkDrained() {
	if s.draining && s.drainDone != nil && len(s.leases) == 0 && len(s.children) == 0 {
		select {
		case <-s.drainDone:
		default:
			close(s.drainDone)
		}
	}
}

func sortedKeys[V any](m map[repoKey]V) []repoKey {
	out := make([]repoKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// enforceMaxWarm asks the least recently used other repos to close while
// more than MaxWarm are open. A repo with sessions ignores the request and
// is asked again on the next spawn.
func (s *supervisor) enforceMaxWarm(ctx actor.Context, fresh repoKey) {
	over := len(s.children) - s.node.cfg.MaxWarm
	if over <= 0 {
		return
	}
	for ; over > 0; over-- {
		var oldest repoKey
		var oldestAt time.Time
		for k, c := range s.children {
			if k != fresh && (oldest == "" || c.lastUsed.Before(oldestAt)) {
				oldest, oldestAt = k, c.lastUsed
			}
		}
		if oldest == "" {
			return
		}
		s.node.log.Debug("max warm reached; asking repo to close", zap.String("repo", string(oldest)))
		ctx.Send(s.children[oldest].pid, &evictIfIdle{})
		// Stop considering it this round; it leaves the map when it closes.
		s.children[oldest].lastUsed = time.Now()
	}
}

// repoStrategy restarts a panicking repo actor, up to 5 times a minute.
var repoStrategy = actor.NewOneForOneStrategy(5, time.Minute, func(reason any) actor.Directive {
	return actor.RestartDirective
})
