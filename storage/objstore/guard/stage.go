package guard

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rgit/rgit/storage/objstore"
)

var _ objstore.Stager = (*Store)(nil)

// CanStage reports whether the guarded store can stage (objstore.StagerOf
// asks it: the guard has Stage whatever it guards).
func (s *Store) CanStage() bool {
	_, ok := objstore.StagerOf(s.inner)
	return ok
}

// Stage implements objstore.Stager for a guarded store that can stage
// (else it answers errors.ErrUnsupported). Sending the parts is one
// request as a Put is: its deadline restarts with every read of the body.
// Commit is another request.
func (s *Store) Stage(ctx context.Context, key string, r io.ReaderAt, size int64) (objstore.Staged, error) {
	st, ok := objstore.StagerOf(s.inner)
	if !ok {
		return nil, fmt.Errorf("stage %q: %w", key, errors.ErrUnsupported)
	}
	c, err := s.begin(ctx, "stage")
	if err != nil {
		return nil, err
	}
	defer c.finish()
	inner, err := st.Stage(c.ctx, key, &progressReaderAt{c: c, r: r}, size)
	if err := c.result(err); err != nil {
		return nil, err
	}
	return &staged{s: s, inner: inner}, nil
}

// progressReaderAt restarts the deadline on every read of a staged body
// while its Stage runs.
type progressReaderAt struct {
	c *call
	r io.ReaderAt
}

func (p *progressReaderAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.r.ReadAt(b, off)
	if n > 0 && p.c.ctx.Err() == nil {
		p.c.progress()
	}
	return n, err
}

// staged is a guarded store's staged object.
type staged struct {
	s     *Store
	inner objstore.Staged
}

func (st *staged) Commit(ctx context.Context) error {
	c, err := st.s.begin(ctx, "commit_stage")
	if err != nil {
		return err
	}
	defer c.finish()
	return c.result(st.inner.Commit(c.ctx))
}

func (st *staged) Abort(ctx context.Context) { st.inner.Abort(ctx) }
