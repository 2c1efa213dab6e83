// Package filestore is an objstore.Store over a local directory: each object
// is a file at root/<key>. It backs RGIT_STORE_URL=file://... (the embedded
// default) and is safe to share between processes on one machine.
//
// Writes go to a temp file under root/.rgit-tmp, are fsynced, and are then
// published atomically: rename for Put, link for PutIfAbsent (link fails
// with EEXIST if another process published first, so create-if-absent holds
// across processes without stat-then-act races). Directories created or
// changed on the way are fsynced so a published object survives a crash.
//
// Get and GetRange bodies are objstore.FileBody: objstore.Send hands the
// file to a writer's ReadFrom (net/http's sendfile(2)).
//
// A directory tree cannot hold both "a" and "a/b", so a key that is a
// directory prefix of another key (or the reverse) is refused with an error.
//
// It imports the standard library, objstore and objstore/internal only.
package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/internal/ctxio"
)

const (
	// tmpDirName holds in-flight writes; it is not a legal first key segment.
	tmpDirName = ".rgit-tmp"
	// maxSegmentLen is NAME_MAX on common Linux filesystems.
	maxSegmentLen = 255
	// staleTempAge: temp files untouched for this long belong to a crashed
	// writer and are removed by New.
	staleTempAge = 24 * time.Hour
	// publishAttempts bounds retries when a concurrent Delete prunes the
	// directory a write is about to land in.
	publishAttempts = 5
)

// ErrKeyConflict: the key would need a path that is already used the other
// way round ("a" is an object and "a/b" is wanted, or the reverse).
var ErrKeyConflict = errors.New("key conflicts with an existing object path")

// Store is a directory-backed objstore.Store.
type Store struct {
	root string
	tmp  string
}

var _ objstore.Store = (*Store)(nil)

// New opens (creating if needed) a store rooted at dir and removes temp
// files left behind by crashed writers.
func New(dir string) (*Store, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file store %s: %w", dir, err)
	}
	s := &Store{root: root, tmp: filepath.Join(root, tmpDirName)}
	if err := os.MkdirAll(s.tmp, 0o755); err != nil {
		return nil, fmt.Errorf("file store %s: %w", root, err)
	}
	s.removeStaleTemps()
	return s, nil
}

// Root returns the absolute root directory.
func (s *Store) Root() string { return s.root }

func (s *Store) removeStaleTemps() {
	entries, err := os.ReadDir(s.tmp)
	if err != nil {
		return // best effort: stale temps only cost disk space
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleTempAge {
			_ = os.Remove(filepath.Join(s.tmp, e.Name()))
		}
	}
}

// path validates key and maps it to its file path.
func (s *Store) path(key string) (string, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	if key == tmpDirName || strings.HasPrefix(key, tmpDirName+"/") {
		return "", fmt.Errorf("%w: %q is reserved by the file store", objstore.ErrInvalidKey, tmpDirName)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if len(seg) > maxSegmentLen {
			return "", fmt.Errorf("%w: segment longer than %d bytes", objstore.ErrInvalidKey, maxSegmentLen)
		}
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// begin validates key and checks ctx, the common prologue of every call.
func (s *Store) begin(ctx context.Context, key string) (string, error) {
	p, err := s.path(key)
	if err != nil {
		return "", err
	}
	return p, ctx.Err()
}

// isNotFound reports whether an open/stat error means "no such object":
// missing, or a path component is a file ("a/b" when "a" is an object).
func isNotFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// open opens the object file at p, mapping "missing" and "is a directory"
// to ErrNotFound.
func open(p string) (*os.File, fs.FileInfo, error) {
	f, err := os.Open(p)
	if isNotFound(err) {
		return nil, nil, objstore.ErrNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, objstore.ErrNotFound
	}
	return f, fi, nil
}

func info(key string, fi fs.FileInfo) objstore.ObjectInfo {
	return objstore.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	p, err := s.begin(ctx, key)
	if err != nil {
		return nil, objstore.ObjectInfo{}, fmt.Errorf("get %q: %w", key, err)
	}
	f, fi, err := open(p)
	if err != nil {
		return nil, objstore.ObjectInfo{}, fmt.Errorf("get %q: %w", key, err)
	}
	return &body{ctx: ctx, f: f, left: fi.Size()}, info(key, fi), nil
}

// GetRange implements objstore.Store with objstore.ClampRange semantics.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	p, err := s.begin(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get range %q: %w", key, err)
	}
	f, fi, err := open(p)
	if err != nil {
		return nil, fmt.Errorf("get range %q: %w", key, err)
	}
	start, end, err := objstore.ClampRange(off, length, fi.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("get range %q: %w", key, err)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("get range %q: %w", key, err)
	}
	return &body{ctx: ctx, f: f, left: end - start}, nil
}

