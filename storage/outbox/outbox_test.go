package outbox

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/refdb"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func openDB(t *testing.T) *refdb.DB {
	t.Helper()
	db, err := refdb.Open(context.Background(), memstore.New(), "repo/o/n", refdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

func commit(t *testing.T, db *refdb.DB, txn refdb.Txn, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if len(txn) == 0 {
		return
	}
	if _, err := db.Commit(context.Background(), txn); err != nil {
		t.Fatal(err)
	}
}

func addHook(t *testing.T, db *refdb.DB, id string, events ...string) {
	t.Helper()
	txn, err := AddHook(db.View(), Hook{ID: id, URL: "http://x/" + id, Secret: "s", Events: events, Created: t0})
	commit(t, db, txn, err)
}

func lane(t *testing.T, db *refdb.DB, id string) Lane {
	t.Helper()
	l, err := Read(db.View()).Lane(id)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func head(t *testing.T, db *refdb.DB, id string, n int) []Delivery {
	t.Helper()
	h, err := Read(db.View()).Head(id, n)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestEnqueueFollowsSubscriptions: each event goes to the hooks
// subscribed to its kind, in order, each delivery with its own id; a
// repository without hooks writes nothing.
func TestEnqueueFollowsSubscriptions(t *testing.T) {
	db := openDB(t)
	evs := RefEvents("refs/tags/v1", "", "aa", Actor{User: "alice"}, t0)
	if txn, err := Enqueue(db.View(), evs, t0); err != nil || txn != nil {
		t.Fatalf("no hooks: %v, %v", txn, err)
	}
	addHook(t, db, "a000000000000000", KindPush)
	addHook(t, db, "b000000000000000", KindTag, KindDelete)
	txn, err := Enqueue(db.View(), evs, t0)
	commit(t, db, txn, err)
	txn, err = Enqueue(db.View(), RefEvents("refs/heads/main", "aa", "", Actor{}, t0), t0)
	commit(t, db, txn, err)

	a := head(t, db, "a000000000000000", 10)
	b := head(t, db, "b000000000000000", 10)
	kinds := func(ds []Delivery) (s string) {
		for _, d := range ds {
			s += d.Event.Kind + ":" + d.Event.Ref + " "
		}
		return s
	}
	if got, want := kinds(a), "push:refs/tags/v1 push:refs/heads/main "; got != want {
		t.Errorf("hook a got %q, want %q", got, want)
	}
	if got, want := kinds(b), "tag:refs/tags/v1 delete:refs/heads/main "; got != want {
		t.Errorf("hook b got %q, want %q", got, want)
	}
	seen := map[string]bool{}
	for _, d := range append(a, b...) {
		if seen[d.ID] || len(d.ID) != 36 {
			t.Errorf("delivery id %q repeated or malformed", d.ID)
		}
		seen[d.ID] = true
	}
	if a[0].Seq >= a[1].Seq {
		t.Errorf("sequence not increasing: %d, %d", a[0].Seq, a[1].Seq)
	}
	if l := lane(t, db, "a000000000000000"); l.Pending != 2 {
		t.Errorf("lane a: %+v", l)
	}
	n, oldest, err := Read(db.View()).Pending()
	if n != 4 || !oldest.Equal(t0) || err != nil {
		t.Errorf("Pending = %d, %v, %v", n, oldest, err)
	}
}

// TestFinishMovesToBoundedLog: a done delivery leaves the queue for the
// log, which keeps the newest MaxLog; a retried one is rewritten in
// place; a result for a delivery no longer queued is ignored.
func TestFinishMovesToBoundedLog(t *testing.T) {
	db := openDB(t)
	const id = "a000000000000000"
	addHook(t, db, id, KindPush)
	var evs []Event
	for i := range MaxLog + 7 {
		evs = append(evs, Event{Kind: KindPush, Ref: fmt.Sprintf("refs/heads/b%d", i), Time: t0})
	}
	txn, err := Enqueue(db.View(), evs, t0)
	commit(t, db, txn, err)
	p := Policy{Window: time.Hour, FirstRetry: time.Second, MaxBackoff: time.Minute}

	ds := head(t, db, id, 3)
	r, o := p.After(ds[0], Attempt{At: t0, Status: 500}, t0, 0)
	if o != Retry || r.Done {
		t.Fatalf("500: %v", o)
	}
	txn, err = Finish(db.View(), []Result{r})
	commit(t, db, txn, err)
	if h := head(t, db, id, 1)[0]; h.Attempts != 1 || h.Next.IsZero() || h.Last[0].Status != 500 {
		t.Fatalf("retried delivery: %+v", h)
	}
	// Deliver everything in a few batches, one of them repeated.
	for len(head(t, db, id, 1)) > 0 {
		var rs []Result
		for _, d := range head(t, db, id, 20) {
			r, _ := p.After(d, Attempt{At: t0, Status: 204}, t0, 0)
			rs = append(rs, r)
		}
		txn, err = Finish(db.View(), rs)
		commit(t, db, txn, err)
		txn, err = Finish(db.View(), rs)
		commit(t, db, txn, err)
	}
	log, err := Read(db.View()).Log(id)
	if err != nil || len(log) != MaxLog {
		t.Fatalf("log holds %d, want %d (%v)", len(log), MaxLog, err)
	}
	if got, want := log[len(log)-1].Event.Ref, fmt.Sprintf("refs/heads/b%d", MaxLog+6); got != want || log[0].State != StateDelivered {
		t.Errorf("newest logged %q (%s), want %q", got, log[0].State, want)
	}
	if l := lane(t, db, id); l != (Lane{Pending: 0, Logged: MaxLog}) {
		t.Errorf("lane %+v", l)
	}
}

// TestPendingCap: past MaxPending waiting deliveries a hook drops events
// and counts them; other hooks are not affected.
func TestPendingCap(t *testing.T) {
	db := openDB(t)
	addHook(t, db, "a000000000000000", KindPush)
	evs := make([]Event, MaxPending+3)
	for i := range evs {
		evs[i] = Event{Kind: KindPush, Ref: "refs/heads/main", Time: t0}
	}
	txn, err := Enqueue(db.View(), evs, t0)
	commit(t, db, txn, err)
	if l := lane(t, db, "a000000000000000"); l.Pending != MaxPending || l.Dropped != 3 {
		t.Errorf("lane %+v", l)
	}
}

// TestRedeliver: a finished delivery is queued again at the end under
// the same id; a waiting one is made due now; unknown ids are refused.
func TestRedeliver(t *testing.T) {
	db := openDB(t)
	const id = "a000000000000000"
	addHook(t, db, id, KindPush)
	txn, err := Enqueue(db.View(), []Event{{Kind: KindPush, Ref: "refs/heads/a"}, {Kind: KindPush, Ref: "refs/heads/b"}}, t0)
	commit(t, db, txn, err)
	p := Policy{Window: time.Hour, FirstRetry: time.Second, MaxBackoff: time.Minute}
	first := head(t, db, id, 1)[0]
	r, _ := p.After(first, Attempt{At: t0, Status: 200}, t0, 0)
	txn, err = Finish(db.View(), []Result{r})
	commit(t, db, txn, err)

	later := t0.Add(time.Minute)
	d, txn, err := Redeliver(db.View(), first.ID, later)
	commit(t, db, txn, err)
	q := head(t, db, id, 5)
	if len(q) != 2 || q[1].ID != first.ID || !q[1].Redelivered || !q[1].Queued.Equal(later) || d.Seq != q[1].Seq {
		t.Fatalf("queue after redeliver: %+v", q)
	}
	// The waiting one: retried, then redelivered: due now, same place.
	r, _ = p.After(q[0], Attempt{At: t0, Error: "connection refused"}, t0, 0)
	txn, err = Finish(db.View(), []Result{r})
	commit(t, db, txn, err)
	_, txn, err = Redeliver(db.View(), q[0].ID, later)
	commit(t, db, txn, err)
	if h := head(t, db, id, 1)[0]; h.ID != q[0].ID || !h.Next.IsZero() || h.Attempts != 1 {
		t.Errorf("waiting delivery after redeliver: %+v", h)
	}
	if _, _, err := Redeliver(db.View(), "nope", later); !errors.Is(err, ErrNoDelivery) {
		t.Errorf("unknown id: %v", err)
	}
}

// TestRemoveHook drops the hook with its queue and log.
func TestRemoveHook(t *testing.T) {
	db := openDB(t)
	const id = "a000000000000000"
	addHook(t, db, id, KindPush)
	txn, err := Enqueue(db.View(), []Event{{Kind: KindPush, Ref: "refs/heads/a"}}, t0)
	commit(t, db, txn, err)
	h, txn, err := RemoveHook(db.View(), id)
	commit(t, db, txn, err)
	if h.ID != id || db.View().Len() != 1 { // meta/hookseq stays
		t.Errorf("after remove: %d keys", db.View().Len())
	}
	if _, _, err := RemoveHook(db.View(), id); !errors.Is(err, ErrNoHook) {
		t.Errorf("second remove: %v", err)
	}
}

func TestMaxHooks(t *testing.T) {
	db := openDB(t)
	for i := range MaxHooks {
		addHook(t, db, fmt.Sprintf("%016x", i), KindPush)
	}
	if _, err := AddHook(db.View(), Hook{ID: "ffffffffffffffff"}); !errors.Is(err, ErrTooManyHooks) {
		t.Errorf("hook %d: %v", MaxHooks+1, err)
	}
}

// TestPolicy is the retry table: 2xx delivers; a failure retries with
// a growing, jittered, capped backoff while the window lasts, then gives
// up.
func TestPolicy(t *testing.T) {
	p := Policy{Window: time.Hour, FirstRetry: 10 * time.Second, MaxBackoff: 5 * time.Minute}
	for _, c := range []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0, 5 * time.Second}, {1, 0.999999, 10 * time.Second}, {2, 0, 10 * time.Second}, {3, 0.5, 30 * time.Second},
		{10, 0, 150 * time.Second}, {60, 0.999999, 5 * time.Minute},
	} {
		if got := p.Backoff(c.n, c.u); got.Round(time.Second) != c.want {
			t.Errorf("Backoff(%d, %v) = %v, want %v", c.n, c.u, got, c.want)
		}
	}
	d := Delivery{ID: "x", Queued: t0, State: StatePending}
	for _, c := range []struct {
		name string
		a    Attempt
		now  time.Time
		want Outcome
	}{
		{"204", Attempt{Status: 204}, t0, Delivered},
		{"299", Attempt{Status: 299}, t0, Delivered},
		{"302 (redirects are not followed)", Attempt{Status: 302}, t0, Retry},
		{"500", Attempt{Status: 500}, t0, Retry},
		{"network error", Attempt{Error: "timeout"}, t0, Retry},
		{"200 with a transport error", Attempt{Status: 200, Error: "body cut off"}, t0, Retry},
		{"late failure", Attempt{Status: 500}, t0.Add(time.Hour - time.Second), GaveUp},
		{"late success", Attempt{Status: 200}, t0.Add(2 * time.Hour), Delivered},
	} {
		r, o := p.After(d, c.a, c.now, 0)
		if o != c.want || r.Delivery.Attempts != 1 || r.Done == (o == Retry) {
			t.Errorf("%s: %v done=%v, want %v", c.name, o, r.Done, c.want)
		}
		if o == Retry && !r.Delivery.Next.After(c.now) {
			t.Errorf("%s: next attempt %v not after %v", c.name, r.Delivery.Next, c.now)
		}
	}
	if !p.Expired(d, t0.Add(time.Hour)) || p.Expired(d, t0.Add(time.Hour-time.Nanosecond)) {
		t.Error("Expired at the window's edge")
	}
	// Attempts are counted, the newest few kept.
	for i := range MaxAttemptsKept + 3 {
		d = d.record(Attempt{Status: 500 + i})
	}
	if d.Attempts != MaxAttemptsKept+3 || len(d.Last) != MaxAttemptsKept || d.Last[MaxAttemptsKept-1].Status != 500+MaxAttemptsKept+2 {
		t.Errorf("attempts %d, kept %+v", d.Attempts, d.Last)
	}
}

func TestParseEvents(t *testing.T) {
	for in, want := range map[string]string{"": "[push]", "tag, push,tag": "[push tag]", "access,visibility": "[visibility access]"} {
		got, err := ParseEvents(in)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("ParseEvents(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"pushes", "push,", "ping"} {
		if _, err := ParseEvents(in); !errors.Is(err, ErrBadEvents) {
			t.Errorf("ParseEvents(%q): %v", in, err)
		}
	}
}
