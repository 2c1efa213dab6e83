package engine

import (
	"context"
	"fmt"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/service/gitserve"
)

// Git LFS locks (transport/product/lfs.Locks) through the repository's actor on
// this node, which owns it (the lock endpoints are routed like git).

// CreateLock implements lfs.Locks.
func (e *NodeResolver) CreateLock(ctx context.Context, r names.Repo, path, holder string) (repo.Lock, error) {
	l, err := e.Node.CreateLock(ctx, r, path, holder)
	return l, lockErr(err)
}

// DeleteLock implements lfs.Locks.
func (e *NodeResolver) DeleteLock(ctx context.Context, r names.Repo, id, holder string) (repo.Lock, error) {
	l, err := e.Node.DeleteLock(ctx, r, id, holder)
	return l, lockErr(err)
}

// Locks implements lfs.Locks.
func (e *NodeResolver) Locks(ctx context.Context, r names.Repo) ([]repo.Lock, error) {
	ls, err := e.Node.Locks(ctx, r)
	return ls, lockErr(err)
}

// lockErr maps the actor layer's "not now" errors to the front ends'.
func lockErr(err error) error {
	if notNow(err) {
		return fmt.Errorf("%w: %w", gitserve.ErrUnavailable, err)
	}
	return err
}
