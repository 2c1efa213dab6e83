package guard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rgit/rgit/storage/objstore"
)

var _ objstore.UploadSweeper = (*Store)(nil)

// CanSweepUploads reports whether the guarded store can sweep uploads
// (objstore.UploadSweeperOf asks it: the guard has SweepUploads whatever
// it guards).
func (s *Store) CanSweepUploads() bool {
	_, ok := objstore.UploadSweeperOf(s.inner)
	return ok
}

// SweepUploads implements objstore.UploadSweeper for a guarded store that
// can sweep (else it answers errors.ErrUnsupported). It is one call of as
// many requests as there are uploads to abort, so, like Copy, it has no
// operation deadline; while the store is Down it fails fast.
func (s *Store) SweepUploads(ctx context.Context, prefix string, cutoff time.Time) (int, error) {
	sw, ok := objstore.UploadSweeperOf(s.inner)
	if !ok {
		return 0, fmt.Errorf("sweep uploads under %q: %w", prefix, errors.ErrUnsupported)
	}
	c, err := s.begin(ctx, "sweep_uploads")
	if err != nil {
		return 0, err
	}
	c.pause()
	defer c.finish()
	n, err := sw.SweepUploads(c.ctx, prefix, cutoff)
	return n, c.result(err)
}
