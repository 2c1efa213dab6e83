package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rgit/rgit/actors"
	rc "github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
)

// CapacityConfig sizes one MeasureCapacity run.
type CapacityConfig struct {
	Nodes, Repos int
	Added        int // nodes started for the scale-out
	// Concurrency is how many claims, and later requests, are in flight
	// at once.
	Concurrency int
	// Rebalance is the leader's moves in flight (RGIT_REBALANCE_MOVES).
	Rebalance int
	// Write is the store latency injected on every call.
	Write time.Duration
	// Rounds is how many renewal rounds (RenewEvery) the renewal phase
	// lasts.
	Rounds int
	Seed   uint64
	// Progress, if not nil, is told as each phase ends, and the fake time
	// since the start.
	Progress func(phase string, at time.Duration)
}

// probes is how many repositories are served one at a time, for the
// time one request takes alone.
const probes = 5

// CapacityResult is what MeasureCapacity observed, in fake time.
type CapacityResult struct {
	Config CapacityConfig
	// ClaimsPerSec: every repository claimed for its rendezvous winner
	// through the leader, Concurrency at once.
	ClaimsPerSec float64
	// RenewWrites and RenewBytes are the map's log records and their
	// bytes per renewal round; Snapshots and SnapshotBytes the map
	// snapshots written during the renewal phase.
	RenewWrites, RenewBytes  float64
	Snapshots, SnapshotBytes int64
	// Restart is how long the rolling restart of every node took; One
	// how long one cold repository took to serve after it, alone (the
	// median of probes); ServeAll how long serving every other one,
	// Concurrency at once, took.
	Restart, One, ServeAll time.Duration
	// Moves is how many repositories changed node after the scale-out,
	// Misplaced how many were away from their new winner when it began,
	// and ScaleOut how long until none was.
	Moves, Misplaced int
	ScaleOut         time.Duration
}

