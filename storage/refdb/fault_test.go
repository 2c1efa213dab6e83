package refdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/testkit/faultstore"
)

// For every kind of failed log write: the failing commit is not
// acknowledged, the next commit settles the outcome first, and a reopen
// sees exactly the acknowledged commits plus the failed one either whole
// or not at all.
func TestDurabilityUnderWriteFaults(t *testing.T) {
	wal := testPrefix + "/wal/"
	cases := []struct {
		name string
		// inject arms the fault for the next log write; it returns a
		// function that disarms it.
		inject func(fs *faultstore.Store) func()
		opts   Options
		// landed: whether the failed record is in the store afterwards.
		landed bool
	}{
		{name: "fail-before", inject: func(fs *faultstore.Store) func() {
			fs.FailNext(faultstore.OpPutIfAbsent, wal, 1, false)
			return func() {}
		}},
		{name: "fail-after", landed: true, inject: func(fs *faultstore.Store) func() {
			fs.FailNext(faultstore.OpPutIfAbsent, wal, 1, true)
			return func() {}
		}},
		{name: "outage", inject: func(fs *faultstore.Store) func() {
			fs.SetOutage(true)
			return func() { fs.SetOutage(false) }
		}},
		{name: "latency-timeout-before", opts: Options{WriteTimeout: 20 * time.Millisecond},
			inject: func(fs *faultstore.Store) func() {
				id := fs.AddRule(faultstore.Rule{Ops: faultstore.OpPutIfAbsent, Prefix: wal, Latency: time.Hour})
				return func() { fs.RemoveRule(id) }
			}},
		{name: "latency-timeout-after", landed: true, opts: Options{WriteTimeout: 20 * time.Millisecond},
			inject: func(fs *faultstore.Store) func() {
				id := fs.AddRule(faultstore.Rule{Ops: faultstore.OpPutIfAbsent, Prefix: wal, LatencyAfter: time.Hour})
				return func() { fs.RemoveRule(id) }
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			mem, fs := newStores(1)
			db := mustOpen(t, ctx, fs, tc.opts)
			mustCommit(t, ctx, db, Set("a", []byte("1")))
			acked := contents(db.View())
			seqBefore := db.View().Seq()

			disarm := tc.inject(fs)
			_, err := db.Commit(ctx, Txn{Set("a", []byte("2")), Set("b", []byte("2"))})
			if err == nil {
				t.Fatal("commit acknowledged despite a failed write")
			}
			if !errors.Is(err, ErrUncertain) {
				t.Fatalf("err = %v, want ErrUncertain", err)
			}
			if db.View().Seq() != seqBefore {
				t.Fatal("unacknowledged batch became visible before it was settled")
			}
			if got := countKeys(t, mem, seqKey(testPrefix+"/", walDir, seqBefore+1)); (got == 1) != tc.landed {
				t.Fatalf("failed record present=%v, want %v", got == 1, tc.landed)
			}
			// While the fault lasts nothing is acknowledged.
			if tc.name == "outage" {
				if _, err := db.Commit(ctx, Txn{Set("c", nil)}); err == nil {
					t.Fatal("commit acknowledged during an outage")
				}
			}
			disarm()

			// The next commit settles the failed record (rewriting it) and
			// then lands after it.
			mustCommit(t, ctx, db, Set("d", []byte("4")))
			acked["d"] = "4"
			v := db.View()
			if _, ok := v.Get("b"); !ok {
				t.Fatal("settled record not applied: the ambiguous batch is rewritten before new writes")
			}
			acked["a"], acked["b"] = "2", "2"
			if err := diffMaps(contents(v), acked); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(ctx); err != nil {
				t.Fatal(err)
			}
			db2 := mustOpen(t, ctx, fs, Options{})
			if err := diffMaps(contents(db2.View()), acked); err != nil {
				t.Fatalf("after reopen: %v", err)
			}
		})
	}
}

