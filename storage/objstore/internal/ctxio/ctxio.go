// Package ctxio holds small context-aware I/O helpers shared by the object
// store backends. It imports the standard library only.
package ctxio

import (
	"context"
	"io"
)

// Reader returns a reader that fails with ctx's error once ctx is done. It
// checks between reads, so it cannot interrupt a Read that is blocked, but it
// stops a long copy from a local file or memory promptly.
func Reader(ctx context.Context, r io.Reader) io.Reader {
	return &reader{ctx: ctx, r: r}
}

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// ReadCloser is Reader for an io.ReadCloser; Close closes the underlying
// reader and then calls onClose, if non-nil.
func ReadCloser(ctx context.Context, rc io.ReadCloser, onClose func()) io.ReadCloser {
	return &readCloser{reader: reader{ctx: ctx, r: rc}, c: rc, onClose: onClose}
}

type readCloser struct {
	reader
	c       io.Closer
	onClose func()
}

// UnwrapBody returns the reader r wraps (objstore.Send looks through it
// to a file store's body, which answers for ctx itself: the store it came
// from was handed ctx).
func (r *readCloser) UnwrapBody() io.Reader { return r.r }

func (r *readCloser) Close() error {
	err := r.c.Close()
	if r.onClose != nil {
		r.onClose()
		r.onClose = nil
	}
	return err
}
