// Package engine binds the git protocol (transport/gitproto) to stored
// repositories: it implements gitproto.Backend over a repo actor session
// (read view + serialized writes), reachability (storage/walk), the pack
// layer (storage/pack) and object checks (storage/fsck), and resolves
// repositories for the HTTP and SSH front ends (transport/gitserve).
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
	"github.com/rgit/rgit/storage/fsck"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/gitproto"
	"github.com/rgit/rgit/transport/gitserve"
)

// Engine serves git sessions for one node.
type Engine struct {
	Node *actors.Node
	Deps repo.Deps
	// IncomingDir receives pushed packs while they are indexed; it must be
	// on the same file system as the pack cache so adoption is a rename.
	IncomingDir string
	Fsck        fsck.Options
	// MaxObjectSize and MaxPackSize bound pushed packs (0: pack defaults).
	MaxObjectSize, MaxPackSize int64
	// MaxCommits bounds each session's commit-graph cache.
	MaxCommits int
	Log        *zap.Logger
}

var _ gitserve.Resolver = (*Engine)(nil)

// Lookup returns the repository's owner and visibility.
func (e *Engine) Lookup(ctx context.Context, owner, name string) (gitserve.RepoInfo, error) {
	s, err := e.session(ctx, owner, name)
	if err != nil {
		return gitserve.RepoInfo{}, err
	}
	defer s.Release()
	return gitserve.RepoInfo{Owner: s.Info.Owner, Name: s.Info.Name, Public: s.Info.Public}, nil
}

// Session opens a git session on the repository.
func (e *Engine) Session(ctx context.Context, owner, name string, write bool) (gitproto.Backend, func(), error) {
	s, err := e.session(ctx, owner, name)
	if err != nil {
		return nil, nil, err
	}
	b := newBackend(e, s)
	return b, b.close, nil
}

// session opens an actor session, mapping errors to the front ends'
// sentinels.
func (e *Engine) session(ctx context.Context, owner, name string) (*actors.Session, error) {
	s, err := e.Node.Session(ctx, owner, name)
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, repo.ErrNotFound), errors.Is(err, repo.ErrInvalidName):
		return nil, fmt.Errorf("%s/%s: %w", owner, name, auth.ErrRepoNotFound)
	case errors.Is(err, actors.ErrBusy):
		return nil, fmt.Errorf("%s/%s: %w: %v", owner, name, gitserve.ErrUnavailable, err)
	}
	return nil, fmt.Errorf("open %s/%s: %w", owner, name, err)
}
