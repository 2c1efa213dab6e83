package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rgit/rgit/actors"
	rc "github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
)

// PlacementConfig describes one rolling-restart placement measurement.
type PlacementConfig struct {
	Nodes int
	Repos int
	Seed  uint64 // entry nodes and background traffic
	Steer bool
	// During is how many requests (random repos, random running entry
	// nodes) are served while each node is down (the leader excepted:
	// cold repositories cannot be claimed then) and again after it is
	// back: a restart under traffic rather than in silence.
	During int
}

// PlacementResult is what MeasureRollingRestart observed.
type PlacementResult struct {
	Config PlacementConfig
	// Hits of Accesses: requests of the final pass (every repository once,
	// after the rolling restart) served by a node whose pack cache already
	// held the repository.
	Hits, Accesses int
	// DuringHits of DuringAccesses: the same for the requests served while
	// the restart was in progress.
	DuringHits, DuringAccesses int
}

// HitRate is Hits/Accesses (0 without accesses).
func (r PlacementResult) HitRate() float64 { return ratio(r.Hits, r.Accesses) }

// DuringHitRate is DuringHits/DuringAccesses (0 without accesses).
func (r PlacementResult) DuringHitRate() float64 { return ratio(r.DuringHits, r.DuringAccesses) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// String is the line the test logs and `make bench` prints.
func (r PlacementResult) String() string {
	steer := "off"
	if r.Config.Steer {
		steer = "on"
	}
	return fmt.Sprintf("placement rolling-restart repos=%d nodes=%d steer=%s cache_hit_rate=%.3f during_restart_hit_rate=%.3f",
		r.Config.Repos, r.Config.Nodes, steer, r.HitRate(), r.DuringHitRate())
}

// MeasureRollingRestart measures the pack-cache hit rate after a rolling
// restart. It starts a cluster, creates cfg.Repos repositories and reads
// each through a random entry node (so each is opened, and cached, where
// placement put it), then restarts every node in turn (drain, stop,
// start, wait until the leader hears it again), serving cfg.During random
// requests while each node is down and after it is back, and finally reads every repository again
// through random entry nodes. A node's pack cache is modelled as every
// repository it ever served, kept across restarts (a persistent volume).
//
// It waits on real timers (drains, renewals): run it inside a
// testing/synctest bubble for fake time, or expect about
// (Nodes+1)·SettleTime of wall clock.
func MeasureRollingRestart(ctx context.Context, cfg PlacementConfig) (PlacementResult, error) {
	res := PlacementResult{Config: cfg}
	mode := actors.SteerOff
	if cfg.Steer {
		mode = actors.SteerOn
	}
	// No idle closes during the run: only placement decides where a
	// repository is served.
	c, err := New(Options{Nodes: cfg.Nodes, Seed: int64(cfg.Seed), WarmTTL: 24 * time.Hour, MaxWarm: cfg.Repos + 1, Steer: mode})
	if err != nil {
		return res, err
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x91ace))
	repoNames := make([]string, cfg.Repos)
	for i := range repoNames {
		repoNames[i] = fmt.Sprintf("alice/r%04d", i)
		if err := repo.Create(ctx, c.Deps(), names.MustParse(repoNames[i])); err != nil {
			return res, fmt.Errorf("create %s: %w", repoNames[i], err)
		}
	}
	// A running cluster: the leader has heard every node.
	time.Sleep(rc.SettleTime)
	get := func(r string) error {
		var up []string
		for _, n := range c.names {
			if c.Node(n) != nil {
				up = append(up, n)
			}
		}
		entry := up[rng.IntN(len(up))]
		if _, _, _, err := c.Get(ctx, entry, r, "refs/heads/main"); err != nil {
			return fmt.Errorf("get %s via %s: %w", r, entry, err)
		}
		return nil
	}
	for _, r := range repoNames {
		if err := get(r); err != nil {
			return res, err
		}
	}

	traffic := func() error {
		for range cfg.During {
			if err := get(repoNames[rng.IntN(len(repoNames))]); err != nil {
				return err
			}
		}
		return nil
	}
	h0, a0 := c.CacheStats()
	// The leader is not served around while down: cold repositories
	// cannot be claimed then.
	err = c.rollingRestart(ctx, c.names, func(n string, back bool) error {
		if !back && n == c.Leader() {
			return nil
		}
		return traffic()
	})
	if err != nil {
		return res, err
	}
	h1, a1 := c.CacheStats()
	res.DuringHits, res.DuringAccesses = h1-h0, a1-a0

	for _, r := range repoNames {
		if err := get(r); err != nil {
			return res, err
		}
	}
	h2, a2 := c.CacheStats()
	res.Hits, res.Accesses = h2-h1, a2-a1
	if v := c.Violations(); len(v) > 0 {
		return res, fmt.Errorf("two writers in one epoch: %v", v)
	}
	return res, nil
}
