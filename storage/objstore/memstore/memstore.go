// Package memstore is an in-memory objstore.Store for tests and for
// RGIT_STORE_URL=mem://. Nothing persists past the process.
//
// It imports the standard library, objstore, objstore/internal and
// google/btree (the sorted key index that makes List cost what it lists,
// as an object store's does, rather than a scan of every key).
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/internal/ctxio"
)

// Store is a map-based objstore.Store, safe for concurrent use. Stored
// slices are never mutated (a put replaces the slice), so readers handed
// out earlier keep seeing the bytes they opened.
type Store struct {
	mu   sync.RWMutex
	objs map[string]object
	keys *btree.BTreeG[string] // the keys of objs, sorted
}

type object struct {
	data []byte
	mod  time.Time
}

var _ objstore.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{objs: make(map[string]object), keys: btree.NewOrderedG[string](32)}
}

// set stores o under key; s.mu must be held for writing.
func (s *Store) set(key string, o object) {
	if _, ok := s.objs[key]; !ok {
		s.keys.ReplaceOrInsert(key)
	}
	s.objs[key] = o
}

func (s *Store) lookup(ctx context.Context, op, key string) (object, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return object{}, fmt.Errorf("%s %q: %w", op, key, err)
	}
	if err := ctx.Err(); err != nil {
		return object{}, fmt.Errorf("%s %q: %w", op, key, err)
	}
	s.mu.RLock()
	o, ok := s.objs[key]
	s.mu.RUnlock()
	if !ok {
		return object{}, fmt.Errorf("%s %q: %w", op, key, objstore.ErrNotFound)
	}
	return o, nil
}

func info(key string, o object) objstore.ObjectInfo {
	return objstore.ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.mod}
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	o, err := s.lookup(ctx, "get", key)
	if err != nil {
		return nil, objstore.ObjectInfo{}, err
	}
	return io.NopCloser(bytes.NewReader(o.data)), info(key, o), nil
}

// GetRange implements objstore.Store with objstore.ClampRange semantics.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	o, err := s.lookup(ctx, "get range", key)
	if err != nil {
		return nil, err
	}
	start, end, err := objstore.ClampRange(off, length, int64(len(o.data)))
	if err != nil {
		return nil, fmt.Errorf("get range %q: %w", key, err)
	}
	return io.NopCloser(bytes.NewReader(o.data[start:end])), nil
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	o, err := s.lookup(ctx, "head", key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	return info(key, o), nil
}

// readBody validates key and reads the whole body, failing if it does not
// match a known size.
func readBody(ctx context.Context, op, key string, r io.Reader, size int64) ([]byte, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("%s %q: %w", op, key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s %q: %w", op, key, err)
	}
	data, err := io.ReadAll(ctxio.Reader(ctx, r))
	if err != nil {
		return nil, fmt.Errorf("%s %q: read body: %w", op, key, err)
	}
	if size >= 0 && int64(len(data)) != size {
		return nil, fmt.Errorf("%s %q: body is %d bytes, caller said %d", op, key, len(data), size)
	}
	return data, nil
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	data, err := readBody(ctx, "put", key, r, size)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.set(key, object{data: data, mod: time.Now()})
	s.mu.Unlock()
	return nil
}

// PutIfAbsent implements objstore.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	data, err := readBody(ctx, "put if absent", key, r, size)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objs[key]; ok {
		return fmt.Errorf("put if absent %q: %w", key, objstore.ErrExists)
	}
	s.set(key, object{data: data, mod: time.Now()})
	return nil
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := objstore.ValidateKey(key); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	s.mu.Lock()
	delete(s.objs, key)
	s.keys.Delete(key)
	s.mu.Unlock()
	return nil
}

// List implements objstore.Store. It snapshots the matching keys when
// iteration starts; objects deleted meanwhile are skipped.
func (s *Store) List(ctx context.Context, prefix, startAfter string) iter.Seq2[objstore.ObjectInfo, error] {
	return func(yield func(objstore.ObjectInfo, error) bool) {
		s.mu.RLock()
		var keys []string
		s.keys.AscendGreaterOrEqual(max(prefix, startAfter), func(k string) bool {
			if !strings.HasPrefix(k, prefix) {
				return false
			}
			if k > startAfter {
				keys = append(keys, k)
			}
			return true
		})
		s.mu.RUnlock()
		for _, k := range keys {
			if err := ctx.Err(); err != nil {
				yield(objstore.ObjectInfo{}, fmt.Errorf("list %q: %w", prefix, err))
				return
			}
			s.mu.RLock()
			o, ok := s.objs[k]
			s.mu.RUnlock()
			if ok && !yield(info(k, o), nil) {
				return
			}
		}
	}
}

// Copy implements objstore.Store. The copy shares the source's immutable
// byte slice.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	o, err := s.lookup(ctx, "copy", src)
	if err != nil {
		return err
	}
	if err := objstore.ValidateKey(dst); err != nil {
		return fmt.Errorf("copy %q to %q: %w", src, dst, err)
	}
	s.mu.Lock()
	s.set(dst, object{data: o.data, mod: time.Now()})
	s.mu.Unlock()
	return nil
}

// Describe implements objstore.Describer.
func (s *Store) Describe() string { return "memory store (mem://)" }
