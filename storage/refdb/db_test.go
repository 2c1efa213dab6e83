package refdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/format"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/testkit/faultstore"
)

func TestCommitAndRead(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	s1 := mustCommit(t, ctx, db, Create("ref/a", []byte("1")), Set("head", []byte("ref/a")))
	s2 := mustCommit(t, ctx, db, Swap("ref/a", []byte("1"), []byte("2")), Create("ref/b", []byte("x")))
	if s2 <= s1 {
		t.Fatalf("sequences not increasing: %d then %d", s1, s2)
	}
	if v, ok := db.Get("ref/a"); !ok || string(v) != "2" {
		t.Fatalf("ref/a = %q, %v", v, ok)
	}
	mustCommit(t, ctx, db, RemoveIf("ref/b", []byte("x")))
	want := map[string]string{"ref/a": "2", "head": "ref/a"}
	if err := diffMaps(contents(db.View()), want); err != nil {
		t.Fatal(err)
	}
	if got := db.View().Len(); got != 2 {
		t.Fatalf("Len = %d, want 2", got)
	}
}

func TestConflictAppliesNothing(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	mustCommit(t, ctx, db, Set("a", []byte("1")), Set("b", []byte("1")))
	before := db.View()
	writes := fs.Count(faultstore.OpPutIfAbsent)

	cases := []Txn{
		{Set("a", []byte("2")), Swap("b", []byte("wrong"), []byte("2"))},
		{Set("a", []byte("2")), Create("b", []byte("2"))},
		{Remove("a"), Check("c", []byte("x"), false)},
		{Set("c", []byte("2")), Check("a", nil, true)},
		{Set("a", []byte("2")), RemoveIf("zzz", []byte("x"))},
	}
	for i, txn := range cases {
		_, err := db.Commit(ctx, txn)
		var ce *ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) {
			t.Fatalf("case %d: err = %v, want *ConflictError", i, err)
		}
		if want := txn[len(txn)-1].Key; ce.Key != want {
			t.Fatalf("case %d: conflict on %q, want %q", i, ce.Key, want)
		}
	}
	if db.View() != before {
		t.Fatal("a conflicting transaction changed the state")
	}
	if got := fs.Count(faultstore.OpPutIfAbsent); got != writes {
		t.Fatalf("conflicting transactions wrote %d records", got-writes)
	}
	// Ops see earlier ops of the same transaction.
	mustCommit(t, ctx, db, Create("n", []byte("1")), Swap("n", []byte("1"), []byte("2")), Check("n", []byte("2"), false))
	if v, _ := db.Get("n"); string(v) != "2" {
		t.Fatalf("n = %q", v)
	}
}

func TestInvalidTxn(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	if _, err := db.Commit(ctx, Txn{Set("", nil)}); !errors.Is(err, ErrInvalidTxn) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := db.Commit(ctx, Txn{{Key: "k", Cond: 9}}); !errors.Is(err, ErrInvalidTxn) {
		t.Fatalf("bad cond: %v", err)
	}
}

func TestCallerBuffersAreCopied(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	buf := []byte("value")
	mustCommit(t, ctx, db, Set("k", buf))
	copy(buf, "XXXXX")
	if v, _ := db.Get("k"); string(v) != "value" {
		t.Fatalf("state aliases the caller's buffer: %q", v)
	}
}

// Multi-key atomicity and batch isolation: commits racing in one group
// commit each apply whole, and a conflicting one fails alone.
func TestGroupCommitBatches(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	mustCommit(t, ctx, db, Set("counter", []byte("0")))

	gate := fs.Hold(faultstore.OpPutIfAbsent, testPrefix+"/wal/")
	first := make(chan error, 1)
	go func() {
		_, err := db.Commit(ctx, Txn{Set("first", []byte("1"))})
		first <- err
	}()
	if err := gate.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// While the first write is parked, queue commits: all race for the
	// same Swap; exactly one may win.
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	seqs := make([]uint64, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seqs[i], errs[i] = db.Commit(ctx, Txn{
				Swap("counter", []byte("0"), []byte("1")),
				Set(fmt.Sprintf("w/%02d", i), []byte("x")),
				Set(fmt.Sprintf("v/%02d", i), []byte("y")),
			})
		}()
	}
	waitFor(t, "queued commits", func() bool { return len(db.reqs) == n })
	writesBefore := fs.Count(faultstore.OpPutIfAbsent)
	gate.Release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	winners := 0
	for i, err := range errs {
		if err == nil {
			winners++
			continue
		}
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d swaps won, want 1", winners)
	}
	// Exactly one more record: the whole queue shared one write.
	if got := fs.Count(faultstore.OpPutIfAbsent) - writesBefore; got != 1 {
		t.Fatalf("queued commits took %d writes, want 1", got)
	}
	m := contents(db.View())
	for i := range n {
		_, w := m[fmt.Sprintf("w/%02d", i)]
		_, v := m[fmt.Sprintf("v/%02d", i)]
		if w != v || w != (errs[i] == nil) {
			t.Fatalf("commit %d (err %v) half applied: w=%v v=%v", i, errs[i], w, v)
		}
	}
}

