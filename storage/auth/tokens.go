package auth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
)

// Scope is what a token may do on the repositories its owner can reach.
type Scope string

const (
	// ScopeWrite: everything its owner's role allows (the default).
	ScopeWrite Scope = "write"
	// ScopeRead: clone and fetch only; a push gets 403.
	ScopeRead Scope = "read"
)

// ErrBadScope: a scope other than read or write.
var ErrBadScope = errors.New("scope must be read or write")

// ErrNoToken: RevokeToken found no token with that id for that owner.
var ErrNoToken = errors.New("no such token")

// TokenError says why a token that once worked authenticates nobody now:
// it expired or was revoked. It is an ErrUnknownCredential (errors.Is),
// so every caller that refuses unknown tokens refuses it; front ends may
// tell its holder why, which reveals nothing but the token's own state.
type TokenError struct {
	Revoked bool      // revoked; else expired
	At      time.Time // when it expired or was revoked
}

func (e *TokenError) Error() string {
	what := "expired"
	if e.Revoked {
		what = "was revoked"
	}
	return "token " + what + " at " + e.At.UTC().Format(time.RFC3339)
}

// Is makes errors.Is(err, ErrUnknownCredential) true.
func (e *TokenError) Is(target error) bool { return target == ErrUnknownCredential }

// tokenIDLen is how many hex digits of the token's hash form its id: enough
// to be unique among an owner's tokens, too few to help guess the secret
// (it is 48 bits of a hash of 256 random bits).
const tokenIDLen = 12

// tokenUsedPrefix holds auth/token-used/{id} → RFC 3339 time of the last
// use seen by any node. It is a hint, written by whichever node served the
// use, at most once per cache TTL per node; no decision reads it.
const tokenUsedPrefix = "auth/token-used/"

// tokenRecord is the JSON value under auth/token/{hash}. Hash repeats the
// key so the lookup can compare it in constant time (the key match the
// store does is not guaranteed to be). Records written before scopes
// existed have no Scope, which means ScopeWrite. A revoked token's record
// is a tombstone: Hash and Revoked only. It has no Owner, which is what
// nodes older than tombstones check, so they refuse it as unknown.
type tokenRecord struct {
	Owner     string    `json:"owner"`
	Hash      string    `json:"hash"`
	Name      string    `json:"name,omitempty"`
	Scope     Scope     `json:"scope,omitempty"`
	Repos     []string  `json:"repos,omitempty"`
	Expires   time.Time `json:"expires,omitzero"`
	CreatedBy string    `json:"createdBy,omitempty"`
	Created   time.Time `json:"created"`
	Revoked   time.Time `json:"revoked,omitzero"`
}

// TokenOptions describe a token to issue. The zero value is a write token
// for every repository, without expiry.
type TokenOptions struct {
	Name  string
	Scope Scope // "" means ScopeWrite
	// Repos limits the token to these repositories ("owner/name").
	Repos []string
	// Expires is when it stops working; zero: never.
	Expires time.Time
	// CreatedBy names who issued it (audit).
	CreatedBy string
}

// Token describes an issued token; the secret is never part of it.
type Token struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	Name      string    `json:"name,omitempty"`
	Scope     Scope     `json:"scope"`
	Repos     []string  `json:"repos,omitempty"`
	Expires   time.Time `json:"expires,omitzero"`
	Created   time.Time `json:"created"`
	CreatedBy string    `json:"createdBy,omitempty"`
	LastUsed  time.Time `json:"lastUsed,omitzero"`
}

func (r tokenRecord) token() Token {
	return Token{ID: r.Hash[:tokenIDLen], Owner: r.Owner, Name: r.Name, Scope: cmpScope(r.Scope), Repos: r.Repos,
		Expires: r.Expires, Created: r.Created, CreatedBy: r.CreatedBy}
}

func cmpScope(s Scope) Scope {
	if s == "" {
		return ScopeWrite
	}
	return s
}

// identity is the Identity a live record authenticates.
func (r tokenRecord) identity() Identity {
	return Identity{Owner: r.Owner, Authenticated: true, ReadOnly: cmpScope(r.Scope) == ScopeRead, Repos: r.Repos, TokenID: r.Hash[:min(tokenIDLen, len(r.Hash))]}
}

// CreateToken issues a write token for every repository of owner, without
// expiry (IssueToken with zero options).
func (st *Store) CreateToken(ctx context.Context, owner string) (string, error) {
	secret, _, err := st.IssueToken(ctx, owner, TokenOptions{})
	return secret, err
}

