package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/ttlcache"
)

// Sentinel errors callers branch on.
var (
	// ErrUnknownCredential: the token or key is not registered. Front ends
	// treat the caller as unauthenticated (HTTP: 401).
	ErrUnknownCredential = errors.New("unknown credential")
	// ErrKeyInUse: AddKey was given a key already registered otherwise:
	// to another owner, or as another kind of key (a user key, a deploy
	// key of another repository or with other rights). One key is one
	// credential, or SSH could not tell who is calling; the error says
	// how the key is registered.
	ErrKeyInUse = errors.New("ssh key already registered")
	// ErrInvalidKey: AddKey could not parse the authorized_keys line.
	ErrInvalidKey = errors.New("invalid ssh public key")
)

// Object-store key prefixes (DESIGN.md §3).
const (
	tokenPrefix = "auth/token/"
	keyPrefix   = "auth/key/"
	// TokenPrefix starts every token rgit issues, so leaked tokens are easy
	// to recognise (secret scanners, logs).
	TokenPrefix = "rgit_"
	tokenBytes  = 32
	// maxRecord bounds what a lookup reads from the store.
	maxRecord = 64 << 10
)

var tokenEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// Store reads and writes credentials in the object store. Lookups go through
// a small in-memory cache (see Options); it is safe for concurrent use.
//
// Records are written once (create-if-absent) and deleted, never rewritten,
// so nodes never race on one: there is no second writer to fence. Two
// exceptions, neither a race: revoking a token replaces its record with a
// tombstone (every revoker writes the same), so that its holder is told
// it was revoked rather than that it is unknown; and a token's last use
// lives in its own object (see tokenUsedPrefix).
type Store struct {
	s      objstore.Store
	tokens *ttlcache.Cache[tokenRecord] // by token hash
	keys   *ttlcache.Cache[keyRecord]   // by fingerprint hash
	now    func() time.Time
	pos    time.Duration
}

// Options tunes the lookup cache. Zero values take the defaults.
type Options struct {
	// PositiveTTL is how long a successful lookup is reused (default 5s).
	// It is also how long a revoked or removed credential keeps working on
	// a node other than the one that revoked it: revocation reaches every
	// node within this bound. Expiry is checked on every use, cached or not.
	PositiveTTL time.Duration
	// NegativeTTL is how long "unknown credential" is reused (default 5s).
	// It is also how long a newly added credential may be refused on a
	// node that looked it up just before.
	NegativeTTL time.Duration
	// MaxEntries bounds the cache of found credentials (default 4096);
	// unknown ones have a list of a quarter that size, so made-up tokens
	// push out only each other, never a credential in use.
	MaxEntries int
	// Now is the clock (tests).
	Now func() time.Time
}

// DefaultPositiveTTL is how long a node reuses a credential lookup, and so
// the bound on how long a revoked credential keeps working on other nodes.
const DefaultPositiveTTL = 5 * time.Second

// NewStore returns a Store with the default cache settings.
func NewStore(s objstore.Store) *Store { return NewStoreWithOptions(s, Options{}) }

// NewStoreWithOptions returns a Store with explicit cache settings.
func NewStoreWithOptions(s objstore.Store, o Options) *Store {
	if o.PositiveTTL <= 0 {
		o.PositiveTTL = DefaultPositiveTTL
	}
	if o.NegativeTTL <= 0 {
		o.NegativeTTL = 5 * time.Second
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 4096
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{s: s, now: o.Now, pos: o.PositiveTTL,
		// While the store is unavailable nobody can add or revoke a
		// credential, and warm repositories keep serving their callers.
		tokens: ttlcache.New[tokenRecord](o.PositiveTTL, o.NegativeTTL, o.MaxEntries, o.Now).
			ServeStale(objstore.StaleWhileUnavailable, objstore.Unavailable),
		keys: ttlcache.New[keyRecord](o.PositiveTTL, o.NegativeTTL, o.MaxEntries, o.Now).
			ServeStale(objstore.StaleWhileUnavailable, objstore.Unavailable)}
}

// hashHex is hex(sha256(s)), the form credentials take in store keys.
func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// cached runs load through c. Only definite answers (a record, or
// ErrUnknownCredential) are cached; store failures are not, so an outage
// does not linger. A credential revoked or removed while its lookup was
// in flight (the Drop in RevokeToken, RemoveKey) is not cached either.
func cached[V any](c *ttlcache.Cache[V], ck string, load func() (V, error)) (V, error) {
	v, found, err := c.Load(ck, func() (V, bool, error) {
		v, err := load()
		if errors.Is(err, ErrUnknownCredential) {
			return v, false, nil
		}
		return v, err == nil, err
	})
	if err == nil && !found {
		err = ErrUnknownCredential
	}
	return v, err
}

// readRecord reads and decodes a JSON record; a missing key is
// ErrUnknownCredential.
func (st *Store) readRecord(ctx context.Context, key string, v any) error {
	rc, _, err := st.s.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return ErrUnknownCredential
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxRecord+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if len(data) > maxRecord {
		return fmt.Errorf("read %s: record larger than %d bytes", key, maxRecord)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}