// waitFor polls a condition that is made true by another goroutine
// without a notification to hook; it fails after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCloseFailsCommits(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	mustCommit(t, ctx, db, Set("a", nil))
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(ctx, Txn{Set("b", nil)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("commit after close: %v", err)
	}
	if v, ok := db.Get("a"); !ok || len(v) != 0 {
		t.Fatalf("reads after close: %q %v", v, ok)
	}
}

func TestExistsOpenExistingDestroy(t *testing.T) {
	ctx := testCtx(t)
	mem, fs := newStores(1)
	if ok, err := Exists(ctx, fs, testPrefix); err != nil || ok {
		t.Fatalf("Exists on empty store = %v, %v", ok, err)
	}
	if _, err := OpenExisting(ctx, fs, testPrefix, Options{}); !errors.Is(err, ErrNotExist) {
		t.Fatalf("OpenExisting: %v", err)
	}
	if _, err := OpenFollower(ctx, fs, testPrefix, Options{}); !errors.Is(err, ErrNotExist) {
		t.Fatalf("OpenFollower: %v", err)
	}
	if n := countKeys(t, mem, ""); n != 0 {
		t.Fatalf("failed opens created %d objects", n)
	}
	db := mustOpen(t, ctx, fs, Options{SnapshotEvery: 2})
	for i := range 5 {
		mustCommit(t, ctx, db, Set(fmt.Sprint(i), nil))
	}
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := Exists(ctx, fs, testPrefix); err != nil || !ok {
		t.Fatalf("Exists = %v, %v", ok, err)
	}
	db2, err := OpenExisting(ctx, fs, testPrefix+"/", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db2.View().Len() != 5 {
		t.Fatalf("reopened with %d keys", db2.View().Len())
	}
	db2.Close(ctx)
	// A neighbouring database is untouched by Destroy.
	other, err := Open(ctx, fs, testPrefix+"x", Options{})
	if err != nil {
		t.Fatal(err)
	}
	other.Close(ctx)
	if err := Destroy(ctx, fs, testPrefix); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, mem, testPrefix+"/"); n != 0 {
		t.Fatalf("Destroy left %d objects", n)
	}
	if ok, _ := Exists(ctx, fs, testPrefix+"x"); !ok {
		t.Fatal("Destroy removed a neighbouring database")
	}
}

func countKeys(t *testing.T, s objstore.Store, prefix string) int {
	t.Helper()
	n := 0
	for _, err := range s.List(context.Background(), prefix, "") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func TestCorruptObjectNamesKey(t *testing.T) {
	ctx := testCtx(t)
	for _, target := range []string{"wal", "snap"} {
		t.Run(target, func(t *testing.T) {
			mem, fs := newStores(1)
			db := mustOpen(t, ctx, fs, Options{SnapshotEvery: 4})
			for i := range 6 {
				mustCommit(t, ctx, db, Set(fmt.Sprint(i), []byte("v")))
			}
			db.Close(ctx)
			var victim string
			for info, err := range mem.List(ctx, testPrefix+"/"+target+"/", "") {
				if err != nil {
					t.Fatal(err)
				}
				victim = info.Key // newest
			}
			if victim == "" {
				t.Fatalf("no %s object", target)
			}
			rc, _, err := mem.Get(ctx, victim)
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0x40
			if err := mem.Put(ctx, victim, strings.NewReader(string(data)), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			_, err = Open(ctx, fs, testPrefix, Options{})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), victim) {
				t.Fatalf("Open over corrupt %s: %v (want ErrCorrupt naming %s)", victim, err, victim)
			}
			if _, err := OpenFollower(ctx, fs, testPrefix, Options{}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenFollower over corrupt object: %v", err)
			}
		})
	}
}

