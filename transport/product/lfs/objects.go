package lfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/repo"
)

// Sentinel errors of uploads and verification; clients see 422.
var (
	// ErrSizeMismatch: the bytes are not as many as the object's size.
	ErrSizeMismatch = errors.New("object size does not match")
	// ErrHashMismatch: the bytes' SHA-256 is not the object id.
	ErrHashMismatch = errors.New("object SHA-256 does not match its id")
	// ErrMissing: the object is not in the store.
	ErrMissing = errors.New("object not found")
)

// objects is the repository's LFS objects in the store.
type objects struct {
	store objstore.Store
	// pre is the store's Presigner, nil when the node moves the bytes.
	pre objstore.Presigner
}

func newObjects(st objstore.Store) objects {
	o := objects{store: st}
	if p, ok := objstore.PresignerOf(st); ok {
		o.pre = p
	}
	return o
}

// present reports whether owner/name holds oid with size bytes, from
// metadata alone: the size, and on a store that records SHA-256
// checksums the checksum too. A present object is never uploaded again.
func (o objects) present(ctx context.Context, r names.Repo, oid string, size int64) (bool, error) {
	key := repo.LFSKey(r, oid)
	if o.pre == nil {
		info, err := o.store.Head(ctx, key)
		if errors.Is(err, objstore.ErrNotFound) {
			return false, nil
		}
		return err == nil && info.Size == size, err
	}
	info, sum, known, err := o.pre.HeadSHA256(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return info.Size == size && (!known || hex.EncodeToString(sum[:]) == oid), nil
}

// verify confirms that oid is stored whole: its size, and its SHA-256 as
// the store recorded it. Where there is no recorded checksum the node
// reads the object and hashes it, unless trusted (the node wrote it
// itself, checking it as it went: every object on a store without a
// Presigner, and the SSH transfer's uploads). An object that fails is
// deleted, so it never counts as present.
func (o objects) verify(ctx context.Context, r names.Repo, oid string, size int64, trusted bool) error {
	key := repo.LFSKey(r, oid)
	var info objstore.ObjectInfo
	var sum [32]byte
	known := false
	var err error
	if o.pre != nil {
		info, sum, known, err = o.pre.HeadSHA256(ctx, key)
	} else {
		info, err = o.store.Head(ctx, key)
		trusted = true
	}
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return fmt.Errorf("%s: %w", oid, ErrMissing)
	case err != nil:
		return err
	case info.Size != size:
		// Another size than its id claims: someone else's upload of
		// the same id is not what this client sent, and wrong anyway.
		return o.refuse(ctx, key, fmt.Errorf("%s is %d bytes, not %d: %w", oid, info.Size, size, ErrSizeMismatch))
	case known && hex.EncodeToString(sum[:]) != oid:
		return o.refuse(ctx, key, fmt.Errorf("%s: %w", oid, ErrHashMismatch))
	case known || trusted:
		return nil
	}
	rc, err := o.store.GetRange(ctx, key, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return fmt.Errorf("read %s to verify it: %w", oid, err)
	}
	if n != size {
		return o.refuse(ctx, key, fmt.Errorf("%s is %d bytes, not %d: %w", oid, n, size, ErrSizeMismatch))
	}
	if hex.EncodeToString(h.Sum(nil)) != oid {
		return o.refuse(ctx, key, fmt.Errorf("%s: %w", oid, ErrHashMismatch))
	}
	return nil
}

// refuse deletes a stored object that failed verification and returns why.
func (o objects) refuse(ctx context.Context, key string, why error) error {
	if err := o.store.Delete(ctx, key); err != nil {
		return fmt.Errorf("%w (and deleting it failed: %w)", why, err)
	}
	return why
}

// put stores what r reads as rp's object oid, checking as it streams that it is exactly size
// bytes with that SHA-256: the object appears only when both hold (the
// store publishes nothing whose reader failed), and an object stored
// already is left as it is. Memory is the store's streaming buffer.
func (o objects) put(ctx context.Context, rp names.Repo, oid string, size int64, r io.Reader) (int64, error) {
	want, err := hex.DecodeString(oid)
	if err != nil || len(want) != sha256.Size {
		return 0, fmt.Errorf("object id %q: %w", oid, ErrHashMismatch)
	}
	body := &checkedBody{r: r, size: size, h: sha256.New()}
	copy(body.want[:], want)
	err = o.store.PutIfAbsent(ctx, repo.LFSKey(rp, oid), body, size)
	if errors.Is(err, objstore.ErrExists) {
		// Someone stored it first; the rest of this body is not needed.
		return body.n, nil
	}
	if body.err != nil {
		return body.n, body.err
	}
	return body.n, err
}

// open reads oid from byte off on.
func (o objects) open(ctx context.Context, r names.Repo, oid string, off int64) (io.ReadCloser, int64, error) {
	key := repo.LFSKey(r, oid)
	info, err := o.store.Head(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, 0, fmt.Errorf("%s: %w", oid, ErrMissing)
	}
	if err != nil {
		return nil, 0, err
	}
	rc, err := o.store.GetRange(ctx, key, off, -1)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, 0, fmt.Errorf("%s: %w", oid, ErrMissing)
	}
	return rc, info.Size, err
}

// checkedBody passes a body through while counting and hashing it, and
// fails its last read (where it would end) unless it was exactly size
// bytes with SHA-256 want; a body running past size fails at once.
type checkedBody struct {
	r    io.Reader
	size int64
	want [32]byte
	h    hash.Hash
	n    int64
	err  error // the check that failed, kept for the caller
}

func (c *checkedBody) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	if c.n+int64(n) > c.size {
		c.err = fmt.Errorf("more than %d bytes: %w", c.size, ErrSizeMismatch)
		return 0, c.err
	}
	c.h.Write(p[:n])
	c.n += int64(n)
	if !errors.Is(err, io.EOF) {
		return n, err
	}
	var got [32]byte
	c.h.Sum(got[:0])
	switch {
	case c.n != c.size:
		c.err = fmt.Errorf("%d bytes, not %d: %w", c.n, c.size, ErrSizeMismatch)
	case got != c.want:
		c.err = fmt.Errorf("SHA-256 %x: %w", got, ErrHashMismatch)
	}
	if c.err != nil {
		return n, c.err
	}
	return n, io.EOF
}
