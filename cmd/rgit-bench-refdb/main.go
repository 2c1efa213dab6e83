// Command rgit-bench-refdb measures storage/refdb: committed transactions
// per second and median commit latency at several concurrencies, against
// the in-memory store with injected write latency and against a local S3
// server (versitygw via testkit/s3local), plus the time to open a database
// holding 10,000 committed transactions. It prints one line per
// measurement:
//
//	refdb store=<name> concurrency=<N> ops_per_sec=<X> p50_ms=<Y>
//	refdb-open store=<name> commits=10000 open_ms=<X> store_latency_ms=<L> round_trips=<X/L>
//
// It is a test command: it imports testkit (faultstore, s3local).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/testkit/s3local"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "rgit-bench-refdb:", err)
		os.Exit(1)
	}
}

// benchStore is one store under test. latency is the injected (or
// measured) per-request latency used to turn open time into round trips.
type benchStore struct {
	name string
	// commits returns the store commits are measured against.
	commits objstore.Store
	// open returns a store over the same data for timing Open, and the
	// latency of one of its round trips.
	open     func(ctx context.Context) (objstore.Store, time.Duration, error)
	close    func()
	populate int // concurrency used to write the 10,000 transactions
}

func run(ctx context.Context, args []string) error {
	fl := flag.NewFlagSet("rgit-bench-refdb", flag.ContinueOnError)
	stores := fl.String("stores", "mem-20ms,mem-100ms,s3-local", "stores to measure (comma-separated)")
	concs := fl.String("concurrency", "1,8,32,128,512", "concurrency levels (comma-separated)")
	dur := fl.Duration("duration", 2*time.Second, "measuring time per concurrency level")
	commits := fl.Int("open-commits", 10000, "committed transactions in the database timed by the open measurement")
	if err := fl.Parse(args); err != nil {
		return err
	}
	var levels []int
	for f := range strings.SplitSeq(*concs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-concurrency: bad level %q", f)
		}
		levels = append(levels, n)
	}
	for name := range strings.SplitSeq(*stores, ",") {
		name = strings.TrimSpace(name)
		bs, err := newStore(ctx, name)
		if errors.Is(err, s3local.ErrNoBinary) {
			fmt.Fprintf(os.Stderr, "rgit-bench-refdb: skipping %s: %v\n", name, err)
			continue
		}
		if err != nil {
			return err
		}
		err = benchStoreAll(ctx, bs, levels, *dur, *commits)
		bs.close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func benchStoreAll(ctx context.Context, bs benchStore, levels []int, dur time.Duration, commits int) error {
	for _, n := range levels {
		ops, p50, err := benchCommits(ctx, bs.commits, fmt.Sprintf("bench/c%d", n), n, dur)
		if err != nil {
			return fmt.Errorf("concurrency %d: %w", n, err)
		}
		fmt.Printf("refdb store=%s concurrency=%d ops_per_sec=%.0f p50_ms=%.1f\n", bs.name, n, ops, ms(p50))
	}
	openTime, lat, err := benchOpen(ctx, bs, commits)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	fmt.Printf("refdb-open store=%s commits=%d open_ms=%.1f store_latency_ms=%.1f round_trips=%.2f\n",
		bs.name, commits, ms(openTime), ms(lat), float64(openTime)/float64(lat))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// newStore builds a named store. Adding a store kind is one case here.
func newStore(ctx context.Context, name string) (benchStore, error) {
	var latency time.Duration
	switch name {
	case "mem-20ms":
		latency = 20 * time.Millisecond
	case "mem-100ms":
		latency = 100 * time.Millisecond
	case "s3-local":
		return newS3Store(ctx)
	default:
		return benchStore{}, fmt.Errorf("unknown store %q (want mem-20ms, mem-100ms or s3-local)", name)
	}
	mem := memstore.New()
	writes := faultstore.New(mem, 1)
	writes.AddRule(faultstore.Rule{Ops: faultstore.WriteOps, Latency: latency})
	return benchStore{
		name:    name,
		commits: writes,
		open: func(context.Context) (objstore.Store, time.Duration, error) {
			all := faultstore.New(mem, 2)
			all.AddRule(faultstore.Rule{Latency: latency})
			return all, latency, nil
		},
		close: func() {},
		// Population goes straight to memory: its latency is not measured.
		populate: 1,
	}, nil
}

func newS3Store(ctx context.Context) (benchStore, error) {
	dir, err := os.MkdirTemp("", "rgit-bench-refdb-s3-")
	if err != nil {
		return benchStore{}, err
	}
	srv, err := s3local.StartProcess(dir)
	if err != nil {
		os.RemoveAll(dir)
		return benchStore{}, err
	}
	cleanup := func() { srv.Close(); os.RemoveAll(dir) }
	st, err := s3store.New(ctx, srv.Config("bench"))
	if err != nil {
		cleanup()
		return benchStore{}, err
	}
	return benchStore{
		name:    "s3-local",
		commits: st,
		open: func(ctx context.Context) (objstore.Store, time.Duration, error) {
			lat, err := measureRoundTrip(ctx, st)
			return st, lat, err
		},
		close:    cleanup,
		populate: 32,
	}, nil
}

// measureRoundTrip is the median latency of a small GET.
func measureRoundTrip(ctx context.Context, st objstore.Store) (time.Duration, error) {
	const key = "bench/rtt-probe"
	if err := st.Put(ctx, key, strings.NewReader("x"), 1); err != nil {
		return 0, err
	}
	var lats []time.Duration
	for range 21 {
		start := time.Now()
		rc, _, err := st.Get(ctx, key)
		if err != nil {
			return 0, err
		}
		rc.Close()
		lats = append(lats, time.Since(start))
	}
	return median(lats), nil
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// benchCommits runs n committers for dur; each commits a compare-and-set
// update of its own ref (no conflicts), as a push would.
func benchCommits(ctx context.Context, st objstore.Store, prefix string, n int, dur time.Duration) (float64, time.Duration, error) {
	db, err := refdb.Open(ctx, st, prefix, refdb.Options{})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close(context.WithoutCancel(ctx))
	var (
		mu      sync.Mutex
		lats    []time.Duration
		done    atomic.Int64
		firstEr error
		wg      sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(dur)
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("refs/heads/w%04d", g)
			var old []byte
			local := make([]time.Duration, 0, 256)
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				val := fmt.Appendf(nil, "%040d", i)
				op := refdb.Create(key, val)
				if old != nil {
					op = refdb.Swap(key, old, val)
				}
				t0 := time.Now()
				if _, err := db.Commit(ctx, refdb.Txn{op}); err != nil {
					mu.Lock()
					firstEr = cmpErr(firstEr, err)
					mu.Unlock()
					break
				}
				local = append(local, time.Since(t0))
				done.Add(1)
				old = val
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstEr != nil {
		return 0, 0, firstEr
	}
	return float64(done.Load()) / elapsed.Seconds(), median(lats), nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// benchOpen writes commits transactions, then times Open through a store
// whose every request costs one round trip.
func benchOpen(ctx context.Context, bs benchStore, commits int) (time.Duration, time.Duration, error) {
	const prefix = "bench/open"
	src := bs.commits
	if ms, ok := bs.commits.(*faultstore.Store); ok {
		src = ms.Inner()
	}
	db, err := refdb.Open(ctx, src, prefix, refdb.Options{})
	if err != nil {
		return 0, 0, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, bs.populate)
	for range bs.populate {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(commits) {
					return
				}
				val := fmt.Appendf(nil, "%040d", i)
				if _, err := db.Commit(ctx, refdb.Txn{refdb.Set(fmt.Sprintf("refs/heads/b%06d", i), val)}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := db.Close(ctx); err != nil {
		return 0, 0, err
	}
	select {
	case err := <-errc:
		return 0, 0, err
	default:
	}
	st, lat, err := bs.open(ctx)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	db2, err := refdb.Open(ctx, st, prefix, refdb.Options{})
	elapsed := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	defer db2.Close(context.WithoutCancel(ctx))
	if got := db2.View().Len(); got != commits {
		return 0, 0, fmt.Errorf("opened database holds %d keys, want %d", got, commits)
	}
	return elapsed, lat, nil
}
