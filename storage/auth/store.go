package auth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/ttlcache"
)

// Sentinel errors callers branch on.
var (
	// ErrUnknownCredential: the token or key is not registered. Front ends
	// treat the caller as unauthenticated (HTTP: 401).
	ErrUnknownCredential = errors.New("unknown credential")
	// ErrKeyInUse: AddKey was given a key already registered to another
	// owner. One key maps to one owner, or SSH could not tell who is calling.
	ErrKeyInUse = errors.New("ssh key already registered to another owner")
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

// tokenRecord is the JSON value under auth/token/{hash}. Hash repeats the
// key so the lookup can compare it in constant time (the key match the
// store does is not guaranteed to be).
type tokenRecord struct {
	Owner   string    `json:"owner"`
	Hash    string    `json:"hash"`
	Created time.Time `json:"created"`
}

// keyRecord is the JSON value under auth/key/{hash(fingerprint)}.
type keyRecord struct {
	Owner       string    `json:"owner"`
	Fingerprint string    `json:"fingerprint"`
	Key         string    `json:"key"` // the authorized_keys line as given
	Created     time.Time `json:"created"`
}

// Store reads and writes credentials in the object store. Lookups go through
// a small in-memory cache (see Options); it is safe for concurrent use.
type Store struct {
	s     objstore.Store
	cache *ttlcache.Cache[string] // token/key hash → owner
	now   func() time.Time
}

// Options tunes the lookup cache. Zero values take the defaults.
type Options struct {
	// PositiveTTL is how long a successful lookup is reused (default 30s).
	// It is also how long a deleted credential keeps working on a node.
	PositiveTTL time.Duration
	// NegativeTTL is how long "unknown credential" is reused (default 5s).
	// It is also how long a newly added credential may be refused on a
	// node that looked it up just before.
	NegativeTTL time.Duration
	// MaxEntries bounds the cache (default 4096).
	MaxEntries int
	// Now is the clock (tests).
	Now func() time.Time
}

// NewStore returns a Store with the default cache settings.
func NewStore(s objstore.Store) *Store { return NewStoreWithOptions(s, Options{}) }

// NewStoreWithOptions returns a Store with explicit cache settings.
func NewStoreWithOptions(s objstore.Store, o Options) *Store {
	if o.PositiveTTL <= 0 {
		o.PositiveTTL = 30 * time.Second
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
	return &Store{s: s, cache: ttlcache.New[string](o.PositiveTTL, o.NegativeTTL, o.MaxEntries, o.Now), now: o.Now}
}

// hashHex is hex(sha256(s)), the form credentials take in store keys.
func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// CreateToken issues a new token for owner (in any spelling: the token
// belongs to the owner's canonical spelling, see ClaimOwner). The token is
// returned once; only its SHA-256 is stored.
func (st *Store) CreateToken(ctx context.Context, owner string) (string, error) {
	owner, err := st.ClaimOwner(ctx, owner)
	if err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	var raw [tokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("create token: random: %w", err)
	}
	token := TokenPrefix + strings.ToLower(tokenEncoding.EncodeToString(raw[:]))
	h := hashHex(token)
	rec, err := json.Marshal(tokenRecord{Owner: owner, Hash: h, Created: st.now().UTC()})
	if err != nil {
		return "", fmt.Errorf("create token: encode: %w", err)
	}
	// PutIfAbsent: a 256-bit collision is not a real risk, but overwriting
	// another owner's token record must be impossible by construction.
	if err := st.s.PutIfAbsent(ctx, tokenPrefix+h, bytes.NewReader(rec), int64(len(rec))); err != nil {
		return "", fmt.Errorf("create token for %s: %w", owner, err)
	}
	st.cache.Drop("t" + h)
	return token, nil
}

// LookupToken returns the owner of token, or ErrUnknownCredential.
func (st *Store) LookupToken(ctx context.Context, token string) (string, error) {
	// Reject obvious garbage before touching the store; the length check
	// also bounds what gets hashed and cached.
	if !strings.HasPrefix(token, TokenPrefix) || len(token) > 256 {
		return "", ErrUnknownCredential
	}
	h := hashHex(token)
	return st.cached(ctx, "t"+h, func() (string, error) {
		var rec tokenRecord
		if err := st.readRecord(ctx, tokenPrefix+h, &rec); err != nil {
			return "", err
		}
		if subtle.ConstantTimeCompare([]byte(rec.Hash), []byte(h)) != 1 || rec.Owner == "" {
			return "", ErrUnknownCredential
		}
		return rec.Owner, nil
	})
}

// DeleteToken revokes token. Other nodes may accept it for up to the
// positive cache TTL.
func (st *Store) DeleteToken(ctx context.Context, token string) error {
	h := hashHex(token)
	if err := st.s.Delete(ctx, tokenPrefix+h); err != nil {
		return fmt.Errorf("delete token: %w", err)
	}
	st.cache.Drop("t" + h)
	return nil
}

// AddKey registers an authorized_keys line for owner and returns the key's
// SHA256:… fingerprint. owner may be spelled in any case (see
// ClaimOwner). Adding the same key again for the same owner is a no-op;
// for another owner it fails with ErrKeyInUse.
func (st *Store) AddKey(ctx context.Context, owner string, authorizedKey []byte) (string, error) {
	owner, err := st.ClaimOwner(ctx, owner)
	if err != nil {
		return "", fmt.Errorf("add key: %w", err)
	}
	pub, comment, options, _, err := ssh.ParseAuthorizedKey(authorizedKey)
	if err != nil {
		return "", fmt.Errorf("add key: %w: %w", ErrInvalidKey, err)
	}
	if len(options) > 0 {
		// Options such as command= or from= would be silently ignored by
		// rgit; refusing them is more honest than pretending to apply them.
		return "", fmt.Errorf("add key: %w: authorized_keys options are not supported", ErrInvalidKey)
	}
	fp := ssh.FingerprintSHA256(pub)
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if comment != "" {
		line += " " + comment
	}
	rec, err := json.Marshal(keyRecord{Owner: owner, Fingerprint: fp, Key: line, Created: st.now().UTC()})
	if err != nil {
		return "", fmt.Errorf("add key: encode: %w", err)
	}
	key := keyPrefix + hashHex(fp)
	err = st.s.PutIfAbsent(ctx, key, bytes.NewReader(rec), int64(len(rec)))
	if errors.Is(err, objstore.ErrExists) {
		var old keyRecord
		if rerr := st.readRecord(ctx, key, &old); rerr != nil {
			return "", fmt.Errorf("add key %s: read existing: %w", fp, rerr)
		}
		if !names.Same(old.Owner, owner) {
			return "", fmt.Errorf("add key %s for %s: %w", fp, owner, ErrKeyInUse)
		}
		return fp, nil
	}
	if err != nil {
		return "", fmt.Errorf("add key %s for %s: %w", fp, owner, err)
	}
	st.cache.Drop("k" + hashHex(fp))
	return fp, nil
}

// LookupKey returns the owner of pub, or ErrUnknownCredential.
func (st *Store) LookupKey(ctx context.Context, pub ssh.PublicKey) (string, error) {
	if pub == nil {
		return "", ErrUnknownCredential
	}
	fp := ssh.FingerprintSHA256(pub)
	h := hashHex(fp)
	return st.cached(ctx, "k"+h, func() (string, error) {
		var rec keyRecord
		if err := st.readRecord(ctx, keyPrefix+h, &rec); err != nil {
			return "", err
		}
		stored, _, _, _, err := ssh.ParseAuthorizedKey([]byte(rec.Key))
		if err != nil {
			return "", fmt.Errorf("lookup key %s: stored record: %w", fp, err)
		}
		// Compare the full key, not just the fingerprint the store key was
		// derived from.
		if subtle.ConstantTimeCompare(stored.Marshal(), pub.Marshal()) != 1 || rec.Owner == "" {
			return "", ErrUnknownCredential
		}
		return rec.Owner, nil
	})
}

// cached runs load through the cache. Only definite answers (an owner, or
// ErrUnknownCredential) are cached; store failures are not, so an outage
// does not linger.
func (st *Store) cached(ctx context.Context, ck string, load func() (string, error)) (string, error) {
	if owner, known, ok := st.cache.Get(ck); ok {
		if !known {
			return "", ErrUnknownCredential
		}
		return owner, nil
	}
	owner, err := load()
	switch {
	case err == nil:
		st.cache.Put(ck, owner, true)
	case errors.Is(err, ErrUnknownCredential):
		st.cache.Put(ck, "", false)
	}
	return owner, err
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
