package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rgit/rgit/actors"
	rc "github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
)

// The lease plane in one process, on an in-memory store with a fixed
// injected latency on every call (a cross-region bucket), so the figures
// are reproducible:
//
//	cluster op=store-write store=mem-100ms ms=<one object write, median of 5>
//	cluster op=claim store=mem-100ms concurrency=<c> claims_per_sec=<X> p50_ms=<Y> errors=<E> map_writes=<W>
//	cluster op=restart-storm repos=<n> store=mem-100ms seconds_until_all_served=<S> served=<k> cpu_s=<C>
//
// op=claim runs c claimers of distinct repositories against the real
// leader actor for a fixed time (-claim-for; 0 skips it); map_writes is
// how many writes carried the claims. op=restart-storm restarts a node whose
// repositories are all named by the map and opens every one of them again
// at once through the path a request takes (Node.Session: route, claim
// from the leader node, open), until all are served or the time limit;
// cpu_s is the process's CPU time meanwhile (on a loaded machine the
// storm is bound by the CPU it gets, not by the store's latency).

// leaseLatency is the injected store latency.
const leaseLatency = 100 * time.Millisecond

// leaseStore is a memory store behind a faultstore; slow adds the latency.
type leaseStore struct {
	*faultstore.Store
	rule faultstore.RuleID
}

func newLeaseStore() *leaseStore { return &leaseStore{Store: faultstore.New(memstore.New(), 1)} }

func (s *leaseStore) slow() { s.rule = s.AddRule(faultstore.Rule{Latency: leaseLatency}) }

func runLeaseBench(ctx context.Context, w io.Writer, claimFor time.Duration, repos int, stormLimit time.Duration) error {
	if err := storeWrite(ctx, w); err != nil {
		return err
	}
	for _, c := range []int{1, 64, 512} {
		if claimFor == 0 {
			break
		}
		if err := claimBench(ctx, w, c, claimFor); err != nil {
			return err
		}
	}
	return restartStorm(ctx, w, repos, stormLimit)
}

// storeWrite reports one write to the slow store, the unit the claim
// latency is compared with.
func storeWrite(ctx context.Context, w io.Writer) error {
	st := newLeaseStore()
	st.slow()
	var ds []time.Duration
	for i := range 5 {
		start := time.Now()
		if err := st.PutIfAbsent(ctx, fmt.Sprintf("probe/%d", i), strings.NewReader("x"), 1); err != nil {
			return err
		}
		ds = append(ds, time.Since(start))
	}
	fmt.Fprintf(w, "cluster op=store-write store=mem-100ms ms=%.1f\n", ms(medianDur(ds)))
	return nil
}

// claimBench runs c claimers, each claiming new repositories one after
// another for d, against the leader actor of a fresh cluster.
func claimBench(ctx context.Context, w io.Writer, c int, d time.Duration) error {
	st := newLeaseStore()
	st.slow()
	n, err := actors.NewNode(actors.Config{Deps: repo.Deps{Store: st},
		Cluster: &actors.ClusterConfig{Self: "rgit-0", Steer: actors.SteerOff}})
	if err != nil {
		return err
	}
	defer n.Shutdown(context.Background())
	svc := n.LeaderService()
	st.ResetCounts()
	var (
		mu   sync.Mutex
		lats []time.Duration
		errs atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for i := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for j := 0; time.Now().Before(end) && ctx.Err() == nil; j++ {
				t := time.Now()
				dec, err := svc.Claim(ctx, rc.ClaimLease{Repo: names.MustParse(fmt.Sprintf("bench/c%d-%d", i, j)), Node: "rgit-1"})
				if err != nil || dec.Outcome != rc.Granted {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	fmt.Fprintf(w, "cluster op=claim store=mem-100ms concurrency=%d claims_per_sec=%.0f p50_ms=%.1f errors=%d map_writes=%d\n",
		c, float64(len(lats))/secs, ms(medianDur(lats)), errs.Load(), st.Count(faultstore.OpPutIfAbsent))
	return ctx.Err()
}

// restartStorm: rgit-1 held repos repositories (the map names it for all
// of them) and restarts; every repository is then requested once, all at
// once, through the restarted node. The clock runs from the first request
// to the last one served.
func restartStorm(ctx context.Context, w io.Writer, repos int, limit time.Duration) error {
	st := newLeaseStore()
	cacheDir, err := os.MkdirTemp("", "rgit-bench-storm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cacheDir)
	cache, err := packcache.Open(cacheDir, st, nil)
	if err != nil {
		return err
	}
	defer cache.Close()
	deps := repo.Deps{Store: st, Cache: cache}
	repoNames := make([]string, repos)
	for i := range repoNames {
		repoNames[i] = fmt.Sprintf("r%05d", i)
	}
	// Set-up at memory speed: the repositories, and the map naming rgit-1
	// for each (its leases before the restart).
	if err := parallel(ctx, repoNames, 16, func(name string) error { return repo.Create(ctx, deps, names.MustParse("bench/"+name)) }); err != nil {
		return err
	}
	n0, err := actors.NewNode(actors.Config{Deps: deps, Cluster: &actors.ClusterConfig{Self: "rgit-0", Steer: actors.SteerOff}})
	if err != nil {
		return err
	}
	defer n0.Shutdown(context.Background())
	svc := n0.LeaderService()
	if err := parallel(ctx, repoNames, 64, func(name string) error {
		_, err := svc.Claim(ctx, rc.ClaimLease{Repo: names.MustParse("bench/" + name), Node: "rgit-1"})
		return err
	}); err != nil {
		return fmt.Errorf("seed the map: %w", err)
	}

	st.slow()
	n1, err := actors.NewNode(actors.Config{Deps: deps, MaxWarm: 2 * repos, WarmTTL: time.Hour,
		Cluster: &actors.ClusterConfig{Self: "rgit-1", Leader: svc}})
	if err != nil {
		return err
	}
	defer n1.Shutdown(context.Background())
	// The restarted node serves once it has a view of the map.
	for {
		if _, ok := n1.MapAge(time.Now()); ok {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	sctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var served atomic.Int64
	var firstErr atomic.Pointer[error]
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	for _, name := range repoNames {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := n1.Session(sctx, names.MustParse("bench/"+name))
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
				return
			}
			s.Release()
			served.Add(1)
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	cpu := cpuTime() - cpu0
	all := fmt.Sprintf("%.2f", secs)
	if int(served.Load()) < repos {
		all = fmt.Sprintf(">%.0f", secs)
	}
	fmt.Fprintf(w, "cluster op=restart-storm repos=%d store=mem-100ms seconds_until_all_served=%s served=%d cpu_s=%.2f\n",
		repos, all, served.Load(), cpu.Seconds())
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "  note op=restart-storm first error: %v\n", *e)
	}
	return ctx.Err()
}

// parallel runs f on every item with at most k at once; the first error
// wins.
func parallel(ctx context.Context, items []string, k int, f func(string) error) error {
	sem := make(chan struct{}, k)
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for _, it := range items {
		if first.Load() != nil || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(it); err != nil {
				first.CompareAndSwap(nil, &err)
			}
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return ctx.Err()
}

func medianDur(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration { return rusageCPU(syscall.RUSAGE_SELF) }

// rusageCPU is the user and system CPU time of who (RUSAGE_SELF, or
// RUSAGE_CHILDREN: every child process waited for so far).
func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(who, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
