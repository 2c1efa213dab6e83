package refdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/testkit/scale"
)

// TestRandomizedTakeovers runs seeded histories: writers take turns (each
// opens while the previous one is still committing from several
// goroutines), the store injects errors (before and after the write),
// latency and jitter, and followers poll. Invariants:
//   - every acknowledged commit is visible to every later writer and
//     follower, and in the final state;
//   - every transaction is applied whole or not at all, and the CAS
//     counter equals the number of applied transactions;
//   - only a writer that was superseded ever sees ErrFenced (and, by the
//     first invariant, nothing it acknowledged is missing);
//   - the writers make progress: at least minAcked commits are
//     acknowledged, so a database that rejects every commit (and so loses
//     none) fails.
//
// REFDB_SEEDS=N runs N seeds (default 20).
func TestRandomizedTakeovers(t *testing.T) {
	seeds := scale.Count(t, "REFDB_SEEDS", 20)
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runHistory(t, int64(seed))
		})
	}
}

// minAcked is the liveness floor of one history. A commit fails only by
// conflicting with a concurrent one or by meeting an injected fault, so
// each writer's turn acknowledges several: the histories here acknowledge
// about 29 on average and 18 at the least over 300 seeds. 8 (two per
// writer) leaves room for that spread and still fails a database that
// acknowledges almost nothing.
const minAcked = 8

type history struct {
	mu       sync.Mutex
	acked    map[int]bool // txn id -> acknowledged
	nextID   atomic.Int64
	attempts atomic.Int64
}

func (h *history) ackedIDs() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []int
	for id := range h.acked {
		ids = append(ids, id)
	}
	return ids
}

func txnKeys(id int) (string, string) {
	return fmt.Sprintf("t/%06d/a", id), fmt.Sprintf("t/%06d/b", id)
}

func checkAcked(v *View, ids []int) error {
	for _, id := range ids {
		a, b := txnKeys(id)
		_, okA := v.Get(a)
		_, okB := v.Get(b)
		if !okA || !okB {
			return fmt.Errorf("acknowledged txn %d missing at seq %d (a=%v b=%v)", id, v.Seq(), okA, okB)
		}
	}
	return nil
}

