package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/scale"
)

// TestRandomized pushes concurrently through random nodes while killing,
// restarting and partitioning nodes (the leader included), then checks
// that every acknowledged push is durable and that no two nodes ever
// committed to one repository under the same lease epoch. Each seed is
// one run in fake time; RGIT_CLUSTER_SEEDS raises the count (default 20).
func TestRandomized(t *testing.T) {
	seeds := scale.Count(t, "RGIT_CLUSTER_SEEDS", 20)
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomRun(t, uint64(seed)) })
		})
	}
}

type ack struct {
	repo, ref string
	v         uint64
}

func randomRun(t *testing.T, seed uint64) {
	const (
		nodes   = 3
		repos   = 4
		workers = 4
		pushes  = 15
		chaos   = 12
	)
	c, err := New(Options{Nodes: nodes, Seed: int64(seed), WarmTTL: 4 * time.Second})
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
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)+1))
		wg.Go(func() {
			for i := range pushes {
				time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
				entry := c.Names()[rng.IntN(nodes)]
				r := names[rng.IntN(repos)]
				ref := fmt.Sprintf("refs/heads/w%d-%d", w, i)
				v := uint64(w*1000 + i + 1)
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, _, err := c.Push(rctx, entry, r, ref, v)
				cancel()
				mu.Lock()
				attempts++
				if err == nil {
					acked = append(acked, ack{r, ref, v})
				} else {
					failed++
				}
				mu.Unlock()
			}
		})
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	wg.Go(func() {
		for range chaos {
			time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
			name := c.Names()[rng.IntN(nodes)]
			switch op := rng.IntN(4); {
			case op == 0 && c.Node(name) != nil:
				if err := c.Kill(name); err != nil {
					t.Errorf("kill %s: %v", name, err)
				}
			case op <= 1 && c.Node(name) == nil:
				if err := c.Restart(name); err != nil {
					t.Errorf("restart %s: %v", name, err)
				}
			case op == 2:
				c.Net.Partition(name, true)
			default:
				c.Net.Partition(name, false)
			}
		}
		// Bring everything back so the final reads see a whole cluster.
		c.Net.HealAll()
		for _, name := range c.Names() {
			if c.Node(name) == nil {
				if err := c.Restart(name); err != nil {
					t.Errorf("restart %s: %v", name, err)
				}
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
	if len(acked) == 0 {
		t.Errorf("no push acknowledged out of %d", attempts)
	}
	t.Logf("seed %d: %d/%d pushes acknowledged", seed, attempts-failed, attempts)
}
