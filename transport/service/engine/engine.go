// Package engine binds the git protocol (transport/wire/gitproto) to stored
// repositories: it implements gitproto.Backend over a repo actor session
// (read view + serialized writes), reachability (storage/walk), the pack
// layer (storage/pack) and object checks (storage/fsck), and resolves
// repositories for the HTTP and SSH front ends (transport/service/gitserve).
//
// It may import actors/ and storage/ and the transport protocol packages.
package engine

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/clonecache"
	"github.com/rgit/rgit/storage/fsck"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/service/admission"
	"github.com/rgit/rgit/transport/service/gitserve"
)

// NodeResolver is the gitserve.Resolver of one node: it serves git sessions
// on the repositories the node owns, through its actors, and routes the rest
// to their owners.
type NodeResolver struct {
	Node *actors.Node
	Deps repo.Deps
	// IncomingDir receives pushed packs while they are indexed; it must be
	// on the same file system as the pack cache so adoption is a rename.
	IncomingDir string
	Fsck        fsck.Options
	// MaxObjectSize and MaxPackSize bound pushed packs (0: no limit).
	MaxObjectSize, MaxPackSize int64
	// Admission, if set, is asked for the memory a pushed pack declares
	// it needs beyond the push's estimate (the node's controller, which
	// admitted the push).
	Admission *admission.Controller
	// MaxDeltaDepth bounds delta chains of pushed packs (0: pack default).
	MaxDeltaDepth int
	// MaxCommits bounds each session's commit-graph cache.
	MaxCommits int
	// ClonePacks, if set, caches the packs of clones (no haves, no
	// shallow) per pack list and wants, so repeated and concurrent clones
	// stream a file instead of walking the repository.
	ClonePacks *clonecache.Cache
	// PackURIs, if set, lets protocol v2 clones download stored packs
	// from the object store themselves (nil: every byte comes from the
	// node).
	PackURIs *PackURIs
	// RefsWatch, if set, is told after a push changed refs (the read
	// API's cache drops its refs answer).
	RefsWatch RefsWatcher
	// Bitmaps, if set, builds the bitmap of a first push's pack in the
	// background (nil: clones walk until the first repack).
	Bitmaps *repo.BitmapBuilds
	Log     *zap.Logger
}

// RefsWatcher is told that a repository's refs changed.
type RefsWatcher interface {
	RefsChanged(ctx context.Context, r names.Repo) error
}

var (
	_ gitserve.Resolver       = (*NodeResolver)(nil)
	_ gitserve.Rerouter       = (*NodeResolver)(nil)
	_ gitserve.DenialObserver = (*NodeResolver)(nil)
)

// Lookup returns the repository's canonical owner, name, visibility and
// collaborators from the name index (through Deps.Meta, the node's cache, when set). It
// opens nothing and costs the same for a missing repository as for a
// private one: when cold, one GET, and beside it the database listing
// the open would start with (Deps.Ahead; not waited for), unless the
// repository is open here or owned by another node; none when cached.
func (e *NodeResolver) Lookup(ctx context.Context, r names.Repo) (auth.RepoInfo, error) {
	if !e.Deps.Meta.Cached(r) && !e.Node.OwnedElsewhere(r) {
		e.Deps.Ahead.Start(r)
	}
	var m auth.RepoInfo
	var err error
	if e.Deps.Meta != nil {
		m, err = e.Deps.Meta.Lookup(ctx, r)
	} else {
		m, err = repo.ReadMeta(ctx, e.Deps.Store, r)
	}
	if err != nil || m.Repo != r {
		// Missing, or known by another spelling: the listing names no
		// database the session will open.
		e.Deps.Ahead.Discard(r)
	}
	switch {
	case errors.Is(err, repo.ErrNotFound), errors.Is(err, repo.ErrInvalidName):
		return auth.RepoInfo{}, fmt.Errorf("%s: %w", r, auth.ErrRepoNotFound)
	case err != nil:
		return auth.RepoInfo{}, fmt.Errorf("look up %s: %w: %w", r, gitserve.ErrUnavailable, err)
	}
	return m, nil
}