func TestSnapshotTrimsLog(t *testing.T) {
	ctx := testCtx(t)
	mem, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{SnapshotEvery: 8})
	for i := range 100 {
		mustCommit(t, ctx, db, Set(fmt.Sprintf("k%03d", i), []byte(fmt.Sprint(i))))
	}
	want := contents(db.View())
	if err := db.Close(ctx); err != nil { // waits for background snapshots
		t.Fatal(err)
	}
	// Close waited for the running snapshot, whose trim removed every
	// older snapshot and the records below the previous one.
	var snaps []uint64
	for info, err := range mem.List(ctx, testPrefix+"/snap/", "") {
		if err != nil {
			t.Fatal(err)
		}
		seq, _ := parseSeqKey(testPrefix+"/", snapDir, info.Key)
		snaps = append(snaps, seq)
	}
	if len(snaps) != 1 || snaps[0] < 8 {
		t.Fatalf("snapshots after close: %v, want exactly one", snaps)
	}
	for info, err := range mem.List(ctx, testPrefix+"/wal/", "") {
		if err != nil {
			t.Fatal(err)
		}
		// Trimming lags one interval; throttling keeps intervals under
		// two SnapshotEvery.
		if seq, _ := parseSeqKey(testPrefix+"/", walDir, info.Key); seq+3*8 < snaps[0] {
			t.Fatalf("record %d survived the snapshot at %d", seq, snaps[0])
		}
	}
	db2 := mustOpen(t, ctx, fs, Options{})
	if err := diffMaps(contents(db2.View()), want); err != nil {
		t.Fatal(err)
	}
}

// Every open appends a fence record. A database that is opened again and
// again (a repository evicted from the warm pool and read once more) but
// never written must still snapshot and trim, or every open reads a log
// as long as the number of opens before it.
func TestOpensWithoutWritesKeepLogBounded(t *testing.T) {
	ctx := testCtx(t)
	mem, fs := newStores(1)
	opts := Options{SnapshotEvery: 8}
	db := mustOpen(t, ctx, fs, opts)
	mustCommit(t, ctx, db, Set("k", []byte("v")))
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		db, err := OpenExisting(ctx, fs, testPrefix, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(ctx); err != nil { // waits for a snapshot it started
			t.Fatal(err)
		}
	}
	wals := 0
	for _, err := range mem.List(ctx, testPrefix+"/wal/", "") {
		if err != nil {
			t.Fatal(err)
		}
		wals++
	}
	// Trimming lags one interval behind the newest snapshot.
	if wals > 3*8 {
		t.Fatalf("%d log records after 100 opens with SnapshotEvery 8", wals)
	}
	fs.ResetCounts()
	db2 := mustOpen(t, ctx, fs, opts)
	if got, ok := db2.View().Get("k"); !ok || string(got) != "v" {
		t.Fatalf("k = %q, %v after the opens, want v", got, ok)
	}
	if gets := fs.Count(faultstore.OpGet); gets > 3*8+1 {
		t.Fatalf("an open read %d objects", gets)
	}
}

// TestNewerFormatRefused: a database whose newest record is of a version
// this build does not read (a newer release wrote it) is refused, by
// writer and follower alike, with an error naming the object and the
// version, and not taken for damage.
func TestNewerFormatRefused(t *testing.T) {
	ctx := testCtx(t)
	mem, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	for i := range 3 {
		mustCommit(t, ctx, db, Set(fmt.Sprint(i), []byte("v")))
	}
	db.Close(ctx)
	var victim string
	for info, err := range mem.List(ctx, testPrefix+"/wal/", "") {
		if err != nil {
			t.Fatal(err)
		}
		victim = info.Key // newest
	}
	rc, _, err := mem.Get(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	newer := format.RefDB.Newest + 1
	data[len(magic)] = byte(newer)
	binary.BigEndian.PutUint32(data[len(data)-trailerLen:], crc32.Checksum(data[:len(data)-trailerLen], castagnoli))
	if err := mem.Put(ctx, victim, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("ref-database record version %d ", newer)
	check := func(who string, err error) {
		t.Helper()
		if !errors.Is(err, format.ErrUnsupported) || errors.Is(err, ErrCorrupt) ||
			!strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s over a newer record: %v (want a refusal naming %s and %q)", who, err, victim, want)
		}
	}
	_, err = Open(ctx, fs, testPrefix, Options{})
	check("Open", err)
	_, err = OpenFollower(ctx, fs, testPrefix, Options{})
	check("OpenFollower", err)
}