// MeasureCapacity runs the lease plane's capacity scenario (docs/capacity.md)
// on cfg.Nodes nodes over a store answering every call after cfg.Write:
// every repository claimed for its rendezvous winner; cfg.Rounds renewal
// rounds; a rolling restart of every node (drain, stop, start, heard by
// the leader); every repository served again through random entry nodes;
// then cfg.Added nodes start and the rebalancer moves repositories until
// every one is at its winner among all of them.
//
// Run it in a testing/synctest bubble: it waits on the cluster's timers
// for many minutes of fake time.
func MeasureCapacity(ctx context.Context, cfg CapacityConfig) (CapacityResult, error) {
	res := CapacityResult{Config: cfg}
	begin := time.Now()
	done := func(phase string) {
		if cfg.Progress != nil {
			cfg.Progress(phase, time.Since(begin))
		}
	}
	c, err := New(Options{Nodes: cfg.Nodes, Spare: cfg.Added, Seed: int64(cfg.Seed), WarmTTL: 24 * time.Hour,
		MaxWarm: cfg.Repos + 1, Steer: actors.SteerOn, Rebalance: cfg.Rebalance,
		// Heartbeats spread over the renewal period, as independent
		// processes' are.
		Stagger: rc.RenewEvery / time.Duration(cfg.Nodes)})
	if err != nil {
		return res, err
	}
	defer c.Close()
	repos := make([]names.Repo, cfg.Repos)
	for i := range repos {
		repos[i] = names.MustParse(fmt.Sprintf("o%d/r%d", i%1000, i))
		if err := repo.Create(ctx, c.Deps(), repos[i]); err != nil {
			return res, fmt.Errorf("create %s: %w", repos[i], err)
		}
	}
	done("created")
	c.Store.AddRule(faultstore.Rule{Latency: cfg.Write})
	time.Sleep(rc.SettleTime)
	live := liveSet(c.names[:cfg.Nodes])

	leader := c.Node(c.Leader()).LeaderService()
	start := time.Now()
	err = parallel(cfg.Concurrency, len(repos), func(i int) error {
		d, err := leader.Claim(ctx, rc.ClaimLease{Repo: repos[i], Node: rc.Rendezvous(repos[i], live)})
		if err == nil && d.Outcome != rc.Granted {
			err = fmt.Errorf("outcome %v", d.Outcome)
		}
		if err != nil {
			return fmt.Errorf("claim %s: %w", repos[i], err)
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.ClaimsPerSec = float64(len(repos)) / time.Since(start).Seconds()
	done("claimed")

	before, err := c.mapObjects(ctx)
	if err != nil {
		return res, err
	}
	time.Sleep(time.Duration(cfg.Rounds) * rc.RenewEvery)
	after, err := c.mapObjects(ctx)
	if err != nil {
		return res, err
	}
	wal, snap := after.since(before)
	res.RenewWrites = float64(wal.count) / float64(cfg.Rounds)
	res.RenewBytes = float64(wal.bytes) / float64(cfg.Rounds)
	res.Snapshots, res.SnapshotBytes = snap.count, snap.bytes
	done("renewed")
	if n := c.liveHeld(repos); n != len(repos) {
		return res, fmt.Errorf("after %d renewal rounds %d of %d leases are live", cfg.Rounds, n, len(repos))
	}

	start = time.Now()
	if err := c.rollingRestart(ctx, c.names[:cfg.Nodes], nil); err != nil {
		return res, err
	}
	res.Restart = time.Since(start)
	done("restarted")

	rng := rand.New(rand.NewPCG(cfg.Seed, 0xca9))
	entries := make([]string, len(repos))
	for i := range entries {
		entries[i] = c.names[rng.IntN(cfg.Nodes)]
	}
	get := func(i int) error {
		if _, _, _, err := c.Get(ctx, entries[i], repos[i].String(), "refs/heads/main"); err != nil {
			return fmt.Errorf("get %s via %s: %w", repos[i], entries[i], err)
		}
		return nil
	}
	// One request alone, the median of probes served one at a time (a
	// heartbeat's write in flight may delay one).
	var alone []time.Duration
	for i := range probes {
		start = time.Now()
		if err := get(i); err != nil {
			return res, err
		}
		alone = append(alone, time.Since(start))
	}
	slices.Sort(alone)
	res.One = alone[len(alone)/2]
	start = time.Now()
	if err := parallel(cfg.Concurrency, len(repos)-probes, func(i int) error { return get(i + probes) }); err != nil {
		return res, err
	}
	res.ServeAll = time.Since(start)
	done("served")

	was, winner := make([]string, len(repos)), make([]string, len(repos))
	all := liveSet(c.names)
	for i, r := range repos {
		if e, ok := c.Node(c.Leader()).OwnershipView().Get(r); ok {
			was[i] = e.Node
		}
		winner[i] = rc.Rendezvous(r, all)
		if was[i] != winner[i] {
			res.Misplaced++
		}
	}
	start = time.Now()
	for _, n := range c.names[cfg.Nodes:] {
		if err := c.Restart(n); err != nil {
			return res, fmt.Errorf("scale out: %w", err)
		}
	}
	limit := 2*ScaleOutTime(float64(res.Misplaced), cfg.Rebalance) + 5*time.Minute
	// away lists the repositories not yet on their winner. Looked at
	// every second of fake time, it shrinks to the ones still away: a
	// look at every repository each second would cost the simulation more
	// CPU than the cluster it measures. Once it is empty, one look at all
	// confirms none moved away again.
	away := make([]int, 0, res.Misplaced)
	for i := range repos {
		away = append(away, i)
	}
	for len(away) > 0 {
		if time.Since(start) > limit {
			return res, fmt.Errorf("scale out: %d repositories still away from their winner after %s: %s", len(away), limit, c.describeAway(repos, winner, away))
		}
		time.Sleep(rc.RebalanceEvery)
		view := c.Node(c.Leader()).OwnershipView()
		away = slices.DeleteFunc(away, func(i int) bool {
			e, ok := view.Get(repos[i])
			return ok && e.Node == winner[i]
		})
		if len(away) == 0 {
			for i := range repos {
				if e, ok := view.Get(repos[i]); !ok || e.Node != winner[i] {
					away = append(away, i)
				}
			}
		}
	}
	res.ScaleOut = time.Since(start)
	done("scaled out")
	for i, r := range repos {
		if e, _ := c.Node(c.Leader()).OwnershipView().Get(r); e.Node != was[i] {
			res.Moves++
		}
	}
	if v := c.Violations(); len(v) > 0 {
		return res, fmt.Errorf("two writers in one epoch: %v", v)
	}
	return res, nil
}

// compared is one figure the model predicts beside the one measured.
type compared struct {
	op, extra  string
	pred, meas float64
	// tol is how far meas may be from pred, as a fraction of pred, when
	// the model is right; upper: pred is a bound meas may not exceed, and
	// tol how far below it meas may be.
	tol   float64
	upper bool
}

// capacityTolerance is how far from the model a measured figure may be
// before TestCapacity fails: the model averages what the simulation
// draws (heartbeat phases, move waits).
const capacityTolerance = 0.3

func (r CapacityResult) compare(f Figures) []compared {
	cfg := r.Config
	moves := ScaleOutMoves(cfg.Repos, cfg.Nodes, cfg.Added)
	p := float64(cfg.Added) / float64(cfg.Nodes+cfg.Added)
	sigma := math.Sqrt(float64(cfg.Repos) * p * (1 - p))
	tol := capacityTolerance
	return []compared{
		{"claim", fmt.Sprintf("concurrency=%d unit=claims_per_s", cfg.Concurrency),
			float64(cfg.Repos) / f.ClaimTime(cfg.Repos, cfg.Concurrency).Seconds(), r.ClaimsPerSec, tol, false},
		{"renew-writes", "unit=map_writes_per_round", f.RenewWrites(cfg.Nodes), r.RenewWrites, tol, false},
		{"renew-bytes", "unit=log_bytes_per_round", f.RenewBytesPerRound(cfg.Nodes), r.RenewBytes, tol, true},
		{"serve-all", fmt.Sprintf("concurrency=%d one_s=%.3f unit=s", cfg.Concurrency, r.One.Seconds()),
			f.ServeAll(cfg.Repos-probes, cfg.Concurrency, cfg.Nodes, r.One).Seconds(), r.ServeAll.Seconds(), tol, false},
		// Which repositories move is drawn by the hash: within 4σ.
		{"scale-out-misplaced", fmt.Sprintf("added=%d", cfg.Added), moves, float64(r.Misplaced), 4 * sigma / moves, false},
		// Every repository away from its winner moves once, none twice.
		{"scale-out-moves", fmt.Sprintf("added=%d", cfg.Added), float64(r.Misplaced), float64(r.Moves), 0, false},
		{"scale-out-time", fmt.Sprintf("added=%d in_flight=%d unit=s", cfg.Added, cfg.Rebalance),
			ScaleOutTime(float64(r.Misplaced), cfg.Rebalance).Seconds(), r.ScaleOut.Seconds(), tol, false},
	}
}

// Lines prints the measured figures beside those the model (model.go)
// predicts from f.
func (r CapacityResult) Lines(w io.Writer, f Figures) {
	cfg := r.Config
	for _, c := range r.compare(f) {
		fmt.Fprintf(w, "capacity op=%s nodes=%d repos=%d %s predicted=%s measured=%s\n", c.op, cfg.Nodes, cfg.Repos, c.extra, num(c.pred), num(c.meas))
	}
	fmt.Fprintf(w, "capacity op=renew-snapshots nodes=%d repos=%d rounds=%d snapshots=%d snapshot_bytes=%d\n",
		cfg.Nodes, cfg.Repos, cfg.Rounds, r.Snapshots, r.SnapshotBytes)
	fmt.Fprintf(w, "capacity op=rolling-restart nodes=%d repos=%d unit=s measured=%.1f\n", cfg.Nodes, cfg.Repos, r.Restart.Seconds())
}

// Misses lists the figures measured further from the model's than their
// tolerance.
func (r CapacityResult) Misses(f Figures) []string {
	var out []string
	for _, c := range r.compare(f) {
		off := (c.meas - c.pred) / c.pred
		if c.upper && off > 0 || math.Abs(off) > c.tol {
			out = append(out, fmt.Sprintf("%s: measured %s, the model says %s", c.op, num(c.meas), num(c.pred)))
		}
	}
	return out
}

// num prints a figure with one decimal below 1,000, none above.
func num(f float64) string {
	if math.Abs(f) >= 1000 {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%.1f", f)
}

func liveSet(nodes []string) rc.LiveSet {
	out := make(rc.LiveSet, len(nodes))
	for i, n := range nodes {
		out[i] = rc.NodeWeight{Node: n, Weight: 1}
	}
	return out
}

// parallel runs f(0) … f(n-1) on c workers and returns the first error.
func parallel(c, n int, f func(i int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range c {
		wg.Go(func() {
			for {
				mu.Lock()
				i, stop := next, next >= n || first != nil
				next++
				mu.Unlock()
				if stop {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// rollingRestart drains, stops and starts each node in turn, waiting
// until the leader has heard it again (a restarted leader has heard
// everyone). during, if not nil, runs while each node is down (back
// false) and once it is back (true).
func (c *Cluster) rollingRestart(ctx context.Context, nodes []string, during func(node string, back bool) error) error {
	for _, n := range nodes {
		node := c.Node(n)
		if node == nil {
			return fmt.Errorf("rolling restart: %s: %w", n, ErrNodeDown)
		}
		if err := node.Drain(ctx); err != nil {
			return fmt.Errorf("rolling restart: %w", err)
		}
		if err := c.Kill(n); err != nil {
			return fmt.Errorf("rolling restart: %w", err)
		}
		if during != nil {
			if err := during(n, false); err != nil {
				return err
			}
		}
		if err := c.Restart(n); err != nil {
			return fmt.Errorf("rolling restart: %w", err)
		}
		time.Sleep(rc.SettleTime)
		if during != nil {
			if err := during(n, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// liveHeld counts the repos whose entry in the leader's view is live.
func (c *Cluster) liveHeld(repos []names.Repo) int {
	v, now, n := c.Node(c.Leader()).OwnershipView(), time.Now(), 0
	for _, r := range repos {
		if e, ok := v.Get(r); ok && e.Live(now) {
			n++
		}
	}
	return n
}

// mapFiles are the ownership map's objects in the store, by key.
type mapFiles map[string]int64

type tally struct{ count, bytes int64 }

// mapObjects lists the ownership map's log records and snapshots.
func (c *Cluster) mapObjects(ctx context.Context) (mapFiles, error) {
	out := mapFiles{}
	for info, err := range c.Store.Inner().List(ctx, actors.OwnershipPrefix, "") {
		if err != nil {
			return nil, fmt.Errorf("list ownership map: %w", err)
		}
		out[info.Key] = info.Size
	}
	if len(out) == 0 {
		return nil, errors.New("list ownership map: no objects")
	}
	return out, nil
}

// since tallies the log records and snapshots in m not in before.
func (m mapFiles) since(before mapFiles) (wal, snap tally) {
	for k, size := range m {
		if _, ok := before[k]; ok {
			continue
		}
		t := &wal
		if strings.Contains(k, "/snap/") {
			t = &snap
		}
		t.count++
		t.bytes += size
	}
	return wal, snap
}

// describeAway tells what the leader's map says of the first few
// repositories still away from their winner, for a failed scale-out.
func (c *Cluster) describeAway(repos []names.Repo, winner []string, away []int) string {
	view, now := c.Node(c.Leader()).OwnershipView(), time.Now()
	var b strings.Builder
	for n, i := range away {
		if n == 10 {
			b.WriteString("; …")
			break
		}
		if n > 0 {
			b.WriteString("; ")
		}
		e, ok := view.Get(repos[i])
		fmt.Fprintf(&b, "%s (winner %s): ", repos[i], winner[i])
		if !ok {
			b.WriteString("no entry")
			continue
		}
		fmt.Fprintf(&b, "%s epoch %d session %d live %t written %s ago", e.Node, e.Epoch, e.Session, e.Live(now), now.Sub(e.Written))
	}
	return b.String()
}
