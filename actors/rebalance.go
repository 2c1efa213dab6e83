package actors

// Rebalancing on the leader: every cluster.RebalanceEvery a round of the
// cluster.Rebalancer picks warm repositories held away from their
// placement, their holders are told to release them in the answers to
// their heartbeats, and the lapsed entries are handed to the targets. The
// rebalancer's scans of the whole map, which find those repositories,
// run off the actor.

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
)

type (
	// leaderRebalance asks the leader actor for a rebalancing round;
	// nobody waits for an answer.
	leaderRebalance struct{}
	// leaderScanned brings back the result of the rebalancer's scan of
	// the map, run off the actor (leaderScans), which took took.
	leaderScanned struct {
		res  cluster.ScanResult
		took time.Duration
	}
)

// leaderScans runs the rebalancer's scans of the map (cluster.Scan: a
// million entries cost seconds of CPU) on their own goroutine, at most
// one at a time (cluster.Rebalancer.Round gives out no second one), so
// that claims and heartbeats are decided meanwhile. The leader actor
// owns it; stopping the actor cancels the scan and waits for it.
type leaderScans struct {
	self   *actor.PID
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// start runs s and sends its result to the actor; a cancelled scan sends
// nothing.
func (l *leaderScans) start(root *actor.RootContext, s *cluster.Scan) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	self := l.self
	l.wg.Go(func() {
		defer cancel()
		start := time.Now()
		res, err := s.Run(ctx)
		if err != nil {
			return
		}
		root.Send(self, &leaderScanned{res: res, took: time.Since(start)})
	})
}

// stop cancels the scan running, if any, and waits for its goroutine.
func (l *leaderScans) stop() {
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
}

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
	if r.Scan != nil {
		a.scans.start(a.node.system.Root, r.Scan)
	}
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

// scanned installs a scan's result; the next round starts the moves it
// found. Installing the queue changes nothing a claim or heartbeat reads,
// so where the result lands among them in the mailbox does not matter.
func (a *leaderActor) scanned(m *leaderScanned) {
	if a.rebal != nil && a.rebal.Scanned(m.res) {
		a.node.metrics.rebalanceScan.Observe(m.took.Seconds())
		a.node.log.Debug("rebalance: scanned the ownership map", zap.Int("to_move", m.res.Found()), zap.Duration("took", m.took))
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
