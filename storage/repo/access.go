package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/storage/refdb"
)

// Access settings live in the repository's database, changed only by its
// writer (the repo actor), each list under one key so a change is one
// compare-free write and a reader sees a whole list:
//
//	meta/grants  → JSON []auth.Grant       (collaborators)
//	meta/protect → JSON []auth.Protection  (protected ref patterns)
//	deleted/{ref} → object id              (deleted tips, below)
//
// The grants are copied into the name index entry too (Meta.Grants), so a
// collaborator's access is decided before anything is opened, exactly as
// visibility is. The same ordering rule applies: a change that takes
// access away writes the index first, one that gives access writes it
// last, and sessions re-check against the database (gitserve).
const (
	keyGrants  = "meta/grants"
	keyProtect = "meta/protect"
	// maxGrants and maxRules bound a repository's lists (and so its index
	// entry, read on every cold access decision).
	maxGrants = 500
	maxRules  = 100
)

// Sentinel errors of access changes.
var (
	// ErrTooMany: a grant or protection list is full.
	ErrTooMany = errors.New("too many entries")
	// ErrNoEntry: revoke or unprotect named nothing that exists.
	ErrNoEntry = errors.New("no such entry")
)

// ProtectedError is the per-command result of UpdateRefs for an update
// a protection rule refuses; Reason is git's "protected branch: …" text.
type ProtectedError struct {
	Ref, Reason string
}

func (e *ProtectedError) Error() string { return e.Ref + ": " + e.Reason }

func (r *Repo) grants() ([]auth.Grant, error) {
	var gs []auth.Grant
	return gs, decodeList(r.db, keyGrants, &gs)
}

// Protections returns the protected ref patterns as the writer holds them.
func (r *Repo) Protections() ([]auth.Protection, error) {
	var ps []auth.Protection
	return ps, decodeList(r.db, keyProtect, &ps)
}