// A writer that fails while settling keeps failing commits and never
// acknowledges anything until the store is back.
func TestSettleFailureBlocksLaterCommits(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	fs.FailNext(faultstore.OpPutIfAbsent, testPrefix+"/wal/", 3, false)
	for i := range 3 {
		_, err := db.Commit(ctx, Txn{Set(fmt.Sprint(i), nil)})
		// The first was written ambiguously; the next two were never
		// written because settling the first kept failing.
		if err == nil || errors.Is(err, ErrUncertain) != (i == 0) {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	mustCommit(t, ctx, db, Set("ok", nil))
	m := contents(db.View())
	if _, ok := m["0"]; !ok || len(m) != 2 {
		t.Fatalf("state %v: want the settled first batch and the last commit only", m)
	}
}

// Two writers interleaved with a gate: the old writer's write is parked,
// a new writer opens and fences, then the parked write collides.
func TestFencingInterleaved(t *testing.T) {
	ctx := testCtx(t)
	mem, fsA := newStores(1)
	a := mustOpen(t, ctx, fsA, Options{})
	mustCommit(t, ctx, a, Set("a1", nil))

	gate := fsA.Hold(faultstore.OpPutIfAbsent, testPrefix+"/wal/")
	res := make(chan error, 1)
	go func() {
		_, err := a.Commit(ctx, Txn{Set("a2", nil)})
		res <- err
	}()
	if err := gate.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	fsB := faultstore.New(mem, 2)
	b := mustOpen(t, ctx, fsB, Options{})
	if _, ok := b.Get("a1"); !ok {
		t.Fatal("new writer lost an acknowledged commit")
	}
	gate.Release()
	if err := <-res; !errors.Is(err, ErrFenced) {
		t.Fatalf("parked commit of the old writer: %v, want ErrFenced", err)
	}
	if _, err := a.Commit(ctx, Txn{Set("a3", nil)}); !errors.Is(err, ErrFenced) {
		t.Fatalf("later commit of the old writer: %v, want ErrFenced", err)
	}
	mustCommit(t, ctx, b, Set("b1", nil))
	f, err := OpenFollower(ctx, fsB, testPrefix, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{"a1": "", "b1": ""}
	if err := diffMaps(contents(f.View()), want); err != nil {
		t.Fatal(err)
	}
}

// Sequential takeover without gates: the old writer learns at its next
// commit.
func TestFencingSequential(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	a := mustOpen(t, ctx, fs, Options{})
	mustCommit(t, ctx, a, Set("k", []byte("a")))
	b := mustOpen(t, ctx, fs, Options{})
	if _, err := a.Commit(ctx, Txn{Set("k", []byte("stale"))}); !errors.Is(err, ErrFenced) {
		t.Fatalf("old writer: %v", err)
	}
	mustCommit(t, ctx, b, Swap("k", []byte("a"), []byte("b")))
	c := mustOpen(t, ctx, fs, Options{})
	if v, _ := c.Get("k"); string(v) != "b" {
		t.Fatalf("k = %q", v)
	}
}

// Open chases a previous writer that keeps appending while the new one
// fences: its fence lands after the busy writer's records, which it reads.
func TestOpenChasesBusyWriter(t *testing.T) {
	ctx := testCtx(t)
	mem, fsA := newStores(1)
	a := mustOpen(t, ctx, fsA, Options{})
	fsB := faultstore.New(mem, 2)
	// Park B's first fence attempt; while it waits, A appends two records.
	gate := fsB.Hold(faultstore.OpPutIfAbsent, "")
	type opened struct {
		db  *DB
		err error
	}
	res := make(chan opened, 1)
	go func() {
		db, err := Open(ctx, fsB, testPrefix, Options{})
		res <- opened{db, err}
	}()
	if err := gate.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, ctx, a, Set("x", nil))
	mustCommit(t, ctx, a, Set("y", nil))
	gate.Release()
	o := <-res
	if o.err != nil {
		t.Fatal(o.err)
	}
	defer o.db.Close(ctx)
	if err := diffMaps(contents(o.db.View()), map[string]string{"x": "", "y": ""}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctx, Txn{Set("z", nil)}); !errors.Is(err, ErrFenced) {
		t.Fatalf("old writer after the chase: %v", err)
	}
}

// The trim race: the old writer snapshots and trims the very record the
// new writer's fence then re-creates. The new writer must notice before it
// acknowledges anything.
func TestFenceOverTrimmedRecordStandsDown(t *testing.T) {
	ctx := testCtx(t)
	mem, fsA := newStores(1)
	a := mustOpen(t, ctx, fsA, Options{SnapshotEvery: 2})
	mustCommit(t, ctx, a, Set("a0", nil)) // seq 2 (fence is 1); snapshot at 2
	waitFor(t, "snapshot at 2", func() bool { return countKeys(t, mem, testPrefix+"/snap/") == 1 && !a.snapping.Load() })

	fsB := faultstore.New(mem, 2)
	gate := fsB.Hold(faultstore.OpPutIfAbsent, "")
	res := make(chan *DB, 1)
	errc := make(chan error, 1)
	go func() {
		db, err := Open(ctx, fsB, testPrefix, Options{})
		res <- db
		errc <- err
	}()
	if err := gate.Wait(ctx); err != nil { // B listed up to 2, will fence at 3
		t.Fatal(err)
	}
	// Commit until a snapshot trims record 3 (trimming lags one interval).
	want := map[string]string{"a0": ""}
	walKey3 := seqKey(testPrefix+"/", walDir, 3)
	for i := 1; a.View().Seq() < 3 || countKeys(t, mem, walKey3) != 0 || a.snapping.Load(); i++ {
		if i > 1000 {
			t.Fatal("record 3 never trimmed")
		}
		k := fmt.Sprint("a", i)
		mustCommit(t, ctx, a, Set(k, nil))
		want[k] = ""
		// Let each background snapshot finish before the next commit, or
		// a fast store keeps the writer ahead of its own trimming.
		waitFor(t, "snapshot to finish", func() bool { return !a.snapping.Load() })
	}
	gate.Release()
	b, err := <-res, <-errc
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if _, err := b.Commit(ctx, Txn{Set("b", nil)}); !errors.Is(err, ErrFenced) {
		t.Fatalf("writer whose fence re-created a trimmed record: %v, want ErrFenced", err)
	}
	mustCommit(t, ctx, a, Set("last", nil))
	want["last"] = ""
	c := mustOpen(t, ctx, faultstore.New(mem, 3), Options{})
	if err := diffMaps(contents(c.View()), want); err != nil {
		t.Fatal(err)
	}
}

// Open cost with 10,000 committed transactions: list, then the parallel
// reads and the fence together (the listing names the fence's place), so
// a cold open costs two round trips, not three. Every store call has latency L; the test records each call's
// span and counts the longest chain of calls where each starts after the
// previous ended: the sequential round trips, independent of CPU time.
func TestOpenRoundTrips(t *testing.T) {
	ctx := testCtx(t)
	mem, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	for i := range 10000 {
		mustCommit(t, ctx, db, Set(fmt.Sprintf("refs/heads/b%05d", i), []byte("0123456789abcdef0123456789abcdef01234567")))
	}
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}
	slow := faultstore.New(mem, 2)
	slow.AddRule(faultstore.Rule{Latency: 50 * time.Millisecond})
	tr := &tracingStore{Store: slow}
	db2, err := Open(ctx, tr, testPrefix, Options{})
	// Calls that ended by now belong to Open; the writer's background
	// fence check (a LIST started as Open returns) ends L later.
	spans := tr.endedBy(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close(ctx)
	if db2.View().Len() != 10000 {
		t.Fatalf("opened %d keys", db2.View().Len())
	}
	ops := map[string]int{}
	for _, s := range spans {
		ops[s.op]++
	}
	if ops["list"] != 1 || ops["put"] != 1 || ops["get"] > 2*256+1 {
		t.Fatalf("open calls: %v", ops)
	}
	if rt := sequentialDepth(spans); rt != 2 {
		t.Fatalf("open took %d sequential round trips, want 2 (calls %v)", rt, ops)
	}
}

// tracingStore records the time span of every Get, List and PutIfAbsent.
type tracingStore struct {
	objstore.Store
	mu    sync.Mutex
	spans []span
}

type span struct {
	op         string
	start, end time.Time
}

func (s *tracingStore) record(op string, start time.Time) {
	s.mu.Lock()
	s.spans = append(s.spans, span{op, start, time.Now()})
	s.mu.Unlock()
}

func (s *tracingStore) endedBy(t time.Time) []span {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []span
	for _, sp := range s.spans {
		if !sp.end.After(t) {
			out = append(out, sp)
		}
	}
	return out
}

func (s *tracingStore) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	defer s.record("get", time.Now())
	return s.Store.Get(ctx, key)
}

func (s *tracingStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	defer s.record("put", time.Now())
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

func (s *tracingStore) List(ctx context.Context, prefix, startAfter string) iter.Seq2[objstore.ObjectInfo, error] {
	return func(yield func(objstore.ObjectInfo, error) bool) {
		defer s.record("list", time.Now())
		for info, err := range s.Store.List(ctx, prefix, startAfter) {
			if !yield(info, err) {
				return
			}
		}
	}
}

// sequentialDepth is the longest chain of calls each of which started
// after the previous one ended.
func sequentialDepth(spans []span) int {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	depth := make([]int, len(spans))
	best := 0
	for i := range spans {
		depth[i] = 1
		for j := range i {
			if !spans[i].start.Before(spans[j].end) && depth[j]+1 > depth[i] {
				depth[i] = depth[j] + 1
			}
		}
		best = max(best, depth[i])
	}
	return best
}

// A commit whose caller gives up still resolves in the writer, and the
// caller is never told it succeeded.
func TestCommitContextCancelled(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	gate := fs.Hold(faultstore.OpPutIfAbsent, testPrefix+"/wal/")
	cctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := db.Commit(cctx, Txn{Set("k", nil)})
		res <- err
	}()
	if err := gate.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	gate.Release()
	mustCommit(t, ctx, db, Set("after", nil))
	if _, ok := db.Get("k"); !ok {
		t.Fatal("abandoned commit was dropped (it was already being written)")
	}
}
