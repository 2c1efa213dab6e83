package objstore

import (
	"context"
	"io"
	"iter"
	"time"

	"github.com/rgit/rgit/storage/objstore/internal/ctxio"
)

// WithTimeout wraps s so that every call runs under a context deadline d
// after the call starts (RGIT_STORE_TIMEOUT_SECS), on top of the caller's
// own context. For Get and GetRange the deadline covers opening the object
// and reading the body, and is released when the reader is closed; a read
// after the deadline fails with context.DeadlineExceeded. For List it covers
// the whole iteration. d <= 0 returns s unchanged.
func WithTimeout(s Store, d time.Duration) Store {
	if d <= 0 {
		return s
	}
	return &timeoutStore{s: s, d: d}
}

type timeoutStore struct {
	s Store
	d time.Duration
}

func (t *timeoutStore) Get(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	rc, info, err := t.s.Get(ctx, key)
	if err != nil {
		cancel()
		return nil, info, err
	}
	return ctxio.ReadCloser(ctx, rc, cancel), info, nil
}

func (t *timeoutStore) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	rc, err := t.s.GetRange(ctx, key, off, length)
	if err != nil {
		cancel()
		return nil, err
	}
	return ctxio.ReadCloser(ctx, rc, cancel), nil
}

func (t *timeoutStore) Head(ctx context.Context, key string) (ObjectInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.s.Head(ctx, key)
}

func (t *timeoutStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.s.Put(ctx, key, r, size)
}

func (t *timeoutStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.s.PutIfAbsent(ctx, key, r, size)
}

func (t *timeoutStore) Delete(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.s.Delete(ctx, key)
}

func (t *timeoutStore) List(ctx context.Context, prefix, startAfter string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		ctx, cancel := context.WithTimeout(ctx, t.d)
		defer cancel()
		for info, err := range t.s.List(ctx, prefix, startAfter) {
			if !yield(info, err) {
				return
			}
		}
	}
}

func (t *timeoutStore) Copy(ctx context.Context, src, dst string) error {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.s.Copy(ctx, src, dst)
}

// Describe names the wrapped store.
func (t *timeoutStore) Describe() string { return Describe(t.s) }

// Unwrap returns the wrapped store (PresignerOf looks through it).
func (t *timeoutStore) Unwrap() Store { return t.s }