// sendChunk is the most of a body SendTo hands its writer at once: the
// body's context is checked between chunks.
const sendChunk = 8 << 20

// body is a Get or GetRange body: left bytes of f from its offset on. It
// is an objstore.FileBody.
type body struct {
	ctx  context.Context
	f    *os.File
	left int64
}

var _ objstore.FileBody = (*body)(nil)

// Read fails with ctx's error once ctx is done, checking between reads.
func (b *body) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.f.Read(p)
	b.left -= int64(n)
	return n, err
}

// SendTo implements objstore.FileBody: each chunk is an io.LimitedReader
// of the file itself, which net.TCPConn's ReadFrom (under net/http's
// response) sends with sendfile(2).
func (b *body) SendTo(w io.Writer) (int64, error) {
	var sent int64
	for b.left > 0 {
		if err := b.ctx.Err(); err != nil {
			return sent, err
		}
		chunk := &io.LimitedReader{R: b.f, N: min(b.left, sendChunk)}
		want := chunk.N
		n, err := io.Copy(w, chunk)
		sent += n
		b.left -= n
		switch {
		case err != nil:
			return sent, err
		case n < want:
			return sent, fmt.Errorf("send %s: %w", b.f.Name(), io.ErrUnexpectedEOF)
		}
	}
	return sent, nil
}

func (b *body) Close() error { return b.f.Close() }

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	p, err := s.begin(ctx, key)
	if err != nil {
		return objstore.ObjectInfo{}, fmt.Errorf("head %q: %w", key, err)
	}
	fi, err := os.Stat(p)
	switch {
	case isNotFound(err):
		return objstore.ObjectInfo{}, fmt.Errorf("head %q: %w", key, objstore.ErrNotFound)
	case err != nil:
		return objstore.ObjectInfo{}, fmt.Errorf("head %q: %w", key, err)
	case !fi.Mode().IsRegular():
		return objstore.ObjectInfo{}, fmt.Errorf("head %q: %w", key, objstore.ErrNotFound)
	}
	return info(key, fi), nil
}

// Put implements objstore.Store: temp file, fsync, rename.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.put(ctx, key, r, size); err != nil {
		return fmt.Errorf("put %q: %w", key, err)
	}
	return nil
}

func (s *Store) put(ctx context.Context, key string, r io.Reader, size int64) error {
	p, err := s.begin(ctx, key)
	if err != nil {
		return err
	}
	tmp, err := s.writeTemp(ctx, r, size)
	if err != nil {
		return err
	}
	err = s.publish(p, func() error { return os.Rename(tmp, p) })
	if err != nil {
		_ = os.Remove(tmp)
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) {
			return fmt.Errorf("%w: %s is a directory", ErrKeyConflict, p)
		}
	}
	return err
}

// PutIfAbsent implements objstore.Store: temp file, fsync, link. The link is
// the atomic step; the temp name is removed afterwards either way.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	p, err := s.begin(ctx, key)
	if err != nil {
		return fmt.Errorf("put if absent %q: %w", key, err)
	}
	tmp, err := s.writeTemp(ctx, r, size)
	if err != nil {
		return fmt.Errorf("put if absent %q: %w", key, err)
	}
	defer os.Remove(tmp)
	err = s.publish(p, func() error { return os.Link(tmp, p) })
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Lstat(p); serr == nil && fi.IsDir() {
			return fmt.Errorf("put if absent %q: %w: %s is a directory", key, ErrKeyConflict, p)
		}
		return fmt.Errorf("put if absent %q: %w", key, objstore.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("put if absent %q: %w", key, err)
	}
	return nil
}

