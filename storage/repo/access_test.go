package repo

import (
	"errors"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore/memstore"
)

// TestGrantsReachIndexAndSurviveReopen: grants are stored in the database
// and copied to the name index (where access is decided before opening),
// survive a reopen (restart, failover), and revoking removes both.
func TestGrantsReachIndexAndSurviveReopen(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("alice/r"))
	if _, err := r.Grant(ctx, auth.Grant{User: "bob", Role: auth.RoleWrite, CreatedBy: "op"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Grant(ctx, auth.Grant{User: "carol", Role: auth.RoleRead}); err != nil {
		t.Fatal(err)
	}
	if old, err := r.Grant(ctx, auth.Grant{User: "BOB", Role: auth.RoleAdmin}); err != nil || old != auth.RoleWrite {
		t.Fatalf("regrant: old %v, %v", old, err)
	}
	if _, err := r.Grant(ctx, auth.Grant{User: "Alice", Role: auth.RoleRead}); err == nil {
		t.Fatal("granted the owner a role")
	}
	if err := r.SetVisibility(ctx, true); err != nil {
		t.Fatal(err)
	}
	m, err := ReadMeta(ctx, d.Store, names.MustParse("alice/r"))
	if err != nil || len(m.Grants) != 2 || m.Grants[0].User != "BOB" || m.Grants[0].Role != auth.RoleAdmin || !m.Public {
		t.Fatalf("index entry %+v, %v (visibility must keep the grants)", m, err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r2, err := Open(ctx, d, names.MustParse("alice/r"))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(ctx)
	if gs := r2.Info().Grants; len(gs) != 2 || gs[1].User != "carol" {
		t.Fatalf("grants after reopen %+v", gs)
	}
	if old, err := r2.Revoke(ctx, "bob"); err != nil || old != auth.RoleAdmin {
		t.Fatalf("revoke: %v, %v", old, err)
	}
	if _, err := r2.Revoke(ctx, "bob"); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("second revoke: %v", err)
	}
	if m, _ := ReadMeta(ctx, d.Store, names.MustParse("alice/r")); len(m.Grants) != 1 {
		t.Fatalf("index after revoke %+v", m)
	}
}

// TestUpdateRefsAppliesProtection: the writer refuses protected deletes
// and forced updates by the rules it holds, per command or (atomic) for
// the whole push, and nothing of a refused command is written.
func TestUpdateRefsAppliesProtection(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("alice/r"))
	g := newGitRepo(t)
	c1 := pushFirst(t, d, r, g)
	c2 := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), c2.String()), RefUpdate{Name: "refs/heads/dev", New: c2})
	if err := r.Protect(ctx, auth.Protection{Pattern: "refs/heads/*", NoForcePush: true, NoDelete: true}); err != nil {
		t.Fatal(err)
	}
	res, err := r.UpdateRefs(ctx, nil, []RefUpdate{
		{Name: "refs/heads/main", Old: c1, New: c2},
		{Name: "refs/heads/dev", Old: c2},
		{Name: "refs/heads/new", New: c1},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	var pe *ProtectedError
	if !errors.As(res[0], &pe) || !errors.As(res[1], &pe) || !errors.Is(res[2], ErrAtomicFailed) {
		t.Fatalf("atomic results %v", res)
	}
	res, err = r.UpdateRefs(ctx, nil, []RefUpdate{
		{Name: "refs/heads/dev", Old: c2},
		{Name: "refs/heads/new", New: c1},
		{Name: "refs/tags/v1", New: c1},
	}, false)
	if err != nil || !errors.As(res[0], &pe) || res[1] != nil || res[2] != nil {
		t.Fatalf("non-atomic results %v, %v", res, err)
	}
	s := snapshot(t, r)
	if id, _ := s.Ref("refs/heads/main"); id != c1 {
		t.Fatalf("main = %s, want %s", id, c1)
	}
	if id, ok := s.Ref("refs/heads/dev"); !ok || id != c2 {
		t.Fatal("protected dev was deleted")
	}
	if _, err := r.Unprotect(ctx, "refs/heads/*"); err != nil {
		t.Fatal(err)
	}
	res, err = r.UpdateRefs(ctx, nil, []RefUpdate{{Name: "refs/heads/dev", Old: c2, New: object.ID{}}}, false)
	if err != nil || res[0] != nil {
		t.Fatalf("delete after unprotect: %v, %v", res, err)
	}
}

// TestDeletedTipGuardsRecreate: deleting a ref that a no-force-push rule
// covers (deletion allowed) keeps its value; the writer refuses to create
// the ref again unless the command fast-forwards from that value, whatever
// the caller claims, and the re-creation drops it. Refs no such rule
// covers keep nothing, and unprotect drops what its rule kept.
func TestDeletedTipGuardsRecreate(t *testing.T) {
	d := newDeps(t, memstore.New())
	r := create(t, d, names.MustParse("alice/r"))
	g := newGitRepo(t)
	c1 := pushFirst(t, d, r, g)
	c2 := g.commit()
	push(t, r, g.indexPack(d.Cache.TempDir(), c2.String()),
		RefUpdate{Name: "refs/heads/dev", New: c2}, RefUpdate{Name: "refs/heads/free", New: c2})
	if err := r.Protect(ctx, auth.Protection{Pattern: "refs/heads/dev", NoForcePush: true}); err != nil {
		t.Fatal(err)
	}
	apply := func(u RefUpdate) error {
		t.Helper()
		res, err := r.UpdateRefs(ctx, nil, []RefUpdate{u}, false)
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	for _, u := range []RefUpdate{{Name: "refs/heads/dev", Old: c2}, {Name: "refs/heads/free", Old: c2}} {
		if err := apply(u); err != nil {
			t.Fatalf("delete %s: %v", u.Name, err)
		}
	}
	s := snapshot(t, r)
	if tip := s.DeletedTip("refs/heads/dev"); tip != c2 {
		t.Fatalf("deleted tip of dev = %s, want %s", tip, c2)
	}
	if tip := s.DeletedTip("refs/heads/free"); !tip.IsZero() {
		t.Fatalf("unprotected free kept a deleted tip %s", tip)
	}
	var pe *ProtectedError
	for name, u := range map[string]RefUpdate{
		"plain creation (caller unaware of the tip)": {Name: "refs/heads/dev", New: c1},
		"claimed fast-forward from another tip":      {Name: "refs/heads/dev", New: c1, Deleted: c1, FastForward: true},
		"not a fast-forward of the tip":              {Name: "refs/heads/dev", New: c1, Deleted: c2},
	} {
		if err := apply(u); !errors.As(err, &pe) || !strings.Contains(pe.Reason, "re-creating a deleted branch") {
			t.Errorf("%s: %v, want a protected-branch refusal", name, err)
		}
	}
	if err := apply(RefUpdate{Name: "refs/heads/free", New: c1}); err != nil {
		t.Fatalf("re-creating unprotected free: %v", err)
	}
	if err := apply(RefUpdate{Name: "refs/heads/dev", New: c2, Deleted: c2, FastForward: true}); err != nil {
		t.Fatalf("re-creating dev as a fast-forward of its tip: %v", err)
	}
	if tip := snapshot(t, r).DeletedTip("refs/heads/dev"); !tip.IsZero() {
		t.Fatalf("re-creation left the deleted tip %s", tip)
	}
	// Unprotect drops the tips its rule kept.
	if err := apply(RefUpdate{Name: "refs/heads/dev", Old: c2}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Unprotect(ctx, "refs/heads/dev"); err != nil {
		t.Fatal(err)
	}
	if tip := snapshot(t, r).DeletedTip("refs/heads/dev"); !tip.IsZero() {
		t.Fatalf("unprotect left the deleted tip %s", tip)
	}
	if err := apply(RefUpdate{Name: "refs/heads/dev", New: c1}); err != nil {
		t.Fatalf("re-creating dev after unprotect: %v", err)
	}
}
