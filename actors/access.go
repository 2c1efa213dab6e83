package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rgit/rgit/storage/auth"
)

// Access changes are messages to the repository's actor, like every other
// write: one writer per repository, on whichever node owns it.
type (
	// grantAccess asks for repo.Repo.Grant; *accessChanged answers.
	// by, here and below, is who makes the change (for its webhook event).
	grantAccess struct {
		grant auth.Grant
		by    auth.Identity
	}
	// revokeAccess asks for repo.Repo.Revoke; *accessChanged answers.
	revokeAccess struct {
		user string
		by   auth.Identity
	}
	// protectRef asks for repo.Repo.Protect; *accessChanged answers.
	protectRef struct {
		rule auth.Protection
		by   auth.Identity
	}
	// unprotectRef asks for repo.Repo.Unprotect; *accessChanged answers.
	unprotectRef struct {
		pattern string
		by      auth.Identity
	}
	// readSettings asks for the settings as the writer holds them;
	// *accessChanged answers (info only).
	readSettings struct{}
	// accessChanged answers the messages above: the role a grant or
	// revoke replaced, the rule an unprotect removed, and the settings
	// after the change.
	accessChanged struct {
		old  auth.Role
		rule auth.Protection
		info auth.RepoInfo
		err  error
	}
)

// receiveAccess handles the access messages and ignores any other.
func (a *repoActor) receiveAccess(ctx actor.Context, msg any) {
	var (
		op func(context.Context) (auth.Role, auth.Protection, error)
		id auth.Identity
	)
	switch m := msg.(type) {
	case *grantAccess:
		id = m.by
		op = func(c context.Context) (auth.Role, auth.Protection, error) {
			old, err := a.repo.Grant(c, m.grant)
			return old, auth.Protection{}, err
		}
	case *revokeAccess:
		id = m.by
		op = func(c context.Context) (auth.Role, auth.Protection, error) {
			old, err := a.repo.Revoke(c, m.user)
			return old, auth.Protection{}, err
		}
	case *protectRef:
		id = m.by
		op = func(c context.Context) (auth.Role, auth.Protection, error) {
			return auth.NoRole, m.rule, a.repo.Protect(c, m.rule)
		}
	case *unprotectRef:
		id = m.by
		op = func(c context.Context) (auth.Role, auth.Protection, error) {
			p, err := a.repo.Unprotect(c, m.pattern)
			return auth.NoRole, p, err
		}
	case *readSettings:
		op = func(context.Context) (auth.Role, auth.Protection, error) { return auth.NoRole, auth.Protection{}, nil }
	default:
		return
	}
	if !a.ready(ctx) {
		return
	}
	var res accessChanged
	a.writeAs(ctx, id, func(c context.Context) (err error) {
		res.old, res.rule, err = op(c)
		return err
	}, func(err error) any {
		res.err = err
		res.info = a.repo.Info()
		return &res
	})
	a.wakeHooks(ctx)
}

// askAccess sends msg to owner/name's repo actor (opening it, claiming it
// in cluster mode) and returns its answer.
func (n *Node) askAccess(ctx context.Context, owner, name string, msg any) (*accessChanged, error) {
	r, err := askRepo[*accessChanged](ctx, n, owner, name, msg)
	if err != nil {
		return nil, err
	}
	return r, r.err
}

// Grant gives g.User g.Role on owner/name through its repo actor and
// returns the role the user had before. This and the other access changes
// name the identity in ctx as who made them in their webhook events.
func (n *Node) Grant(ctx context.Context, owner, name string, g auth.Grant) (auth.Role, error) {
	r, err := n.askAccess(ctx, owner, name, &grantAccess{grant: g, by: by(ctx)})
	if err != nil {
		return auth.NoRole, err
	}
	return r.old, nil
}

// Revoke removes user's grant on owner/name and returns the role they had.
func (n *Node) Revoke(ctx context.Context, owner, name, user string) (auth.Role, error) {
	r, err := n.askAccess(ctx, owner, name, &revokeAccess{user: user, by: by(ctx)})
	if err != nil {
		return auth.NoRole, err
	}
	return r.old, nil
}

// Protect adds (or replaces) a protected ref pattern of owner/name.
func (n *Node) Protect(ctx context.Context, owner, name string, p auth.Protection) error {
	_, err := n.askAccess(ctx, owner, name, &protectRef{rule: p, by: by(ctx)})
	return err
}

// Unprotect removes a protected ref pattern of owner/name and returns it.
func (n *Node) Unprotect(ctx context.Context, owner, name, pattern string) (auth.Protection, error) {
	r, err := n.askAccess(ctx, owner, name, &unprotectRef{pattern: pattern, by: by(ctx)})
	if err != nil {
		return auth.Protection{}, err
	}
	return r.rule, nil
}

// Settings returns owner/name's settings as its writer holds them.
func (n *Node) Settings(ctx context.Context, owner, name string) (auth.RepoInfo, error) {
	r, err := n.askAccess(ctx, owner, name, &readSettings{})
	if err != nil {
		return auth.RepoInfo{}, err
	}
	return r.info, nil
}
