package actors

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
)

// leaderPrune asks the leader actor to prune the map (cluster.Map.Prune);
// gone lists lapsed repos found deleted. Answered with a *leaderReply.
type leaderPrune struct{ gone []names.Repo }

// prune applies the pure decision; its removals and the raised epoch
// floor are persisted in one transaction, as cluster.Pruned.Write demands.
func (a *leaderActor) prune(w *leaderWrite, m *leaderPrune, now time.Time) {
	// The base (the database) holds what earlier commits wrote: the map
	// keeps only what is still in flight.
	a.m.Settle()
	p := a.m.Prune(now, m.gone)
	if !p.Write {
		return
	}
	w.reply.pruned = p
	w.txn = refdb.Txn{refdb.Set(cluster.FloorKey, cluster.EncodeFloor(p.Floor))}
	for _, r := range p.Repos {
		w.txn = append(w.txn, refdb.Remove(cluster.Key(r)))
	}
}

// loadFloor reads the epoch floor of v into m.
func loadFloor(v *refdb.View, m *cluster.Map) error {
	b, ok := v.Get(cluster.FloorKey)
	if !ok {
		return nil
	}
	f, err := cluster.DecodeFloor(b)
	if err != nil {
		return fmt.Errorf("load ownership map: %w", err)
	}
	m.SetFloor(f)
	return nil
}

// pruneLoop runs a pruning pass every cluster.PruneEvery on the leader
// node until the node stops.
func (n *Node) pruneLoop(c *clusterState) {
	t := time.NewTicker(cluster.PruneEvery)
	defer t.Stop()
	since := time.Now()
	for {
		select {
		case <-c.stop:
			return
		case now := <-t.C:
			if err := n.pruneOnce(c, since, now); err != nil {
				n.log.Warn("prune ownership map", zap.Error(err))
				continue
			}
			// Overlap one period: a repo deleted just after its lease
			// lapsed is still checked in the next pass.
			since = now.Add(-cluster.PruneEvery)
		}
	}
}

// pruneOnce checks which entries lapsed in [since, now) belong to deleted
// repositories (outside the actor: it is store I/O) and asks the leader
// actor to prune. A failed check prunes nothing for that repo: the grace
// period removes it later.
func (n *Node) pruneOnce(c *clusterState, since, now time.Time) error {
	view := c.leaderDB.View()
	m, err := loadMap(func() *refdb.View { return view }, c.cfg.Timings, cluster.Horizon{}, "")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cluster.PruneEvery)
	defer cancel()
	var gone []names.Repo
	for _, r := range m.Lapsed(since, now) {
		if ok, err := repo.Exists(ctx, n.cfg.Deps, r); err != nil {
			n.log.Warn("prune: check repository", zap.Stringer("repo", r), zap.Error(err))
		} else if !ok {
			gone = append(gone, r)
		}
	}
	r, err := askLeader(ctx, n, c.leaderPID, &leaderPrune{gone: gone})
	if err != nil {
		return err
	}
	if r.err == nil && r.pruned.Write {
		n.log.Info("pruned ownership map", zap.Stringers("repos", r.pruned.Repos), zap.Uint64("epoch_floor", r.pruned.Floor))
	}
	return r.err
}
