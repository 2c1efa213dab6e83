package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
)

// BenchmarkRebalanceRound is the leader's rebalancer on a map of n
// entries, each held by its winner among k nodes (5 or 50): k/5 more join
// (the live set changes: the round that looks for the repositories they
// now win, hashing every entry against every node), then rebalanceRounds
// rounds, each handing over the 4 moves under way (their holders released
// them a drain ago) and starting 4 more. CPU time per round of each kind,
// beside the wall time a shared machine stretches:
//
//	go test ./cluster -run '^$' -bench RebalanceRound -benchmem
func BenchmarkRebalanceRound(b *testing.B) {
	const rebalanceRounds = 5
	for _, c := range []struct{ nodes, n int }{{5, 10_000}, {5, 100_000}, {5, 1_000_000}, {50, 100_000}, {50, 1_000_000}} {
		var before, after LiveSet
		for i := range c.nodes + c.nodes/5 {
			after = append(after, NodeWeight{fmt.Sprintf("rgit-%d", i), 1})
		}
		before = after[:c.nodes]
		b.Run(fmt.Sprintf("%dto%d/%d", len(before), len(after), c.n), func(b *testing.B) {
			base := make(fakeBase, c.n) // the leader's database view
			for i := range c.n {
				r := names.MustParse(fmt.Sprintf("o%d/r%d", i%1000, i))
				base[r] = Entry{Node: Rendezvous(r, before), Written: t0, Epoch: 1, Session: 1}
			}
			var change, rounds time.Duration
			for b.Loop() {
				m := NewMapOver(DefaultTimings(), base)
				for _, nw := range after {
					if err := m.PutSession(nw.Node, NodeSession{ID: 1, Expires: t0.Add(24 * time.Hour), Renewed: t0, Started: t0}); err != nil {
						b.Fatal(err)
					}
				}
				r := NewRebalancer(DefaultRebalanceLimits(4))
				now := t0
				cpu0 := cpuTime(b)
				started := r.Round(m, after, after, now).Started
				change += cpuTime(b) - cpu0
				if len(started) != 4 {
					b.Fatalf("the live set's change started %d moves, want 4", len(started))
				}
				for range rebalanceRounds {
					for _, mv := range started {
						if _, err := m.Release(mv.From, mv.Repo, now); err != nil {
							b.Fatal(err)
						}
					}
					now = now.Add(Drain)
					cpu0 := cpuTime(b)
					round := r.Round(m, after, after, now)
					rounds += cpuTime(b) - cpu0
					if len(round.Handed) != 4 || len(round.Started) != 4 {
						b.Fatalf("round handed over %d and started %d, want 4 and 4", len(round.Handed), len(round.Started))
					}
					started = round.Started
				}
			}
			b.ReportMetric(float64(change.Microseconds())/1e3/float64(b.N), "cpu-ms/change")
			b.ReportMetric(float64(rounds.Microseconds())/1e3/float64(b.N*rebalanceRounds), "cpu-ms/round")
		})
	}
}
