package objstore

import (
	"context"
	"io"
)

// Stager is implemented by stores that can take an object's bytes before
// the writer decides to keep them (S3: a multipart upload, completed or
// aborted): a push sends its pack while it is still indexed and checked,
// and the pack appears under its key only when the push commits to it.
// Stores without it (files, memory) are written with Put, whose cost is a
// local copy.
type Stager interface {
	// Stage sends the size bytes of r that will be stored under key and
	// returns once the store holds them all; nothing is visible under key
	// until Commit. A failed Stage leaves nothing behind. r is read
	// concurrently (ReadAt), never past size, until Commit or Abort
	// returns (a small body may be sent whole at Commit).
	Stage(ctx context.Context, key string, r io.ReaderAt, size int64) (Staged, error)
}

// Staged is an object whose bytes the store holds but does not show yet.
type Staged interface {
	// Commit makes the object visible under its key, replacing any
	// object there. Once it returns nil the object is durable.
	Commit(ctx context.Context) error
	// Abort discards the bytes (S3: AbortMultipartUpload). It runs even
	// when ctx is done, and does nothing after a successful Commit.
	Abort(ctx context.Context)
}

// StagerOf returns the Stager behind s, looking through wrappers such as
// WithTimeout, or false when the store has none. A wrapper that has Stage
// whatever it wraps says with CanStage whether it can (guard.Store).
func StagerOf(s Store) (Stager, bool) {
	st, ok := capabilityOf[Stager](s)
	if c, wraps := st.(interface{ CanStage() bool }); ok && wraps && !c.CanStage() {
		return nil, false
	}
	return st, ok
}