// Denied drops the database listing Lookup started: a caller denied
// causes no open.
func (e *NodeResolver) Denied(r names.Repo) { e.Deps.Ahead.Discard(r) }

// Session opens a git session on the repository.
func (e *NodeResolver) Session(ctx context.Context, r names.Repo, write bool) (gitserve.Resolved, error) {
	s, node, err := e.session(ctx, r)
	if err != nil || node != "" {
		return gitserve.Resolved{Node: node}, err
	}
	b := newBackend(e, s)
	return gitserve.Resolved{Backend: b, Release: b.close}, nil
}

// BeginSession implements gitserve.SessionTracker: the session is an
// actor under the node's transport supervisor until end.
func (e *NodeResolver) BeginSession(ctx context.Context, kind actors.SessionKind) (context.Context, func(), error) {
	g, err := e.Node.BeginSession(ctx, kind)
	if err != nil {
		return ctx, nil, err
	}
	return actors.WithGitSession(ctx, g), g.End, nil
}

// session routes the repository (cluster mode: one local map read, or a
// claim) and opens an actor session on it here, through the git session's
// actor when the front end began one, mapping errors to the front ends'
// sentinels; for a repository owned by another node it returns that
// node.
func (e *NodeResolver) session(ctx context.Context, key names.Repo) (*actors.RepoSession, string, error) {
	var s *actors.RepoSession
	var r actors.Route
	var err error
	resolve := func() {
		if g := actors.GitSessionOf(ctx); g != nil {
			s, r, err = g.Resolve(ctx, key)
		} else if r, err = e.Node.Route(ctx, key); err == nil && r.Local {
			s, err = e.Node.Session(ctx, key)
		}
	}
	resolve()
	if err == nil && !r.Local && gitserve.Hops(ctx) > 0 {
		// Forwarded here, and this node's view names yet another owner:
		// the views disagree, typically one poll after a move (a hand-over
		// or a grant). Read the map now before sending the request on, so
		// that two nodes do not bounce it into the hop limit.
		e.Node.RefreshView(ctx)
		resolve()
	}
	if err == nil && !r.Local {
		return nil, r.Node, nil
	}
	var notOwner *actors.NotOwnerError
	var moved *actors.MovedError
	switch {
	case err == nil:
		return s, "", nil
	case errors.As(err, &moved):
		// Draining and no longer the owner: the forwarder routes again.
		return nil, "", fmt.Errorf("%s: %w: %w", key, gitserve.ErrMoved, err)
	case errors.As(err, &notOwner):
		// The lease moved between Route and Session.
		return nil, notOwner.Node, nil
	case errors.Is(err, repo.ErrNotFound), errors.Is(err, repo.ErrInvalidName):
		return nil, "", fmt.Errorf("%s: %w", key, auth.ErrRepoNotFound)
	case notNow(err):
		return nil, "", fmt.Errorf("%s: %w: %w", key, gitserve.ErrUnavailable, err)
	}
	return nil, "", fmt.Errorf("open %s: %w", key, err)
}

// notNow reports the actor layer's errors that mean "try again later"
// (clients get 503).
func notNow(err error) bool {
	return errors.Is(err, actors.ErrBusy) || errors.Is(err, actors.ErrLeaderUnreachable) ||
		errors.Is(err, actors.ErrDraining) || errors.Is(err, actors.ErrOwnerUnreachable)
}

// Moved implements gitserve.Mover: node answered that it no longer owns
// r (it is draining); route again once the map has moved on.
func (e *NodeResolver) Moved(ctx context.Context, r names.Repo, node string) (actors.Route, error) {
	return e.Node.Moved(ctx, r, node)
}

// Connected implements gitserve.ConnectReporter.
func (e *NodeResolver) Connected(r names.Repo, node string) { e.Node.ConnectSucceeded(r, node) }

// ConnectFailed implements gitserve.Rerouter: a forwarder could not
// connect to node, the owner of r. The node's failover rules say where
// the request goes now.
func (e *NodeResolver) ConnectFailed(ctx context.Context, r names.Repo, node, method string) (actors.Route, error) {
	return e.Node.ConnectFailed(ctx, r, node, method)
}
