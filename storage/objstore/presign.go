package objstore

import (
	"context"
	"time"
)

// Presigner is implemented by stores whose objects a client can read and
// write itself, over HTTP, with a request the store signed: the bytes then
// never pass through rgit (S3). Stores without it (files, memory) serve no
// such requests, and rgit moves their bytes itself.
type Presigner interface {
	// PresignGet returns a request that reads key, valid for ttl.
	PresignGet(ctx context.Context, key string, ttl time.Duration) (Presigned, error)
	// PresignPut returns a request, valid for ttl, that writes key with a
	// body of exactly size bytes whose SHA-256 is sum: the store refuses
	// any other body (the length and the checksum header are signed).
	PresignPut(ctx context.Context, key string, size int64, sum [32]byte, ttl time.Duration) (Presigned, error)
	// HeadSHA256 is Head plus the SHA-256 the store recorded when the
	// object was written whole with a checksum; ok is false when it has
	// none (written in parts, or a store that keeps no checksums).
	HeadSHA256(ctx context.Context, key string) (info ObjectInfo, sum [32]byte, ok bool, err error)
}

// Presigned is a request a client sends to the store as it is.
type Presigned struct {
	Method string
	URL    string
	// Header holds the headers the client must send with it besides
	// Host and Content-Length, which HTTP clients set themselves.
	Header  map[string]string
	Expires time.Time
}

// unwrapper is implemented by stores that wrap another (WithTimeout).
type unwrapper interface{ Unwrap() Store }

// PresignerOf returns the Presigner behind s, looking through wrappers
// such as WithTimeout, or false when the store has none.
func PresignerOf(s Store) (Presigner, bool) { return capabilityOf[Presigner](s) }

// capabilityOf returns the optional capability T of s or of the first
// store behind its wrappers that has it.
func capabilityOf[T any](s Store) (T, bool) {
	for s != nil {
		if c, ok := s.(T); ok {
			return c, true
		}
		u, ok := s.(unwrapper)
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	var zero T
	return zero, false
}
