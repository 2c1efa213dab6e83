package repo

import (
	"context"
	"fmt"
	"os"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/pack"
)

// PackUpload sends a pushed pack to a store that can stage (S3) while the
// pack is still indexed and checked, so that the push does not wait for a
// whole upload after indexing. Nothing is visible in the store until
// Stage commits the upload, which the push does only once every check has
// passed and before its ref update commits: a push is still acknowledged
// only when its pack is durable, and a refused or failed push leaves no
// object (Abort).
//
// The pack's key is its checksum (PackKeys), known once the pack's bytes
// are final: pack.IndexOptions.Sealed says when (right after the pack is
// received, unless it may be thin), and Start, given as that callback,
// begins the upload.
type PackUpload struct {
	d      Deps
	r      names.Repo
	st     objstore.Stager
	ctx    context.Context
	cancel context.CancelFunc

	// Set by Start; read once done is closed.
	done      chan struct{}
	f         *os.File // the sealed pack, read until Commit or Abort
	sum       object.ID
	size      int64
	staged    objstore.Staged
	err       error
	committed bool
}

// NewPackUpload prepares the upload of a pack pushed to r under ctx, or
// returns nil when the store cannot stage (StagePack then uploads the
// pack after indexing, a local copy on the file store).
func NewPackUpload(ctx context.Context, d Deps, r names.Repo) *PackUpload {
	st, ok := objstore.StagerOf(d.Store)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	return &PackUpload{d: d, r: r, st: st, ctx: ctx, cancel: cancel}
}

// Start begins sending f, the sealed pack of size bytes with checksum sum,
// in the background; Abort closes f. It is the
// pack.IndexOptions.Sealed callback and is called at most once.
func (u *PackUpload) Start(f *os.File, size int64, sum object.ID) {
	u.f, u.sum, u.size = f, sum, size
	u.done = make(chan struct{})
	key, _ := PackKeys(u.r, "pack-"+sum.String())
	go func() {
		defer close(u.done)
		u.staged, u.err = u.st.Stage(u.ctx, key, f, size)
	}()
}

// Stage finishes storing the indexed pack ix: it waits for the upload
// Start began, commits it, then stores the idx as StagePack does.
func (u *PackUpload) Stage(ctx context.Context, ix *pack.Indexed) (PackInfo, error) {
	if u.done == nil {
		return PackInfo{}, fmt.Errorf("stage %s in %s: the pack upload never started", ix.Name, u.r)
	}
	if ix.Checksum != u.sum {
		return PackInfo{}, fmt.Errorf("stage %s in %s: the upload sent pack-%s", ix.Name, u.r, u.sum)
	}
	return stagePack(ctx, u.d, u.r, ix, func(ctx context.Context, key string) (int64, error) {
		select {
		case <-u.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if u.err != nil {
			return 0, unavailable(ctx, u.err)
		}
		if err := u.staged.Commit(ctx); err != nil {
			return 0, unavailable(ctx, err)
		}
		u.committed = true
		return u.size, nil
	})
}

// Abort ends the upload unless Stage committed it: the parts sent are
// discarded. It waits for the upload's goroutine and closes the pack
// file; it is deferred by every push, and may be on a nil *PackUpload.
func (u *PackUpload) Abort() {
	if u == nil {
		return
	}
	u.cancel()
	if u.done == nil {
		return
	}
	<-u.done
	if u.staged != nil && !u.committed {
		u.staged.Abort(u.ctx)
	}
	u.f.Close()
}

// unavailable marks a failed upload as the store's failure (the push is
// told to try again later), as the guarded store marks a failed Put; a
// push whose own context ended is left as it is.
func unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil || objstore.Unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: upload pack: %w", objstore.ErrUnavailable, err)
}
