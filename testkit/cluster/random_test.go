package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	rc "github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/scale"
)

// livenessBound is how long after the chaos healed every repository must
// accept a push: a stale entry lapses within a TTL and its former holder
// hears of it at its next renewal. In all of seeds 0-1999 the first push
// through every node succeeds at once.
const livenessBound = rc.TTL + rc.RenewEvery

// TestRandomized pushes concurrently through random nodes while killing,
// restarting and partitioning nodes (the leader included) and replaying
// nodes' session renewals late (stale after a restart), then heals
// everything and checks liveness (every repository accepts a push within
// livenessBound), that every acknowledged push is durable and that no two
// nodes ever committed to one repository under the same lease epoch. Each
// seed is one run in fake time. RGIT_CLUSTER_SEEDS sets the seed count
// (default defaultSeeds: 200, or 50 under -race); RGIT_CLUSTER_SEED=N runs
// seed N alone and logs its trace (pushes, chaos, node logs at debug
// level). A failing seed logs its trace of pushes and chaos.
func TestRandomized(t *testing.T) {
	if s := os.Getenv("RGIT_CLUSTER_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RGIT_CLUSTER_SEED=%q: %v", s, err)
		}
		synctest.Test(t, func(t *testing.T) { randomRun(t, seed, true) })
		return
	}
	seeds := scale.Count(t, "RGIT_CLUSTER_SEEDS", defaultSeeds)
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomRun(t, uint64(seed), false) })
		})
	}
}

type ack struct {
	repo, ref string
	v         uint64
}

// trace collects a run's events with their fake-time offsets; it is also
// the node logs' sink when a single seed is traced.
type trace struct {
	mu    sync.Mutex
	t0    time.Time
	lines []string
}

func (tr *trace) add(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines = append(tr.lines, fmt.Sprintf("%9s ", time.Since(tr.t0).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

// Write takes one encoded zap entry.
func (tr *trace) Write(p []byte) (int, error) {
	tr.add("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (tr *trace) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.lines, "\n")
}

func randomRun(t *testing.T, seed uint64, verbose bool) {
	const (
		nodes   = 3
		repos   = 4
		workers = 4
		pushes  = 15
		chaos   = 12
	)
	tr := &trace{t0: time.Now()}
	opts := Options{Nodes: nodes, Seed: int64(seed), WarmTTL: 4 * time.Second}
	if verbose {
		enc := zap.NewDevelopmentEncoderConfig()
		enc.TimeKey = "" // the trace prints fake-time offsets
		opts.Log = zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(tr), zap.DebugLevel))
	}
	defer func() {
		if verbose || t.Failed() {
			t.Logf("seed %d trace:\n%s", seed, tr)
		}
	}()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer settle()
	defer c.Close()
	ctx := context.Background()
	names := make([]string, repos)
	for i := range names {
		names[i] = fmt.Sprintf("alice/r%d", i)
		if err := repo.Create(ctx, c.Deps(), "alice", fmt.Sprintf("r%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	var acked []ack
	attempts, failed := 0, 0
	// push pushes ref=v to r through entry and records the outcome.
	push := func(entry, r, ref string, v uint64) error {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		node, epoch, err := c.Push(rctx, entry, r, ref, v)
		cancel()
		if err != nil {
			tr.add("push %s %s via %s: %v", r, ref, entry, err)
		} else {
			tr.add("push %s %s via %s: ok at %s epoch %d", r, ref, entry, node, epoch)
		}
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if err == nil {
			acked = append(acked, ack{r, ref, v})
		} else {
			failed++
		}
		return err
	}
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)+1))
		wg.Go(func() {
			for i := range pushes {
				time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
				push(c.Names()[rng.IntN(nodes)], names[rng.IntN(repos)], fmt.Sprintf("refs/heads/w%d-%d", w, i), uint64(w*1000+i+1))
			}
		})
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	// Late renewals draw from their own stream, so the chaos below stays
	// what each seed always did.
	late := rand.New(rand.NewPCG(seed, 1<<32))
	wg.Go(func() {
		for range chaos {
			if late.IntN(3) == 0 {
				name := c.Names()[late.IntN(nodes)]
				m, r, ok, err := c.ReplayRenewal(ctx, name)
				if ok {
					tr.add("chaos: late renewal of %s session %d: %+v %v", name, m.Session, r, err)
				}
			}
			time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
			name := c.Names()[rng.IntN(nodes)]
			switch op := rng.IntN(4); {
			case op == 0 && c.Node(name) != nil:
				tr.add("chaos: kill %s", name)
				if err := c.Kill(name); err != nil {
					t.Errorf("kill %s: %v", name, err)
				}
			case op <= 1 && c.Node(name) == nil:
				tr.add("chaos: restart %s", name)
				if err := c.Restart(name); err != nil {
					t.Errorf("restart %s: %v", name, err)
				}
			case op == 2:
				tr.add("chaos: partition %s", name)
				c.Net.Partition(name, true)
			default:
				tr.add("chaos: heal %s", name)
				c.Net.Partition(name, false)
			}
		}
		// Bring everything back, for the liveness check and the final reads.
		tr.add("chaos: heal all, restart every killed node")
		c.Net.HealAll()
		for _, name := range c.Names() {
			if c.Node(name) == nil {
				if err := c.Restart(name); err != nil {
					t.Errorf("restart %s: %v", name, err)
				}
			}
		}
		// Liveness: with the cluster whole again no repository or node may
		// stay in a state it never leaves, so every repository accepts a
		// push entered at every node within livenessBound, while the
		// workers may still be pushing. The chaos itself may refuse every
		// push: in seeds 555 and 1947 the leader dies before the first
		// claim and is back only here, and without failover nothing can be
		// claimed meanwhile (testdata/leader_down_cold.txt). So liveness is
		// asserted from the heal on, not as "some push was acknowledged".
		healed := time.Now()
		for _, entry := range c.Names() {
			for _, r := range names {
				wg.Go(func() {
					for attempt := 0; ; attempt++ {
						ref := fmt.Sprintf("refs/heads/live-%s-%d", entry, attempt)
						err := push(entry, r, ref, uint64(100000+attempt))
						if err == nil {
							return
						}
						if time.Since(healed) >= livenessBound {
							e, ok := c.Entry(entry, r)
							t.Errorf("liveness: %s accepted no push through %s within %s of the heal; last error: %v; %s's entry: %+v (present %v)",
								r, entry, livenessBound, err, entry, e, ok)
							return
						}
						time.Sleep(rc.FollowerPoll)
					}
				})
			}
		}
	})
	wg.Wait()

	for _, a := range acked {
		refs, err := c.Refs(ctx, a.repo)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := refs[a.ref]; !ok || got != a.v {
			t.Errorf("acknowledged push %s %s=%d lost (got %d, present %v)", a.repo, a.ref, a.v, got, ok)
		}
	}
	for _, v := range c.Violations() {
		t.Errorf("two writers in one epoch: %s", v)
	}
	t.Logf("seed %d: %d/%d pushes acknowledged", seed, attempts-failed, attempts)
}
