package actors

// Draining: SIGTERM releases every lease through the drain while requests
// are still served; a draining leader then hands its repositories over.

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
)

// Drain marks the node draining (Route no longer claims) and releases
// every lease through the drain, then waits until the databases are
// closed. Requests keep being served during the drain. On the leader node
// the released repositories are then handed over to live nodes.
func (n *Node) Drain(ctx context.Context) error {
	if n.cl == nil {
		return nil
	}
	n.cl.draining.Store(true)
	n.leaving(ctx)
	// Background maintenance holds sessions that would keep repositories
	// past their drain, and its commit would meet the next owner's fence:
	// it stops first (a half-built pack is garbage for GC).
	n.maint.shutdown()
	w, err := askSupervisor(ctx, n, &drainAll{}, 10*time.Second)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		return fmt.Errorf("drain: %w", ctx.Err())
	}
	n.cl.releases.Wait() // each bounded by RenewEvery
	// Entries naming this node that it never opened (steered or handed
	// over to it) would send requests here, or after the stop into a
	// failover, until they lapse at their TTL.
	released := make(map[names.Repo]bool, len(w.released))
	repos := make([]names.Repo, 0, len(w.released))
	for _, k := range w.released {
		released[k] = true
		repos = append(repos, k)
	}
	unheld := n.namedHere(released)
	if l, ok := n.cl.service.(*localLeader); ok {
		// The leader node hands its repositories over before it goes; it
		// keeps answering claims until its listeners close.
		if repos = append(repos, unheld...); len(repos) > 0 {
			l.handOver(ctx, repos)
		}
		l.drained(ctx)
		return nil
	}
	for _, r := range unheld {
		if err := n.releaseUnheld(ctx, r); err != nil {
			break // the leader is away: the rest lapse at their TTL
		}
	}
	return nil
}

// leaving tells the leader, with a heartbeat, that the node drains: it
// leaves placement before its releases arrive, or without any when it
// holds nothing. Best effort: without it the releases (or the lapse of
// its heartbeats) take it out.
func (n *Node) leaving(ctx context.Context) {
	id := n.cl.session.Load()
	if id == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cluster.RenewEvery)
	defer cancel()
	if _, err := n.cl.leader.Renew(ctx, cluster.RenewLeases{Node: n.cl.cfg.Self, Session: id, Leaving: true}); err != nil {
		n.log.Warn("tell the leader this node is leaving", zap.Error(err))
	}
}

// namedHere lists the repositories whose live entry in this node's view
// names it, except those in skip.
func (n *Node) namedHere(skip map[names.Repo]bool) []names.Repo {
	now := time.Now()
	var out []names.Repo
	for _, e := range n.MapEntries() {
		if !skip[e.Repo] && e.Node == n.cl.cfg.Self && e.Live(now) {
			out = append(out, e.Repo)
		}
	}
	return out
}

// Draining reports whether Drain was called (/ready fails).
func (n *Node) Draining() bool { return n.cl != nil && n.cl.draining.Load() }