func decodeList(db *refdb.DB, key string, v any) error {
	b, ok := db.Get(key)
	if !ok {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

// meta is the repository's name index entry as its database says.
func (r *Repo) meta() (auth.RepoInfo, error) {
	gs, err := r.grants()
	if err != nil {
		return auth.RepoInfo{}, err
	}
	info := r.Info()
	return auth.RepoInfo{Repo: r.name, Public: info.Public, Grants: gs}, nil
}

// Grant gives g.User g.Role (replacing any earlier role) and returns the
// role they had. The owner needs no grant and cannot be given one.
func (r *Repo) Grant(ctx context.Context, g auth.Grant) (auth.Role, error) {
	if err := names.ValidateOwner(g.User); err != nil {
		return auth.NoRole, fmt.Errorf("grant on %s: %w", r.name, err)
	}
	if names.Same(g.User, r.name.Owner()) {
		return auth.NoRole, fmt.Errorf("grant on %s: %s owns it already", r.name, g.User)
	}
	if g.Role < auth.RoleRead || g.Role > auth.RoleAdmin {
		return auth.NoRole, fmt.Errorf("grant on %s: %w", r.name, auth.ErrBadRole)
	}
	gs, err := r.grants()
	if err != nil {
		return auth.NoRole, err
	}
	old := auth.NoRole
	i := slices.IndexFunc(gs, func(x auth.Grant) bool { return names.Same(x.User, g.User) })
	if i >= 0 {
		old = gs[i].Role
		gs[i] = g
	} else {
		if len(gs) >= maxGrants {
			return auth.NoRole, fmt.Errorf("grant on %s: %w (%d collaborators)", r.name, ErrTooMany, maxGrants)
		}
		gs = append(gs, g)
	}
	return old, r.setGrants(ctx, gs, g.Role < old, outbox.AccessChange{Action: "grant", User: g.User, Role: g.Role.String(), Previous: roleName(old)})
}

// roleName is r's name, empty for none (in access events).
func roleName(r auth.Role) string {
	if r == auth.NoRole {
		return ""
	}
	return r.String()
}

// Revoke removes user's grant and returns the role they had; ErrNoEntry
// if they had none.
func (r *Repo) Revoke(ctx context.Context, user string) (auth.Role, error) {
	gs, err := r.grants()
	if err != nil {
		return auth.NoRole, err
	}
	i := slices.IndexFunc(gs, func(x auth.Grant) bool { return names.Same(x.User, user) })
	if i < 0 {
		return auth.NoRole, fmt.Errorf("revoke %s on %s: %w", user, r.name, ErrNoEntry)
	}
	old, change := gs[i].Role, outbox.AccessChange{Action: "revoke", User: gs[i].User, Previous: roleName(gs[i].Role)}
	return old, r.setGrants(ctx, slices.Delete(gs, i, i+1), true, change)
}

// Grants lists the collaborators as the writer holds them.
func (r *Repo) Grants() ([]auth.Grant, error) { return r.grants() }

// setGrants stores gs in the database and the index, in the order that
// never shows more access than either copy grants (see the top of this
// file); change is the access event committed with the database's copy.
func (r *Repo) setGrants(ctx context.Context, gs []auth.Grant, reduces bool, change outbox.AccessChange) error {
	b, err := json.Marshal(gs)
	if err != nil {
		return fmt.Errorf("encode grants: %w", err)
	}
	m, err := r.meta()
	if err != nil {
		return err
	}
	m.Grants = gs
	if reduces {
		if err := writeMeta(ctx, r.d, m); err != nil {
			return fmt.Errorf("grants of %s: %w", r.name, err)
		}
	}
	if err := r.commitEvents(ctx, "set grants", refdb.Txn{refdb.Set(keyGrants, b)}, r.accessEvent(ctx, change)); err != nil {
		return err
	}
	if !reduces {
		if err := writeMeta(ctx, r.d, m); err != nil {
			return fmt.Errorf("grants of %s: %w", r.name, err)
		}
	}
	return nil
}

// Protect adds p (replacing a rule with the same pattern).
func (r *Repo) Protect(ctx context.Context, p auth.Protection) error {
	if err := auth.ValidatePattern(p.Pattern); err != nil {
		return fmt.Errorf("protect %s: %w", r.name, err)
	}
	ps, err := r.Protections()
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(ps, func(x auth.Protection) bool { return x.Pattern == p.Pattern }); i >= 0 {
		ps[i] = p
	} else if len(ps) >= maxRules {
		return fmt.Errorf("protect %s: %w (%d patterns)", r.name, ErrTooMany, maxRules)
	} else {
		ps = append(ps, p)
	}
	return r.setProtections(ctx, ps, outbox.AccessChange{Action: "protect", Pattern: p.Pattern, NoForcePush: p.NoForcePush, NoDelete: p.NoDelete})
}

// Unprotect removes the rule with this pattern and returns it; ErrNoEntry
// if there is none.
func (r *Repo) Unprotect(ctx context.Context, pattern string) (auth.Protection, error) {
	ps, err := r.Protections()
	if err != nil {
		return auth.Protection{}, err
	}
	i := slices.IndexFunc(ps, func(x auth.Protection) bool { return x.Pattern == pattern })
	if i < 0 {
		return auth.Protection{}, fmt.Errorf("unprotect %s on %s: %w", pattern, r.name, ErrNoEntry)
	}
	old := ps[i]
	return old, r.setProtections(ctx, slices.Delete(ps, i, i+1),
		outbox.AccessChange{Action: "unprotect", Pattern: old.Pattern, NoForcePush: old.NoForcePush, NoDelete: old.NoDelete})
}

// setProtections writes the rules ps, with the access event of change,
// and drops the deleted tips no rule of ps protects against force-pushes
// any more.
func (r *Repo) setProtections(ctx context.Context, ps []auth.Protection, change outbox.AccessChange) error {
	b, err := json.Marshal(ps)
	if err != nil {
		return fmt.Errorf("encode protections: %w", err)
	}
	txn := refdb.Txn{refdb.Set(keyProtect, b)}
	for k := range r.db.View().Scan(prefixDeleted) {
		if auth.CheckUpdate(ps, strings.TrimPrefix(k, prefixDeleted), auth.Force) == "" {
			txn = append(txn, refdb.Remove(k))
		}
	}
	return r.commitEvents(ctx, "set protected refs", txn, r.accessEvent(ctx, change))
}

// accessEvent is the access event of change.
func (r *Repo) accessEvent(ctx context.Context, change outbox.AccessChange) outbox.Event {
	e := r.event(ctx, outbox.KindAccess)
	e.Access = &change
	return e
}

// protectionResults marks the commands the rules ps (the writer's, now)
// refuse; called by UpdateRefs inside the writer, so a rule added while a
// push was being checked still applies to it. A creation is checked
// against the deleted tip the writer holds: one the push did not walk
// from (it appeared, or changed, since) is not a fast-forward.
func (r *Repo) protectionResults(ps []auth.Protection, cmds []RefUpdate, results []error) {
	if len(ps) == 0 {
		return
	}
	for i, c := range cmds {
		if results[i] != nil {
			continue
		}
		if c.Old.IsZero() && !c.New.IsZero() {
			if tip := r.deletedTip(c.Name); tip != c.Deleted {
				c.Deleted, c.FastForward = tip, false
			}
		}
		if why := auth.CheckUpdate(ps, c.Name, c.Kind()); why != "" {
			results[i] = &ProtectedError{Ref: c.Name, Reason: why}
		}
	}
}

// Deleted tips: a ref that may not be force-pushed could otherwise be
// deleted and created again anywhere, a rewrite in two pushes. Deleting
// such a ref keeps its value under deleted/{ref}, in the same
// transaction; creating the ref again must fast-forward from it (auth.
// Recreate), and removes it. Rules that no longer forbid force-pushes
// drop the tips they covered (setProtections). Deleting the repository
// deletes its database, tips included.

// deletedTip is the value ref was deleted at while protected; zero if
// none is kept.
func (r *Repo) deletedTip(ref string) object.ID {
	v, ok := r.db.Get(prefixDeleted + ref)
	if !ok {
		return object.ID{}
	}
	id, _ := object.ParseID(string(v))
	return id
}

// deletedTipOps returns, per command, the op on its deleted tip (a zero
// Op for none): a delete that the rules ps would refuse as a force-push
// keeps the old value; a creation drops a kept one.
func (r *Repo) deletedTipOps(ps []auth.Protection, cmds []RefUpdate) []refdb.Op {
	ops := make([]refdb.Op, len(cmds))
	for i, c := range cmds {
		switch {
		case c.New.IsZero() && !c.Old.IsZero() && auth.CheckUpdate(ps, c.Name, auth.Force) != "":
			ops[i] = refdb.Set(prefixDeleted+c.Name, []byte(c.Old.String()))
		case c.Old.IsZero() && !c.New.IsZero() && !r.deletedTip(c.Name).IsZero():
			ops[i] = refdb.Remove(prefixDeleted + c.Name)
		}
	}
	return ops
}
