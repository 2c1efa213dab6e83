package cluster

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/rgit/rgit/testkit/scale"
)

// TestPlacementRollingRestart measures the pack-cache hit rate after a
// rolling restart with placement steering on and off (same seed, same
// entry nodes) and logs one line per mode, the form `make bench` prints:
//
//	go test ./testkit/cluster -run TestPlacementRollingRestart -v
//
// RGIT_PLACEMENT_REPOS changes the repository count (default 200). It
// asserts only what steering promises: after the restart, with every node
// back, the rendezvous winner is the node that cached the repository.
func TestPlacementRollingRestart(t *testing.T) {
	repos := scale.Count(t, "RGIT_PLACEMENT_REPOS", 200)
	for _, nodes := range []int{3, 5} {
		results := map[bool]PlacementResult{}
		for _, steer := range []bool{false, true} {
			synctest.Test(t, func(t *testing.T) {
				defer settle()
				r, err := MeasureRollingRestart(context.Background(), PlacementConfig{Nodes: nodes, Repos: repos, Seed: 1, Steer: steer, During: 20})
				if err != nil {
					t.Error(err)
					return
				}
				t.Log(r)
				results[steer] = r
			})
		}
		on, off := results[true], results[false]
		if on.Accesses != repos || off.Accesses != repos {
			t.Fatalf("nodes=%d: final pass accesses: steer on %d, off %d, want %d each", nodes, on.Accesses, off.Accesses, repos)
		}
		// With every node back, each repository's winner is the node that
		// cached it (or the one that took it over mid-restart and still
		// holds it). Not quite all: the draining leader hands its
		// repositories to their second-choice node, and one first asked
		// for through that node after the hand-over lapsed stays there
		// (an expired entry naming the requester is not steered), about
		// a third of the leader's share that were not requested meanwhile
		// (measured 0.925 with 3 nodes, 0.99 with 5).
		if on.HitRate() < 0.9 {
			t.Errorf("nodes=%d: steer on: cache hit rate %.3f after the rolling restart, want ≥ 0.9", nodes, on.HitRate())
		}
		if on.HitRate() <= off.HitRate() {
			t.Errorf("nodes=%d: steer on (%.3f) does not beat steer off (%.3f)", nodes, on.HitRate(), off.HitRate())
		}
	}
}
