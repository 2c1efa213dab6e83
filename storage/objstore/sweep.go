package objstore

import (
	"context"
	"time"
)

// UploadSweeper is implemented by stores whose writes can leave hidden
// bytes behind when the writer dies mid-write (S3: a multipart upload is
// billed until it is completed or aborted, and a killed node does
// neither). Stores without it leave nothing (memory) or clean up by
// themselves (the file store removes its stale temporary files).
type UploadSweeper interface {
	// SweepUploads aborts the unfinished uploads of keys under prefix
	// that were started before cutoff and returns how many it aborted.
	// An upload completed or aborted meanwhile (by its writer or another
	// sweeper) is skipped, not an error.
	SweepUploads(ctx context.Context, prefix string, cutoff time.Time) (int, error)
}

// UploadSweeperOf returns the UploadSweeper behind s, looking through
// wrappers, or false when the store has none. A wrapper that has
// SweepUploads whatever it wraps says with CanSweepUploads whether it can
// (guard.Store).
func UploadSweeperOf(s Store) (UploadSweeper, bool) {
	sw, ok := capabilityOf[UploadSweeper](s)
	if c, wraps := sw.(interface{ CanSweepUploads() bool }); ok && wraps && !c.CanSweepUploads() {
		return nil, false
	}
	return sw, ok
}
