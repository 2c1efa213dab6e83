package repo

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/refdb"
)

// Git LFS locks live in the repository's database, written only by its
// writer (the repo actor), so they survive restarts and move with the
// repository like its refs:
//
//	lfs/lock/{id}                  → JSON Lock
//	lfs/lockpath/{sha256(path)}    → id   (at most one lock per path)
//
// Both keys are written in one transaction, the path key with
// create-if-absent, so two users locking one path at once get one lock
// and one conflict. Ids begin with the time in hex, so the id order that
// listings page through is the order locks were taken in.
const (
	prefixLock     = "lfs/lock/"
	prefixLockPath = "lfs/lockpath/"
	// MaxLocks bounds a repository's locks: they are held in its
	// database, which every open reads whole.
	MaxLocks = 10000
	// MaxLockPath bounds a locked path, in bytes.
	MaxLockPath = 4096
)

// Sentinel errors of lock changes.
var (
	// ErrNoLock: no lock has that id.
	ErrNoLock = errors.New("no such lock")
	// ErrNotLockHolder: the lock is someone else's.
	ErrNotLockHolder = errors.New("lock held by someone else")
	// ErrBadLockPath: the path cannot be locked (empty, too long, not
	// UTF-8, control characters).
	ErrBadLockPath = errors.New("invalid lock path")
	// ErrTooManyLocks: the repository holds MaxLocks locks.
	ErrTooManyLocks = errors.New("too many locks")
)

// Lock is a Git LFS lock on one path of the repository.
type Lock struct {
	ID   string `json:"id"`
	Path string `json:"path"`
	// Holder is who took it: a user name, or "deploy-key SHA256:…"
	// (auth.Identity.Who).
	Holder   string    `json:"holder"`
	LockedAt time.Time `json:"lockedAt"`
}

// LockedError is CreateLock's answer when the path is locked already.
type LockedError struct{ Lock Lock }

func (e *LockedError) Error() string {
	return fmt.Sprintf("%s is locked by %s", e.Lock.Path, e.Lock.Holder)
}

// SameHolder reports whether holders a and b are one caller: user names
// compare as names do (case-insensitively), deploy keys exactly.
func SameHolder(a, b string) bool {
	if names.ValidateOwner(a) == nil && names.ValidateOwner(b) == nil {
		return names.Same(a, b)
	}
	return a == b
}

// ValidateLockPath refuses paths that cannot be locked: empty, over
// MaxLockPath bytes, invalid UTF-8 or holding control characters (the SSH
// protocol carries a path on one line).
func ValidateLockPath(path string) error {
	switch {
	case path == "":
		return fmt.Errorf("%w: empty", ErrBadLockPath)
	case len(path) > MaxLockPath:
		return fmt.Errorf("%w: too long (limit %d bytes, fixed)", ErrBadLockPath, MaxLockPath)
	case !utf8.ValidString(path):
		return fmt.Errorf("%w: not UTF-8", ErrBadLockPath)
	}
	for _, c := range path {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: control character %U", ErrBadLockPath, c)
		}
	}
	return nil
}

func lockPathKey(path string) string {
	sum := sha256.Sum256([]byte(path))
	return prefixLockPath + hex.EncodeToString(sum[:])
}

// Locks returns every lock, in the order they were taken.
func (r *Repo) Locks() ([]Lock, error) {
	var locks []Lock
	for k, v := range r.db.View().Scan(prefixLock) {
		var l Lock
		if err := json.Unmarshal(v, &l); err != nil {
			return nil, fmt.Errorf("decode %s: %w", k, err)
		}
		locks = append(locks, l)
	}
	return locks, nil
}

// CreateLock locks path for holder. A path locked already is a
// *LockedError naming its lock.
func (r *Repo) CreateLock(ctx context.Context, path, holder string) (Lock, error) {
	if err := ValidateLockPath(path); err != nil {
		return Lock{}, err
	}
	view := r.db.View()
	if id, ok := view.Get(lockPathKey(path)); ok {
		l, err := r.lock(string(id))
		if err != nil {
			return Lock{}, err
		}
		return Lock{}, &LockedError{Lock: l}
	}
	n := 0
	for range view.Scan(prefixLock) {
		if n++; n >= MaxLocks {
			return Lock{}, fmt.Errorf("lock %s in %s: %w (limit %d, fixed)", path, r.name, ErrTooManyLocks, MaxLocks)
		}
	}
	now := r.d.now().UTC()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails
	l := Lock{ID: fmt.Sprintf("%016x%s", now.UnixNano(), hex.EncodeToString(rnd[:])), Path: path, Holder: holder, LockedAt: now.Truncate(time.Second)}
	b, err := json.Marshal(l)
	if err != nil {
		return Lock{}, fmt.Errorf("encode lock: %w", err)
	}
	err = r.commit(ctx, "lock "+strconv.Quote(path), refdb.Txn{
		refdb.Create(lockPathKey(path), []byte(l.ID)),
		refdb.Create(prefixLock+l.ID, b),
	})
	if errors.Is(err, refdb.ErrConflict) {
		// Another writer's lock of the path landed first.
		if id, ok := r.db.Get(lockPathKey(path)); ok {
			if other, lerr := r.lock(string(id)); lerr == nil {
				return Lock{}, &LockedError{Lock: other}
			}
		}
	}
	if err != nil {
		return Lock{}, err
	}
	return l, nil
}

// DeleteLock removes the lock id and returns it. With holder set it
// removes only a lock that holder took (ErrNotLockHolder otherwise); with
// holder "" any (an administrator's forced unlock).
func (r *Repo) DeleteLock(ctx context.Context, id, holder string) (Lock, error) {
	l, err := r.lock(id)
	if err != nil {
		return Lock{}, err
	}
	if holder != "" && !SameHolder(l.Holder, holder) {
		return l, fmt.Errorf("unlock %s: %w (%s)", l.Path, ErrNotLockHolder, l.Holder)
	}
	err = r.commit(ctx, "unlock "+strconv.Quote(l.Path), refdb.Txn{
		refdb.RemoveIf(lockPathKey(l.Path), []byte(l.ID)),
		refdb.Remove(prefixLock + l.ID),
	})
	return l, err
}

// lock reads one lock; ErrNoLock if there is none.
func (r *Repo) lock(id string) (Lock, error) {
	if id == "" || slices.Contains([]byte(id), '/') {
		return Lock{}, fmt.Errorf("lock %q: %w", id, ErrNoLock)
	}
	b, ok := r.db.Get(prefixLock + id)
	if !ok {
		return Lock{}, fmt.Errorf("lock %q: %w", id, ErrNoLock)
	}
	var l Lock
	if err := json.Unmarshal(b, &l); err != nil {
		return Lock{}, fmt.Errorf("decode lock %q: %w", id, err)
	}
	return l, nil
}
