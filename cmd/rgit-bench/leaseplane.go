package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
)

// runLeasePlane measures the ownership map's cost at fleet scale, in
// process on an in-memory store (with injected latency where it says
// store=mem-100ms), so the figures are reproducible:
//
//	cluster op=renew store=mem-100ms leases=<n> bytes_written=<one renewal's store bytes> ms=<its latency>
//	cluster op=map-load entries=<n, default 1000000> ms=<leader start: open + load> cpu_ms=<its CPU time> rss_mb=<heap kept by the loaded map> b_per_entry=<same, per entry>
//	cluster op=follower-poll entries=<n> changes=100 ms=<one poll after 100 committed changes> bytes_read=<store bytes it read>
func runLeasePlane(ctx context.Context, renew []int, entries int) error {
	for _, n := range renew {
		if err := benchRenew(ctx, n); err != nil {
			return fmt.Errorf("renew leases=%d: %w", n, err)
		}
	}
	if err := benchMapLoad(ctx, entries); err != nil {
		return fmt.Errorf("map-load: %w", err)
	}
	if err := benchFollowerPoll(ctx, entries, 100); err != nil {
		return fmt.Errorf("follower-poll: %w", err)
	}
	return nil
}

// countingStore counts the bytes written to and read from a store (keys
// listed count as read).
type countingStore struct {
	objstore.Store
	written, read atomic.Int64
}

func (c *countingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	c.written.Add(size)
	return c.Store.Put(ctx, key, r, size)
}

func (c *countingStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	c.written.Add(size)
	return c.Store.PutIfAbsent(ctx, key, r, size)
}

func (c *countingStore) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	rc, info, err := c.Store.Get(ctx, key)
	if err == nil {
		c.read.Add(info.Size)
	}
	return rc, info, err
}

func (c *countingStore) List(ctx context.Context, prefix, startAfter string) iter.Seq2[objstore.ObjectInfo, error] {
	return func(yield func(objstore.ObjectInfo, error) bool) {
		for info, err := range c.Store.List(ctx, prefix, startAfter) {
			c.read.Add(int64(len(info.Key)))
			if !yield(info, err) {
				return
			}
		}
	}
}

// benchNode is the bench's in-process node: "rgit-0", the leader, unless
// leader is false.
const benchHolder = "rgit-1"

func benchRepo(i int) names.Repo {
	return names.MustParse("o" + strconv.Itoa(i%1000) + "/r" + strconv.Itoa(i))
}

// seedMap writes an ownership map with n live entries owned by
// benchHolder, bound to its session 1, straight into the store.
func seedMap(ctx context.Context, st objstore.Store, n int) error {
	// Snapshot often, as a long-lived map would have: loads start from a
	// snapshot, not a replay of the seeding.
	db, err := refdb.Open(ctx, st, actors.OwnershipPrefix, refdb.Options{SnapshotEvery: 8})
	if err != nil {
		return err
	}
	now := time.Now()
	key, _ := cluster.SessionKey(benchHolder)
	sb, err := cluster.NodeSession{ID: 1, Expires: now.Add(time.Hour), Renewed: now, Started: now}.MarshalBinary()
	if err != nil {
		return err
	}
	if _, err := db.Commit(ctx, refdb.Txn{refdb.Set(key, sb)}); err != nil {
		return err
	}
	const batch = 10000
	for i := 0; i < n; i += batch {
		var txn refdb.Txn
		for j := i; j < min(i+batch, n); j++ {
			key := cluster.Key(benchRepo(j))
			e := cluster.Entry{Node: benchHolder, Written: now, Epoch: 1, Session: 1}
			b, err := e.MarshalBinary()
			if err != nil {
				return err
			}
			txn = append(txn, refdb.Set(key, b))
		}
		if _, err := db.Commit(ctx, txn); err != nil {
			return err
		}
	}
	return db.Close(ctx)
}

func startBenchLeader(st objstore.Store) (*actors.Node, error) {
	return actors.NewNode(actors.Config{Deps: repo.Deps{Store: st}, MaintenanceSlots: -1,
		Cluster: &actors.ClusterConfig{Self: "rgit-0", Steer: actors.SteerOff}})
}

func benchRenew(ctx context.Context, n int) error {
	fs := faultstore.New(memstore.New(), 1)
	cs := &countingStore{Store: fs}
	if err := seedMap(ctx, cs, n); err != nil {
		return err
	}
	node, err := startBenchLeader(cs)
	if err != nil {
		return err
	}
	defer node.Shutdown(ctx)
	fs.AddRule(faultstore.Rule{Latency: 100 * time.Millisecond})
	// The median of renewRuns renewals: the leader node's own heartbeat
	// may share (and delay) one.
	const renewRuns = 5
	cs.written.Store(0)
	var took []time.Duration
	for range renewRuns {
		start := time.Now()
		r, err := node.LeaderService().Renew(ctx, cluster.RenewLeases{Node: benchHolder, Session: 1})
		if err != nil {
			return err
		}
		took = append(took, time.Since(start))
		if r.SessionDeclined {
			return fmt.Errorf("session declined")
		}
	}
	fmt.Printf("cluster op=renew store=mem-100ms leases=%d bytes_written=%d ms=%d\n", n, cs.written.Load()/renewRuns, medianDur(took).Milliseconds())
	return nil
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func benchMapLoad(ctx context.Context, n int) error {
	st := memstore.New()
	if err := seedMap(ctx, st, n); err != nil {
		return err
	}
	before := heapInUse()
	cpu0 := cpuTime()
	start := time.Now()
	node, err := startBenchLeader(st)
	if err != nil {
		return err
	}
	el, cpu := time.Since(start), cpuTime()-cpu0
	kept := heapInUse() - before
	fmt.Printf("cluster op=map-load entries=%d ms=%d cpu_ms=%d rss_mb=%.0f b_per_entry=%d\n", n, el.Milliseconds(), cpu.Milliseconds(),
		float64(kept)/(1<<20), kept/uint64(n))
	runtime.KeepAlive(st)
	return node.Shutdown(ctx)
}

func benchFollowerPoll(ctx context.Context, n, changes int) error {
	st := memstore.New()
	if err := seedMap(ctx, st, n); err != nil {
		return err
	}
	cs := &countingStore{Store: st}
	f, err := refdb.OpenFollower(ctx, cs, actors.OwnershipPrefix, refdb.Options{PollInterval: time.Hour})
	if err != nil {
		return err
	}
	defer f.Close()
	node, err := startBenchLeader(st)
	if err != nil {
		return err
	}
	defer node.Shutdown(ctx)
	leader := node.LeaderService()
	for i := range changes {
		if _, err := leader.Release(ctx, cluster.ReleaseLease{Node: benchHolder, Repo: benchRepo(i)}); err != nil {
			return err
		}
	}
	cs.read.Store(0)
	seq := f.View().Seq()
	start := time.Now()
	if err := f.Refresh(ctx); err != nil {
		return err
	}
	el := time.Since(start)
	if got := f.View().Seq() - seq; got < uint64(changes) {
		fmt.Fprintf(os.Stderr, "  note op=follower-poll records=%d (fewer than the changes: batched)\n", got)
	}
	fmt.Printf("cluster op=follower-poll entries=%d changes=%d ms=%d bytes_read=%d\n", n, changes, el.Milliseconds(), cs.read.Load())
	return nil
}
