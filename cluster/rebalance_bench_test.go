package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
)

// BenchmarkRebalanceRound is the leader's rebalancer on a map of n
// entries, each held by its winner among k nodes (5 or 50): k/5 more join
// (the live set changes: a scan looks for the repositories they now win,
// hashing every entry against every node), then rebalanceRounds rounds,
// each handing over the 4 moves under way (their holders released them a
// drain ago) and starting 4 more. CPU time of each part, beside the wall
// time a shared machine stretches: on the leader actor, the change
// (actor-ms/change: the round that gives out the scan, taking its result
// back, the round that starts the first moves) and each later round
// (cpu-ms/round); off the actor, the scan itself (scan-cpu-ms/change):
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
			base := frozenBase{make(fakeBase, c.n)} // the leader's database view
			for i := range c.n {
				r := names.MustParse(fmt.Sprintf("o%d/r%d", i%1000, i))
				base.fakeBase[r] = Entry{Node: Rendezvous(r, before), Written: t0, Epoch: 1, Session: 1}
			}
			var change, scan, rounds time.Duration
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
				given := r.Round(m, after, after, now).Scan
				cpu1 := cpuTime(b)
				if given == nil {
					b.Fatal("the live set's change gave out no scan")
				}
				res, err := given.Run(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				cpu2 := cpuTime(b)
				if !r.Scanned(res) {
					b.Fatal("the scan's result was not taken back")
				}
				started := r.Round(m, after, after, now).Started
				cpu3 := cpuTime(b)
				change += cpu1 - cpu0 + cpu3 - cpu2
				scan += cpu2 - cpu1
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
					if len(round.Handed) != 4 || len(round.Started) != 4 || round.Scan != nil {
						b.Fatalf("round handed over %d, started %d and gave out a scan: %v; want 4, 4 and none",
							len(round.Handed), len(round.Started), round.Scan != nil)
					}
					started = round.Started
				}
			}
			b.ReportMetric(float64(change.Microseconds())/1e3/float64(b.N), "actor-ms/change")
			b.ReportMetric(float64(scan.Microseconds())/1e3/float64(b.N), "scan-cpu-ms/change")
			b.ReportMetric(float64(rounds.Microseconds())/1e3/float64(b.N*rebalanceRounds), "cpu-ms/round")
		})
	}
}

// BenchmarkMapSnapshot is what a scan costs the leader actor beyond its
// rounds: a snapshot of the map (Map.Snapshot), which copies the
// decisions not yet settled into the base (those of up to a PruneEvery)
// and the sessions, for 1,000 to 100,000 of them, over a base of 1M:
//
//	go test ./cluster -run '^$' -bench MapSnapshot -benchmem
func BenchmarkMapSnapshot(b *testing.B) {
	base := frozenBase{make(fakeBase, 1_000_000)}
	for i := range len(base.fakeBase) {
		base.fakeBase[names.MustParse(fmt.Sprintf("o%d/r%d", i%1000, i))] = Entry{Node: "rgit-0", Written: t0, Epoch: 1, Session: 1}
	}
	for _, own := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("own=%d", own), func(b *testing.B) {
			m := NewMapOver(DefaultTimings(), base)
			for i := range own {
				r := names.MustParse(fmt.Sprintf("o%d/r%d", i%1000, i))
				if _, err := m.Claim(r, "rgit-1", t0.Add(TTL), nil, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				m.Snapshot()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*own), "ns/own-entry")
		})
	}
}
