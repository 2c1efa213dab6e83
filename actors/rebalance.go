package actors

// Rebalancing on the leader: every cluster.RebalanceEvery a round of the
// cluster.Rebalancer picks warm repositories held away from their
// placement, their holders are told to release them in the answers to
// their heartbeats, and the lapsed entries are handed to the targets.

import (
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
)

// leaderRebalance asks the leader actor for a rebalancing round; nobody
// waits for an answer.
type leaderRebalance struct{}

// Results of rgit_rebalance_moves_total.
var moveResults = []string{"started", "handed", "claimed", "abandoned"}

func moveResult(v cluster.MoveVerdict) string {
	switch v {
	case cluster.MoveHandOver:
		return "handed"
	case cluster.MoveDone:
		return "claimed"
	}
	return "abandoned"
}

// rebalance runs one round once the leader's liveness has settled: the
// hand-overs it grants are persisted with w.
func (a *leaderActor) rebalance(w *leaderWrite, now time.Time) {
	// While the store fails the moves could not be persisted: the
	// rebalancer pauses until a commit lands.
	if a.rebal == nil || !a.liveness.Settled(now) || a.outage.on {
		return
	}
	live := a.live()
	r := a.rebal.Round(a.m, live, a.liveness.Weighted(a.m.Members(now)), now)
	for _, d := range r.Handed {
		w.decided(d)
	}
	for _, e := range r.Ended {
		a.moveEnded(e)
	}
	for _, mv := range r.Started {
		a.node.metrics.rebalanceMoves.WithLabelValues("started").Inc()
		a.node.log.Info("rebalance: moving repository toward its placement", zap.Stringer("repo", mv.Repo),
			zap.String("from", mv.From), zap.String("to", mv.To), zap.Uint64("epoch", mv.Epoch))
	}
}

// due hands repo over before a claim for it is decided, if its move is
// due (cluster.Rebalancer.Due).
func (a *leaderActor) due(w *leaderWrite, repo names.Repo, now time.Time) {
	if a.rebal == nil {
		return
	}
	if d, e, ok := a.rebal.Due(a.m, repo, a.live(), now); ok {
		w.decided(d)
		a.moveEnded(e)
	}
}

func (a *leaderActor) moveEnded(e cluster.MoveEnd) {
	res := moveResult(e.Verdict)
	a.node.metrics.rebalanceMoves.WithLabelValues(res).Inc()
	a.node.log.Info("rebalance: move ended", zap.Stringer("repo", e.Repo), zap.String("from", e.From),
		zap.String("to", e.To), zap.String("result", res), zap.Duration("took", time.Since(e.Started)))
}

// rebalanceLoop asks the leader actor for a round every
// cluster.RebalanceEvery until the node stops.
func (n *Node) rebalanceLoop(c *clusterState) {
	t := time.NewTicker(cluster.RebalanceEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			n.system.Root.Send(c.leaderPID, &leaderRebalance{})
		}
	}
}