// writeTemp copies r into a new fsynced temp file and returns its path. A
// known size must match the body exactly.
func (s *Store) writeTemp(ctx context.Context, r io.Reader, size int64) (path string, err error) {
	f, err := os.CreateTemp(s.tmp, "obj-*")
	if err != nil {
		return "", fmt.Errorf("create temp: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	r = ctxio.Reader(ctx, r)
	if size < 0 {
		if _, err := copyBody(f, r); err != nil {
			return "", fmt.Errorf("write body: %w", err)
		}
	} else {
		n, err := copyBody(f, io.LimitReader(r, size))
		if err != nil {
			return "", fmt.Errorf("write body: %w", err)
		}
		if n != size {
			return "", fmt.Errorf("body is %d bytes, caller said %d", n, size)
		}
		// The body must end here, and a reader that fails at its end
		// (one that checked the body as it streamed) fails the write.
		m, err := io.ReadFull(r, make([]byte, 1))
		switch {
		case m > 0:
			return "", fmt.Errorf("body is longer than the %d bytes the caller said", size)
		case err != nil && !errors.Is(err, io.EOF):
			return "", fmt.Errorf("write body: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("fsync temp: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("close temp: %w", err)
	}
	return f.Name(), nil
}

// copyBufSize is the buffer a write copies its body through: the body is
// always a wrapped reader (ctxio), so os.File.ReadFrom would fall back to
// io.Copy's 32 KiB, and a 20 MB Git LFS upload took 640 reads and writes
// (each also a hash update when the body is checked as it streams).
const copyBufSize = 1 << 20

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copyBody copies r into f through a pooled copyBufSize buffer.
func copyBody(f *os.File, r io.Reader) (int64, error) {
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	// Only Write: f's ReadFrom would bring back the small buffer.
	return io.CopyBuffer(struct{ io.Writer }{f}, r, *buf)
}

// publish creates p's parent directories and runs op (rename or link into
// p), retrying when a concurrent Delete pruned the parent in between, then
// fsyncs the parent so the new name is durable.
func (s *Store) publish(p string, op func() error) error {
	dir := filepath.Dir(p)
	var err error
	for range publishAttempts {
		if err = s.mkdirs(dir); err != nil {
			return err
		}
		if err = op(); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// mkdirs is os.MkdirAll that fsyncs the parent of every directory it
// creates, so the path to a published object is durable too.
func (s *Store) mkdirs(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%w: %s is an object", ErrKeyConflict, dir)
		}
		return nil
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: a parent of %s is an object", ErrKeyConflict, dir)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if err := s.mkdirs(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

// Delete implements objstore.Store. It removes the file, fsyncs its
// directory, then prunes directories left empty (best effort; a concurrent
// write into a pruned directory retries in publish).
func (s *Store) Delete(ctx context.Context, key string) error {
	p, err := s.begin(ctx, key)
	if err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	fi, err := os.Lstat(p)
	if isNotFound(err) || (err == nil && fi.IsDir()) {
		return nil // no such object ("a" as a directory of "a/b" is not one)
	}
	if err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	if err := os.Remove(p); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	dir := filepath.Dir(p)
	if err := syncDir(dir); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	for dir != s.root && strings.HasPrefix(dir, s.root) {
		if os.Remove(dir) != nil {
			break // not empty, or already gone
		}
		dir = filepath.Dir(dir)
	}
	return nil
}

// List implements objstore.Store. It walks the directory subtree that can
// hold keys with this prefix, collects the matching keys and sorts them:
// directory order is not key order once names contain bytes below '/'.
func (s *Store) List(ctx context.Context, prefix, startAfter string) iter.Seq2[objstore.ObjectInfo, error] {
	return func(yield func(objstore.ObjectInfo, error) bool) {
		infos, err := s.collect(ctx, prefix, startAfter)
		if err != nil {
			yield(objstore.ObjectInfo{}, fmt.Errorf("list %q: %w", prefix, err))
			return
		}
		for _, info := range infos {
			if !yield(info, nil) {
				return
			}
		}
	}
}

func (s *Store) collect(ctx context.Context, prefix, startAfter string) ([]objstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	base := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		base = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
		if !strings.HasPrefix(base, s.root+string(filepath.Separator)) && base != s.root {
			return nil, nil // a prefix with ".." matches no valid key
		}
	}
	var infos []objstore.ObjectInfo
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isNotFound(err) {
				return nil // vanished under a concurrent Delete
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if p == s.tmp {
				return filepath.SkipDir
			}
			// Descend only where keys can still match the prefix.
			if dirKey := key + "/"; p != s.root && !strings.HasPrefix(dirKey, prefix) && !strings.HasPrefix(prefix, dirKey) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) || key <= startAfter {
			return nil
		}
		fi, err := d.Info()
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		infos = append(infos, info(key, fi))
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(infos, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}

// Copy implements objstore.Store by copying the bytes through a temp file
// and renaming, like Put.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	p, err := s.begin(ctx, src)
	if err != nil {
		return fmt.Errorf("copy %q to %q: %w", src, dst, err)
	}
	f, fi, err := open(p)
	if err != nil {
		return fmt.Errorf("copy %q to %q: %w", src, dst, err)
	}
	defer f.Close()
	if err := s.put(ctx, dst, f, fi.Size()); err != nil {
		return fmt.Errorf("copy %q to %q: %w", src, dst, err)
	}
	return nil
}

// Describe implements objstore.Describer.
func (s *Store) Describe() string { return "file store " + s.root }
