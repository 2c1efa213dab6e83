package refdb

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// gotten is a store that closes done once a Get of key has returned.
type gotten struct {
	objstore.Store
	key  string
	once sync.Once
	done chan struct{}
}

func (g *gotten) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	rc, info, err := g.Store.Get(ctx, key)
	if key == g.key {
		g.once.Do(func() { close(g.done) })
	}
	return rc, info, err
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

	// B reads snapshot 2 while its fence waits; only once that read is
	// done may A trim the snapshot, or B would list again and fence after
	// A's newest record: a legitimate open, but not the race under test.
	snap2 := seqKey(testPrefix+"/", snapDir, 2)
	read := &gotten{Store: mem, key: snap2, done: make(chan struct{})}
	fsB := faultstore.New(read, 2)
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
	select {
	case <-read.done:
	case <-ctx.Done():
		t.Fatal("B never read snapshot 2")
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
	if b.fenceSeq != 3 {
		t.Fatalf("B fenced at %d, not at the trimmed record 3: the race was not set up", b.fenceSeq)
	}
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
// a cold open costs two round trips, not three; given a listing taken
// earlier (OpenExistingListed), one. Every store call has latency L; the
// tracer records each call's span, and the longest chain of calls where
// each starts after the previous ended is the sequential round trips,
// independent of CPU time.
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
	tr := faultstore.NewTracer(slow)
	for _, tc := range []struct {
		name   string
		listed bool
		lists  int
		rounds int
	}{{"cold", false, 1, 2}, {"listed", true, 0, 1}} {
		var pre *Listing
		if tc.listed {
			var err error
			if pre, err = List(ctx, tr, testPrefix); err != nil {
				t.Fatal(err)
			}
		}
		tr.Reset()
		db2, err := OpenExistingListed(ctx, tr, testPrefix, Options{}, pre)
		// Calls that ended by now belong to the open; the writer's
		// background fence check (a LIST started as it returns) ends L
		// later.
		spans := tr.EndedBy(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if db2.View().Len() != 10000 {
			t.Fatalf("%s: opened %d keys", tc.name, db2.View().Len())
		}
		if err := db2.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ops := faultstore.CountOps(spans)
		if ops[faultstore.OpList] != tc.lists || ops[faultstore.OpPutIfAbsent] != 1 || ops[faultstore.OpGet] > 2*256+1 {
			t.Fatalf("%s open calls: %v", tc.name, ops)
		}
		if rt := faultstore.SequentialDepth(spans); rt != tc.rounds {
			t.Fatalf("%s open took %d sequential round trips, want %d (calls %v)", tc.name, rt, tc.rounds, ops)
		}
	}
}

// A database opened and closed without a write, its log not due for a
// snapshot, lists once (its open): the fence check waits for a write.
// And a write after such an open is still checked (see
// TestFenceOverTrimmedRecordStandsDown).
func TestReadOnlyOpenListsOnce(t *testing.T) {
	ctx := testCtx(t)
	mem, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	mustCommit(t, ctx, db, Set("k", nil))
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tr := faultstore.NewTracer(mem)
	db2, err := OpenExisting(ctx, tr, testPrefix, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ops := faultstore.CountOps(tr.EndedBy(time.Now())); ops[faultstore.OpList] != 1 || ops[faultstore.OpPutIfAbsent] != 1 {
		t.Fatalf("read-only open and close: %v, want one LIST and the fence", ops)
	}
}

// A listing taken before other writers appended, and before a snapshot
// trimmed the log, still opens the current state: the fence lands after
// the newer records, which are read, and a trimmed log is listed again.
// One that found no database is not trusted.
func TestOpenStaleListing(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	if _, err := OpenExisting(ctx, fs, testPrefix, Options{}); !errors.Is(err, ErrNotExist) {
		t.Fatalf("open of nothing: %v", err)
	}
	none, err := List(ctx, fs, testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	a := mustOpen(t, ctx, fs, Options{SnapshotEvery: 4})
	mustCommit(t, ctx, a, Set("k0", nil))
	b, err := OpenExistingListed(ctx, fs, testPrefix, Options{}, none)
	if err != nil {
		t.Fatalf("open with a listing from before the database existed: %v", err)
	}
	if _, ok := b.Get("k0"); !ok {
		t.Fatal("k0 missing")
	}
	b.Close(ctx)

	old, err := List(ctx, fs, testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	a = mustOpen(t, ctx, fs, Options{SnapshotEvery: 4})
	for i := range 20 {
		mustCommit(t, ctx, a, Set(fmt.Sprintf("k%d", i+1), nil))
	}
	a.Close(ctx) // waits for its snapshots and trims
	c, err := OpenExistingListed(ctx, fs, testPrefix, Options{}, old)
	if err != nil {
		t.Fatalf("open with a stale listing: %v", err)
	}
	defer c.Close(ctx)
	if n := c.View().Len(); n != 21 {
		t.Fatalf("opened %d keys, want 21", n)
	}
	if _, err := OpenExistingListed(ctx, fs, "other", Options{}, old); err == nil {
		t.Fatal("a listing of another prefix was accepted")
	}
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
