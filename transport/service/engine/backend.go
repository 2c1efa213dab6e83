package engine

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/bitmap"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/storage/walk"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// backend is gitproto.Backend for one session on one repository.
type backend struct {
	e    *NodeResolver
	sess *actors.RepoSession
	snap *repo.Snapshot

	graphOnce sync.Once
	graph     *walk.Graph
}

var _ gitproto.Backend = (*backend)(nil)

func newBackend(e *NodeResolver, s *actors.RepoSession) *backend {
	return &backend{e: e, sess: s, snap: s.Snapshot}
}

func (b *backend) close() { b.sess.Release() }

// RepoInfo is the repository's settings as its database holds them
// (gitserve re-checks access against them; see gitserve.Authoritative).
func (b *backend) RepoInfo() auth.RepoInfo {
	return b.sess.Info
}

func (b *backend) log() *zap.Logger {
	return b.e.Log.With(zap.Stringer("repo", b.snap.Repo))
}

// walkGraph is the session's commit-graph cache over the snapshot's objects.
func (b *backend) walkGraph() *walk.Graph {
	b.graphOnce.Do(func() {
		n := b.e.MaxCommits
		if n <= 0 {
			n = 1 << 20
		}
		b.graph = walk.NewGraph(b.snap.Objects(), n)
	})
	return b.graph
}

// Snapshot advertises the session's read view, with annotated tags peeled.
func (b *backend) Snapshot(ctx context.Context) (gitproto.RefSnapshot, error) {
	rs := gitproto.RefSnapshot{Head: b.snap.Head, Refs: make([]gitproto.Ref, 0, len(b.snap.Refs))}
	for _, r := range b.snap.Refs {
		ref := gitproto.Ref{Name: r.Name, ID: r.ID}
		peeled, isTag, err := b.snap.Peeled(r.ID)
		if err != nil {
			return rs, fmt.Errorf("peel %s: %w", r.Name, err)
		}
		if isTag {
			ref.Peeled = peeled
		}
		rs.Refs = append(rs.Refs, ref)
	}
	return rs, nil
}

// Objects is the session's object store (the read API reads it directly).
func (b *backend) Objects() *pack.Set { return b.snap.Objects() }

// Reachable is the set of objects reachable from the session's refs, all
// the read API may show (repo.Snapshot.Reachable).
func (b *backend) Reachable(ctx context.Context) (*bitmap.Reach, error) { return b.snap.Reachable(ctx) }

func (b *backend) HasCommit(_ context.Context, id object.ID) bool { return b.snap.Objects().Has(id) }

// ObjectCount is the number of objects in the session's packs (gitserve.Sized:
// it scales the memory admission estimate).
func (b *backend) ObjectCount() int64 {
	var n int64
	for _, p := range b.snap.Packs {
		n += int64(p.Objects)
	}
	return n
}
