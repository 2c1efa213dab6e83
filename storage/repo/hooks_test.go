package repo

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/storage/refdb"
)

// queued lists hook id's waiting deliveries as "kind ref actor" lines.
func queued(t *testing.T, r *Repo, id string) []string {
	t.Helper()
	ds, err := r.Outbox().Head(id, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		e := d.Event
		s := e.Kind + " " + e.Ref + e.Visibility
		if e.Access != nil {
			s += e.Access.Action + ":" + e.Access.User + e.Access.Pattern
		}
		out = append(out, s+" by "+e.Actor.User+e.Actor.TokenID)
	}
	return out
}

// TestPushEventsCommitWithRefs: a push's events are in the transaction
// of its ref updates: applied commands have them (with the pusher from
// the context), refused, stale and atomically failed commands have none,
// and a repository without hooks writes no outbox keys at all.
func TestPushEventsCommitWithRefs(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("alice/r"))
	g := newGitRepo(t)
	c1 := pushFirst(t, d, r, g)
	if n := r.db.View().Len(); len(queued(t, r, "a000000000000000")) != 0 || n > 8 {
		t.Fatalf("a push without hooks wrote outbox keys (%d keys)", n)
	}
	const hook = "a000000000000000"
	if err := r.AddHook(ctx, outbox.Hook{ID: hook, URL: "http://h", Events: outbox.Kinds}); err != nil {
		t.Fatal(err)
	}
	c2 := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), c2.String()), RefUpdate{Name: "refs/heads/dev", New: c2})
	if err := r.Protect(ctx, auth.Protection{Pattern: "refs/heads/main", NoForcePush: true, NoDelete: true}); err != nil {
		t.Fatal(err)
	}
	pusher := auth.WithIdentity(context.Background(), auth.Identity{Owner: "bob", Authenticated: true, TokenID: "tok123"})
	res, err := r.UpdateRefs(pusher, nil, []RefUpdate{
		{Name: "refs/heads/main", Old: c1},                  // protected: refused
		{Name: "refs/heads/dev", Old: c1, New: c2},          // stale: dev is c2
		{Name: "refs/tags/v1", New: c1},                     // applied
		{Name: "refs/heads/dev", Old: c2, New: object.ID{}}, // duplicate name: invalid
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if res[0] == nil || res[1] == nil || res[2] != nil || res[3] == nil {
		t.Fatalf("results %v", res)
	}
	res, err = r.UpdateRefs(pusher, nil, []RefUpdate{
		{Name: "refs/heads/a", New: c1},
		{Name: "refs/heads/dev", Old: c1, New: c2}, // stale: the atomic push fails whole
	}, true)
	if err != nil || res[0] == nil {
		t.Fatalf("atomic: %v, %v", res, err)
	}
	got := fmt.Sprint(queued(t, r, hook))
	want := "[push refs/heads/dev by  create refs/heads/dev by  access protect:refs/heads/main by  " +
		"push refs/tags/v1 by bobtok123 create refs/tags/v1 by bobtok123 tag refs/tags/v1 by bobtok123]"
	if got != want {
		t.Errorf("queued\n %s\nwant\n %s", got, want)
	}
}

// TestSettingsEvents: visibility and access changes queue their events
// with the change, and survive a reopen (a new owner resumes them).
func TestSettingsEvents(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("alice/r"))
	const hook = "b000000000000000"
	if err := r.AddHook(ctx, outbox.Hook{ID: hook, URL: "http://h", Events: []string{outbox.KindVisibility, outbox.KindAccess}}); err != nil {
		t.Fatal(err)
	}
	op := auth.WithIdentity(context.Background(), auth.Identity{Owner: "rgit-admin", Authenticated: true})
	if err := r.SetVisibility(op, true); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Grant(op, auth.Grant{User: "carol", Role: auth.RoleWrite}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Revoke(op, "carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Unprotect(op, "refs/none"); err == nil {
		t.Fatal("unprotect of nothing succeeded")
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, d, names.MustParse("alice/r"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	got := fmt.Sprint(queued(t, r, hook))
	want := "[visibility public by rgit-admin access grant:carol by rgit-admin access revoke:carol by rgit-admin]"
	if got != want {
		t.Errorf("queued\n %s\nwant\n %s", got, want)
	}
	n, _, err := r.Outbox().Pending()
	if n != 3 || err != nil {
		t.Errorf("pending %d, %v", n, err)
	}
}

// markers lists the pending-delivery marker keys of alice/r.
func markers(t *testing.T, d Deps) []string {
	t.Helper()
	var out []string
	for info, err := range d.Store.List(ctx, pendingMarkers(names.MustParse("alice/r")), "") {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, info.Key)
	}
	return out
}

// TestPendingMarkers: the first commit that queues deliveries writes the
// writer's marker with it (commits without events, or in a repository
// without hooks, write none); a writer closing with deliveries waiting
// leaves it for the sweep; the sweep keeps markers while deliveries wait
// and removes every writer's when none does; a fenced writer's sweep
// removes nothing.
func TestPendingMarkers(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("alice/r"))
	g := newGitRepo(t)
	c1 := pushFirst(t, d, r, g)
	if m := markers(t, d); len(m) != 0 {
		t.Fatalf("markers without hooks: %v", m)
	}
	const hook = "a000000000000000"
	if err := r.AddHook(ctx, outbox.Hook{ID: hook, URL: "http://h", Events: []string{outbox.KindPush}}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetVisibility(ctx, true); err != nil { // no subscribed event
		t.Fatal(err)
	}
	if m := markers(t, d); len(m) != 0 {
		t.Fatalf("markers without deliveries: %v", m)
	}
	if _, err := r.UpdateRefs(ctx, nil, []RefUpdate{{Name: "refs/heads/b", New: c1}}, false); err != nil {
		t.Fatal(err)
	}
	if m := markers(t, d); len(m) != 1 {
		t.Fatalf("after a push with a hook: markers %v", m)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if m := markers(t, d); len(m) != 1 {
		t.Fatalf("closed with a delivery waiting: markers %v", m)
	}
	repos, err := PendingRepos(ctx, d)
	if err != nil || fmt.Sprint(repos) != "[alice/r]" {
		t.Fatalf("PendingRepos = %v, %v", repos, err)
	}

	// The next writer: its sweep keeps the marker while the delivery
	// waits, and removes every marker once it is done.
	r2, err := Open(ctx, d, names.MustParse("alice/r"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(ctx)
	if waiting, err := r2.SweepMarkers(ctx); !waiting || err != nil || len(markers(t, d)) != 1 {
		t.Fatalf("sweep with a delivery waiting: %v, %v, markers %v", waiting, err, markers(t, d))
	}
	head, err := r2.Outbox().Head(hook, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := outbox.Policy{Window: time.Hour}.After(head[0], outbox.Attempt{Status: 200}, time.Now(), 0)
	if err := r2.FinishDeliveries(ctx, []outbox.Result{res}); err != nil {
		t.Fatal(err)
	}
	// A fenced writer removes nothing: r2, with nothing waiting in its
	// view, sweeps after r3 took over and queued a delivery.
	r3, err := Open(ctx, d, names.MustParse("alice/r")) // fences r2
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r3.UpdateRefs(ctx, nil, []RefUpdate{{Name: "refs/heads/c", New: c1}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.SweepMarkers(ctx); !errors.Is(err, refdb.ErrFenced) {
		t.Fatalf("a fenced writer's sweep: %v", err)
	}
	if m := markers(t, d); len(m) != 2 {
		t.Fatalf("after a fenced sweep: markers %v", m)
	}
	head, _ = r3.Outbox().Head(hook, 1)
	res, _ = outbox.Policy{Window: time.Hour}.After(head[0], outbox.Attempt{Status: 200}, time.Now(), 0)
	if err := r3.FinishDeliveries(ctx, []outbox.Result{res}); err != nil {
		t.Fatal(err)
	}
	if waiting, err := r3.SweepMarkers(ctx); waiting || err != nil {
		t.Fatalf("sweep with nothing waiting: %v, %v", waiting, err)
	}
	if m := markers(t, d); len(m) != 0 {
		t.Fatalf("after the sweep: markers %v", m)
	}

	// Deleting the repository removes its markers with its deliveries.
	if _, err := r3.UpdateRefs(ctx, nil, []RefUpdate{{Name: "refs/heads/d", New: c1}}, false); err != nil {
		t.Fatal(err)
	}
	r3.Close(ctx)
	if m := markers(t, d); len(m) != 1 {
		t.Fatalf("closed with a delivery waiting: markers %v", m)
	}
	if err := Delete(ctx, d, names.MustParse("alice/r")); err != nil {
		t.Fatal(err)
	}
	if m := markers(t, d); len(m) != 0 {
		t.Fatalf("after delete: markers %v", m)
	}
}
