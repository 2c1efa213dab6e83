package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
)

// Access changes are messages to the repository's actor, like every other
// write: one writer per repository, on whichever node owns it.
type (
	// grantAccess asks for repo.Repo.Grant; *accessChanged answers.
	// by, here and below, is who makes the change (for its webhook event).
	grantAccess struct {
		toRepo[*accessChanged]
		grant auth.Grant
		by    auth.Identity
	}
	// revokeAccess asks for repo.Repo.Revoke; *accessChanged answers.
	revokeAccess struct {
		toRepo[*accessChanged]
		user string
		by   auth.Identity
	}
	// protectRef asks for repo.Repo.Protect; *accessChanged answers.
	protectRef struct {
		toRepo[*accessChanged]
		rule auth.Protection
		by   auth.Identity
	}
	// unprotectRef asks for repo.Repo.Unprotect; *accessChanged answers.
	unprotectRef struct {
		toRepo[*accessChanged]
		pattern string
		by      auth.Identity
	}
	// readSettings asks for the settings as the writer holds them;
	// *accessChanged answers (info only).
	readSettings struct{ toRepo[*accessChanged] }
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
func (a *repoActor) receiveAccess(ctx actor.Context, msg repoMessage) {
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
	}, func(err error) repoReply {
		res.err = err
		res.info = a.repo.Info()
		return &res
	})
	a.wakeHooks(ctx)
}

// askAccess sends msg to key's repo actor (opening it, claiming it in
// cluster mode) and returns its answer.
func (n *Node) askAccess(ctx context.Context, key names.Repo, msg repoRequest[*accessChanged]) (*accessChanged, error) {
	r, err := askRepo(ctx, n, key, msg)
	if err != nil {
		return nil, err
	}
	return r, r.err
}

// Grant gives g.User g.Role on key through its repo actor and
// returns the role the user had before. This and the other access changes
// name the identity in ctx as who made them in their webhook events.
func (n *Node) Grant(ctx context.Context, key names.Repo, g auth.Grant) (auth.Role, error) {
	r, err := n.askAccess(ctx, key, &grantAccess{grant: g, by: by(ctx)})
	if err != nil {
		return auth.NoRole, err
	}
	return r.old, nil
}

// Revoke removes user's grant on key and returns the role they had.
func (n *Node) Revoke(ctx context.Context, key names.Repo, user string) (auth.Role, error) {
	r, err := n.askAccess(ctx, key, &revokeAccess{user: user, by: by(ctx)})
	if err != nil {
		return auth.NoRole, err
	}
	return r.old, nil
}

// Protect adds (or replaces) a protected ref pattern of key.
func (n *Node) Protect(ctx context.Context, key names.Repo, p auth.Protection) error {
	_, err := n.askAccess(ctx, key, &protectRef{rule: p, by: by(ctx)})
	return err
}

// Unprotect removes a protected ref pattern of key and returns it.
func (n *Node) Unprotect(ctx context.Context, key names.Repo, pattern string) (auth.Protection, error) {
	r, err := n.askAccess(ctx, key, &unprotectRef{pattern: pattern, by: by(ctx)})
	if err != nil {
		return auth.Protection{}, err
	}
	return r.rule, nil
}

// Settings returns key's settings as its writer holds them.
func (n *Node) Settings(ctx context.Context, key names.Repo) (auth.RepoInfo, error) {
	r, err := n.askAccess(ctx, key, &readSettings{})
	if err != nil {
		return auth.RepoInfo{}, err
	}
	return r.info, nil
}
