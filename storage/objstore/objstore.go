// Package objstore defines the object-store interface every durable byte in
// rgit goes through.
//
// Backends live in sub-packages (filestore, memstore, s3store) and the
// RGIT_STORE_URL opener in storeurl, because they import this package; this
// package holds only the interface, the optional Presigner interface
// (stores a client can reach directly), the optional FileBody of a body
// kept in a local file and Send, which hands such a body to sendfile(2)
// past the wrappers, the sentinel errors, key validation, the WithTimeout
// wrapper and Verify (the start-up and health check of a store). It
// imports the standard library and its own internal/ctxio only.
package objstore

import (
	"context"
	"errors"
	"io"
	"iter"
	"time"
)

// Sentinel errors callers branch on. Backends wrap them with context.
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrExists: a create-if-absent lost because the key already exists
	// (S3 412 Precondition Failed, or 409 for a concurrent conditional write).
	ErrExists = errors.New("object already exists")
	// ErrUnavailable: the store did not answer in time, refused the
	// connection, or is throttling or failing; the request may or may not
	// have taken effect. Callers turn it into "try again later" (HTTP 503,
	// a git ng or ERR line naming the store), never into "not found".
	ErrUnavailable = errors.New("object store unavailable")
)

// StaleWhileUnavailable is how long past their lifetime a node keeps
// using answers it read from the store (credentials, the name index)
// while the store is unavailable: nothing can change them through the
// store meanwhile, and serving warm repositories needs them.
const StaleWhileUnavailable = 15 * time.Minute

// Unavailable reports whether err wraps ErrUnavailable.
func Unavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Store is the whole contract between rgit and its durable storage.
//
// Keys are '/'-separated relative paths without a leading slash, '.' or '..'
// segments. Every method honours ctx cancellation and deadlines.
type Store interface {
	// Get opens the whole object. The caller closes the reader.
	Get(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error)
	// GetRange opens length bytes starting at off (length < 0: to the end).
	GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)
	// Head returns the object's metadata.
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// Put stores r under key, replacing any existing object. size is the
	// exact length when known, or -1; large or unknown-size bodies are
	// streamed (multipart on S3) without being held in memory. A body
	// whose reader fails, even after its last byte, stores nothing.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// PutIfAbsent stores r under key only if key does not exist, atomically
	// across processes; it returns ErrExists when another writer got there
	// first. Exactly one of any set of concurrent creators succeeds.
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error
	// Delete removes key. Deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List yields every object whose key starts with prefix, in ascending
	// key order, fetching pages lazily. startAfter, when non-empty, skips
	// keys <= startAfter. Iteration stops at the first error.
	List(ctx context.Context, prefix, startAfter string) iter.Seq2[ObjectInfo, error]
	// Copy duplicates src to dst inside the store (server-side on S3: the
	// bytes never pass through rgit).
	Copy(ctx context.Context, src, dst string) error
}