// IssueToken issues a new token for owner (in any spelling: the token
// belongs to the owner's canonical spelling, see ClaimOwner). The secret is
// returned once; only its SHA-256 is stored.
func (st *Store) IssueToken(ctx context.Context, owner string, o TokenOptions) (string, Token, error) {
	o.Scope = cmpScope(o.Scope)
	if o.Scope != ScopeRead && o.Scope != ScopeWrite {
		return "", Token{}, fmt.Errorf("create token: %w, not %q", ErrBadScope, o.Scope)
	}
	for _, r := range o.Repos {
		if _, err := names.Parse(r); err != nil {
			return "", Token{}, fmt.Errorf("create token: repository %q: %w", r, err)
		}
	}
	if len(o.Name) > 100 || strings.ContainsAny(o.Name, "\n\r\x00") {
		return "", Token{}, fmt.Errorf("create token: name must be one line of at most 100 bytes")
	}
	owner, err := st.ClaimOwner(ctx, owner)
	if err != nil {
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	var raw [tokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Token{}, fmt.Errorf("create token: random: %w", err)
	}
	secret := TokenPrefix + strings.ToLower(tokenEncoding.EncodeToString(raw[:]))
	h := hashHex(secret)
	rec := tokenRecord{Owner: owner, Hash: h, Name: o.Name, Scope: o.Scope, Repos: o.Repos,
		Expires: o.Expires.UTC(), CreatedBy: o.CreatedBy, Created: st.now().UTC()}
	b, err := json.Marshal(rec)
	if err != nil {
		return "", Token{}, fmt.Errorf("create token: encode: %w", err)
	}
	// PutIfAbsent: a 256-bit collision is not a real risk, but overwriting
	// another owner's token record must be impossible by construction.
	if err := st.s.PutIfAbsent(ctx, tokenPrefix+h, bytes.NewReader(b), int64(len(b))); err != nil {
		return "", Token{}, fmt.Errorf("create token for %s: %w", owner, err)
	}
	st.tokens.Drop(h)
	return secret, rec.token(), nil
}

// TokenIdentity authenticates a token: the Identity it carries, a
// *TokenError if it expired or was revoked, or ErrUnknownCredential if it
// is not registered (both errors.Is ErrUnknownCredential).
func (st *Store) TokenIdentity(ctx context.Context, token string) (Identity, error) {
	// Reject obvious garbage before touching the store; the length check
	// also bounds what gets hashed and cached.
	if !strings.HasPrefix(token, TokenPrefix) || len(token) > 256 {
		return Anonymous, ErrUnknownCredential
	}
	h := hashHex(token)
	// A tombstone is cached like a live record: it is as definite an
	// answer, and keeps the reason.
	rec, err := cached(st.tokens, h, func() (tokenRecord, error) {
		var rec tokenRecord
		if err := st.readRecord(ctx, tokenPrefix+h, &rec); err != nil {
			return rec, err
		}
		if subtle.ConstantTimeCompare([]byte(rec.Hash), []byte(h)) != 1 || (rec.Owner == "" && rec.Revoked.IsZero()) {
			return rec, ErrUnknownCredential
		}
		if rec.Revoked.IsZero() {
			// Once per cache lifetime per node: a best-effort hint for
			// list-tokens, so its failure does not refuse the caller.
			stamp := []byte(st.now().UTC().Format(time.RFC3339))
			_ = st.s.Put(ctx, tokenUsedPrefix+h[:tokenIDLen], bytes.NewReader(stamp), int64(len(stamp)))
		}
		return rec, nil
	})
	switch {
	case err != nil:
		return Anonymous, err
	case !rec.Revoked.IsZero():
		return Anonymous, &TokenError{Revoked: true, At: rec.Revoked}
	case !rec.Expires.IsZero() && !st.now().Before(rec.Expires):
		// Expiry is checked on every use, so a cached token stops at once.
		return Anonymous, &TokenError{At: rec.Expires}
	}
	return rec.identity(), nil
}

// ListTokens returns owner's tokens (any spelling), oldest first. It lists
// every token in the store: an operator command, not a request path.
func (st *Store) ListTokens(ctx context.Context, owner string) ([]Token, error) {
	var out []Token
	for info, err := range st.s.List(ctx, tokenPrefix, "") {
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		var rec tokenRecord
		if err := st.readRecord(ctx, info.Key, &rec); errors.Is(err, ErrUnknownCredential) {
			continue // gone meanwhile
		} else if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		if rec.Owner == "" || !names.Same(rec.Owner, owner) || len(rec.Hash) < tokenIDLen {
			continue
		}
		t := rec.token()
		t.LastUsed = st.lastUsed(ctx, t.ID)
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Token) int { return a.Created.Compare(b.Created) })
	return out, nil
}

func (st *Store) lastUsed(ctx context.Context, id string) time.Time {
	rc, _, err := st.s.Get(ctx, tokenUsedPrefix+id)
	if err != nil {
		return time.Time{}
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 64))
	t, _ := time.Parse(time.RFC3339, string(b))
	return t
}

// RevokeToken revokes owner's token id and returns what it was: its
// record becomes a tombstone, so whoever still uses it is told it was
// revoked. The node running it forgets the token at once; every other node
// within the positive cache TTL (Options.PositiveTTL).
func (st *Store) RevokeToken(ctx context.Context, owner, id string) (Token, error) {
	if len(id) != tokenIDLen || strings.Trim(id, "0123456789abcdef") != "" {
		return Token{}, fmt.Errorf("revoke token %q: %w (ids are %d hex digits, see list-tokens)", id, ErrNoToken, tokenIDLen)
	}
	for info, err := range st.s.List(ctx, tokenPrefix+id, "") {
		if err != nil {
			return Token{}, fmt.Errorf("revoke token %s: %w", id, err)
		}
		var rec tokenRecord
		if err := st.readRecord(ctx, info.Key, &rec); err != nil {
			continue
		}
		if rec.Owner == "" || !names.Same(rec.Owner, owner) {
			continue // a tombstone, or another owner's
		}
		tomb, err := json.Marshal(tokenRecord{Hash: rec.Hash, Revoked: st.now().UTC()})
		if err != nil {
			return Token{}, fmt.Errorf("revoke token %s: encode: %w", id, err)
		}
		if err := st.s.Put(ctx, info.Key, bytes.NewReader(tomb), int64(len(tomb))); err != nil {
			return Token{}, fmt.Errorf("revoke token %s: %w", id, err)
		}
		if err := st.s.Delete(ctx, tokenUsedPrefix+id); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return Token{}, fmt.Errorf("revoke token %s: last-used stamp: %w", id, err)
		}
		st.tokens.Drop(rec.Hash)
		return rec.token(), nil
	}
	return Token{}, fmt.Errorf("revoke token %s of %s: %w", id, owner, ErrNoToken)
}
