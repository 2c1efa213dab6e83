package refdb

import (
	"fmt"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/faultstore"
)

func TestFollowerRefresh(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	mustCommit(t, ctx, db, Set("a", []byte("1")))
	f, err := OpenFollower(ctx, fs, testPrefix, Options{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v, _ := f.View().Get("a"); string(v) != "1" {
		t.Fatalf("a = %q", v)
	}
	ch := f.Changed()
	seq := mustCommit(t, ctx, db, Set("b", []byte("2")), Remove("a"))
	select {
	case <-ch:
		t.Fatal("Changed fired before the follower saw anything")
	default:
	}
	fs.ResetCounts()
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed after the view advanced")
	}
	if f.View().Seq() != seq {
		t.Fatalf("follower at %d, writer at %d", f.View().Seq(), seq)
	}
	if err := diffMaps(contents(f.View()), map[string]string{"b": "2"}); err != nil {
		t.Fatal(err)
	}
	if l, g := fs.Count(faultstore.OpList), fs.Count(faultstore.OpGet); l != 1 || g != 1 {
		t.Fatalf("refresh cost %d lists and %d gets, want 1 and 1", l, g)
	}
	// Nothing new: one list, no change.
	ch = f.Changed()
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("Changed fired without a change")
	default:
	}
}

// A follower far behind a writer that has snapshotted and trimmed the
// records it needs reloads from the snapshot.
func TestFollowerReloadsAfterTrim(t *testing.T) {
	ctx := testCtx(t)
	mem, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{SnapshotEvery: 4})
	mustCommit(t, ctx, db, Set("first", nil))
	f, err := OpenFollower(ctx, fs, testPrefix, Options{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	behind := f.View().Seq()
	for i := range 40 {
		mustCommit(t, ctx, db, Set(fmt.Sprint(i), []byte("v")))
	}
	waitFor(t, "trim of the follower's next record", func() bool {
		return countKeys(t, mem, seqKey(testPrefix+"/", walDir, behind+1)) == 0
	})
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := diffMaps(contents(f.View()), contents(db.View())); err != nil || f.View().Seq() != db.View().Seq() {
		t.Fatalf("follower at %d did not catch up to %d: %v", f.View().Seq(), db.View().Seq(), err)
	}
}

// The poll loop delivers a commit within a poll interval; the test waits
// on the Changed notification rather than sleeping.
func TestFollowerPolls(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	f, err := OpenFollower(ctx, fs, testPrefix, Options{PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 3 {
		ch := f.Changed()
		seq := mustCommit(t, ctx, db, Set("k", []byte(fmt.Sprint(i))))
		for f.View().Seq() < seq {
			select {
			case <-ch:
				ch = f.Changed()
			case <-time.After(10 * time.Second):
				t.Fatalf("follower never saw seq %d", seq)
			}
		}
		if v, _ := f.View().Get("k"); string(v) != fmt.Sprint(i) {
			t.Fatalf("k = %q", v)
		}
	}
	// Polling survives store errors.
	fs.FailNext(faultstore.OpList, "", 3, false)
	ch := f.Changed()
	seq := mustCommit(t, ctx, db, Set("after-errors", nil))
	for f.View().Seq() < seq {
		select {
		case <-ch:
			ch = f.Changed()
		case <-time.After(10 * time.Second):
			t.Fatal("follower stopped polling after errors")
		}
	}
}

// Fresh advances with every refresh the store answers, news or not, and
// stays put when the store fails: it is how stale the view may be.
func TestFollowerFresh(t *testing.T) {
	ctx := testCtx(t)
	_, fs := newStores(1)
	db := mustOpen(t, ctx, fs, Options{})
	mustCommit(t, ctx, db, Set("a", []byte("1")))
	before := time.Now()
	f, err := OpenFollower(ctx, fs, testPrefix, Options{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opened := f.Fresh()
	if opened.Before(before) {
		t.Fatalf("Fresh %v before the open at %v", opened, before)
	}
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	refreshed := f.Fresh()
	if !refreshed.After(opened) {
		t.Fatalf("a refresh without news left Fresh at %v (opened %v)", refreshed, opened)
	}
	fs.SetOutage(true)
	if err := f.Refresh(ctx); err == nil {
		t.Fatal("refresh during an outage succeeded")
	}
	fs.SetOutage(false)
	if got := f.Fresh(); !got.Equal(refreshed) {
		t.Fatalf("a failed refresh moved Fresh from %v to %v", refreshed, got)
	}
}