func runHistory(t *testing.T, seed int64) {
	ctx := testCtx(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	mem, _ := newStores(seed)
	wal := testPrefix + "/wal/"
	faulty := func(n int64) *faultstore.Store {
		fs := faultstore.New(mem, seed*1000+n)
		fs.AddRule(faultstore.Rule{Latency: 50 * time.Microsecond, Jitter: 500 * time.Microsecond})
		fs.AddRule(faultstore.Rule{Ops: faultstore.OpPutIfAbsent, Prefix: wal, FailBefore: 0.08, FailAfter: 0.08})
		fs.AddRule(faultstore.Rule{Ops: faultstore.ReadOps, FailBefore: 0.03})
		return fs
	}
	opts := Options{SnapshotEvery: 2 + rng.IntN(6)}
	h := &history{acked: map[int]bool{}}

	// Retries an operation that may hit injected faults.
	retry := func(what string, f func() error) {
		t.Helper()
		var err error
		for range 200 {
			if err = f(); err == nil {
				return
			}
		}
		t.Fatalf("%s kept failing: %v", what, err)
	}

	var follower *Follower
	fs0, fs1 := faulty(0), faulty(1)
	retry("first open", func() error {
		db, err := Open(ctx, fs0, testPrefix, opts)
		if err == nil {
			db.Close(ctx)
		}
		return err
	})
	retry("follower open", func() error {
		var err error
		follower, err = OpenFollower(ctx, fs1, testPrefix, Options{PollInterval: time.Hour})
		return err
	})
	defer follower.Close()

	const writers, workers, perWorker = 4, 4, 12
	var prev *DB
	var prevDone chan struct{}
	standDowns := 0 // writers whose fence check found a live predecessor
	for w := range writers {
		before := h.ackedIDs()
		var db *DB
		fs := faulty(int64(10 + w))
		retry("writer open", func() error {
			var err error
			db, err = Open(ctx, fs, testPrefix, opts)
			return err
		})
		if err := checkAcked(db.View(), before); err != nil {
			t.Fatalf("writer %d at open: %v", w, err)
		}
		if prevDone != nil {
			<-prevDone
			prev.Close(ctx)
		}
		// The previous writer could only acknowledge records below our
		// fence, all of which Open read: now that its workers are done,
		// everything it acknowledged is in our state.
		if err := checkAcked(db.View(), h.ackedIDs()); err != nil && !db.stoodDown.Load() {
			t.Fatalf("writer %d after its predecessor stopped: %v", w, err)
		}

		fencedOK := &atomic.Bool{}
		done := make(chan struct{})
		half := make(chan struct{})
		var halfOnce sync.Once
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perWorker {
					id := int(h.nextID.Add(1))
					a, b := txnKeys(id)
					cur, _ := db.Get("ctr")
					n, _ := strconv.Atoi(string(cur))
					txn := Txn{Set(a, []byte("x")), Set(b, []byte("y"))}
					if cur == nil {
						txn = append(txn, Create("ctr", []byte("1")))
					} else {
						txn = append(txn, Swap("ctr", cur, []byte(strconv.Itoa(n+1))))
					}
					_, err := db.Commit(ctx, txn)
					if h.attempts.Add(1) >= int64(workers*perWorker/2) {
						halfOnce.Do(func() { close(half) })
					}
					switch {
					case err == nil:
						h.mu.Lock()
						h.acked[id] = true
						h.mu.Unlock()
					case errors.Is(err, ErrFenced):
						if !fencedOK.Load() && !db.stoodDown.Load() {
							t.Errorf("writer %d fenced while it was the newest writer: %v", w, err)
						}
						return
					case errors.Is(err, ErrConflict), errors.Is(err, ErrUncertain), errors.Is(err, faultstore.ErrInjected):
					default:
						t.Errorf("writer %d: unexpected commit error: %v", w, err)
						return
					}
				}
			}()
		}
		go func() {
			wg.Wait()
			halfOnce.Do(func() { close(half) })
			close(done)
		}()
		<-half
		h.attempts.Store(0)
		// The next writer takes over while this one is mid-flight.
		fencedOK.Store(true)
		prev, prevDone = db, done
		if db.stoodDown.Load() {
			standDowns++
		}

		retry("follower refresh", func() error { return follower.Refresh(ctx) })
		// The refresh began after these were acknowledged.
		if err := checkAcked(follower.View(), before); err != nil {
			t.Fatalf("follower after writer %d: %v", w, err)
		}
	}
	<-prevDone
	prev.Close(ctx)

	// Final state through a fault-free writer.
	clean := faultstore.New(mem, seed)
	final, err := Open(ctx, clean, testPrefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer final.Close(ctx)
	v := final.View()
	if err := checkAcked(v, h.ackedIDs()); err != nil {
		t.Fatal(err)
	}
	if n := len(h.ackedIDs()); n < minAcked {
		t.Fatalf("liveness: %d of %d transactions acknowledged, want at least %d", n, h.nextID.Load(), minAcked)
	}
	applied := 0
	for id := 1; id <= int(h.nextID.Load()); id++ {
		a, b := txnKeys(id)
		_, okA := v.Get(a)
		_, okB := v.Get(b)
		if okA != okB {
			t.Fatalf("txn %d half applied", id)
		}
		if okA {
			applied++
		}
	}
	ctr, _ := v.Get("ctr")
	if got, _ := strconv.Atoi(string(ctr)); got != applied {
		t.Fatalf("ctr = %d, but %d transactions applied", got, applied)
	}
	// A fault-free follower refresh converges to the writer's state.
	f2, err := OpenFollower(ctx, clean, testPrefix, Options{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	retry("final follower refresh", func() error { return follower.Refresh(context.WithoutCancel(ctx)) })
	for _, fv := range []*View{f2.View(), follower.View()} {
		if err := diffMaps(contents(fv), contents(v)); err != nil || fv.Seq() != v.Seq() {
			t.Fatalf("follower at seq %d did not converge to %d: %v", fv.Seq(), v.Seq(), err)
		}
	}
	t.Logf("seed %d: %d txns tried, %d acknowledged, %d applied, final seq %d, %d stand-downs",
		seed, h.nextID.Load(), len(h.ackedIDs()), applied, v.Seq(), standDowns)
}
