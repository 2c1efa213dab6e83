package auth

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTokenScopesAndListing issues tokens with every option and checks the
// identity each authenticates and what list-tokens shows (never the
// secret).
func TestTokenScopesAndListing(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	st := NewStoreWithOptions(ms, Options{Now: clk.Now})
	rd, rt, err := st.IssueToken(ctx, "alice", TokenOptions{Name: "ci", Scope: ScopeRead, Repos: []string{"alice/r"}, CreatedBy: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	wr, _, err := st.IssueToken(ctx, "Alice", TokenOptions{Expires: clk.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.IssueToken(ctx, "bob", TokenOptions{}); err != nil {
		t.Fatal(err)
	}
	id, err := st.TokenIdentity(ctx, rd)
	if err != nil || !id.ReadOnly || !slices.Equal(id.Repos, []string{"alice/r"}) || id.Owner != "alice" {
		t.Fatalf("read token identity %+v, %v", id, err)
	}
	id, err = st.TokenIdentity(ctx, wr)
	if err != nil || id.ReadOnly || len(id.Repos) != 0 || id.Owner != "alice" {
		t.Fatalf("write token identity %+v, %v", id, err)
	}
	list, err := st.ListTokens(ctx, "ALICE")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != rt.ID || list[0].Name != "ci" || list[0].Scope != ScopeRead ||
		list[0].CreatedBy != "operator" || !list[0].Created.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) ||
		list[1].Scope != ScopeWrite || list[1].Expires.IsZero() {
		t.Fatalf("list-tokens = %+v", list)
	}
	if list[0].LastUsed.IsZero() {
		t.Errorf("last use not recorded: %+v", list[0])
	}
	for _, bad := range []TokenOptions{{Scope: "admin"}, {Repos: []string{"noslash"}}, {Name: "a\nb"}} {
		if _, _, err := st.IssueToken(ctx, "alice", bad); err == nil {
			t.Errorf("IssueToken(%+v) accepted", bad)
		}
	}
	if _, err := st.RevokeToken(ctx, "bob", rt.ID); !errors.Is(err, ErrNoToken) {
		t.Fatalf("bob revoked alice's token: %v", err)
	}
}

// TestRevokeAndExpiryWhileCached: two nodes share a store; node B has the
// token cached when node A revokes it. B stops accepting it once its
// positive TTL (DefaultPositiveTTL) has passed; A at once. Expiry needs no
// TTL: a cached token stops at its expiry.
func TestRevokeAndExpiryWhileCached(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	a := NewStoreWithOptions(ms, Options{Now: clk.Now})
	b := NewStoreWithOptions(ms, Options{Now: clk.Now})
	tok, info, err := a.IssueToken(ctx, "alice", TokenOptions{Expires: clk.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	short, _, err := a.IssueToken(ctx, "alice", TokenOptions{Expires: clk.Now().Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{a, b} {
		for _, tk := range []string{tok, short} {
			if _, err := s.TokenIdentity(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
	}
	gets := ms.getCount()
	clk.Advance(2 * time.Second)
	if _, err := b.TokenIdentity(ctx, short); !errors.Is(err, ErrUnknownCredential) {
		t.Fatalf("expired token accepted from cache: %v", err)
	}
	if ms.getCount() != gets {
		t.Fatalf("expiry needed a store read")
	}
	if _, err := a.RevokeToken(ctx, "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.TokenIdentity(ctx, tok); !errors.Is(err, ErrUnknownCredential) {
		t.Fatalf("revoking node still accepts: %v", err)
	}
	if _, err := b.TokenIdentity(ctx, tok); err != nil {
		t.Fatalf("other node within TTL: %v (the bound is the TTL, not zero)", err)
	}
	clk.Advance(DefaultPositiveTTL - 2*time.Second)
	if _, err := b.TokenIdentity(ctx, tok); !errors.Is(err, ErrUnknownCredential) {
		t.Fatalf("other node after %v: %v", DefaultPositiveTTL, err)
	}
}

func TestDeployKeysAndKeyListing(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	st := NewStore(ms)
	userPub, userLine := newKey(t)
	depPub, depLine := newKey(t)
	if _, err := st.RegisterKey(ctx, "alice", userLine, KeyOptions{CreatedBy: "op"}); err != nil {
		t.Fatal(err)
	}
	dk, err := st.RegisterKey(ctx, "alice", depLine, KeyOptions{Repo: "alice/r", CreatedBy: "op"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.KeyIdentity(ctx, depPub)
	if err != nil || id.Owner != "" || id.DeployKey != dk.Fingerprint || !id.ReadOnly || !slices.Equal(id.Repos, []string{"alice/r"}) {
		t.Fatalf("deploy key identity %+v, %v", id, err)
	}
	// The same key again with other rights is another credential: refused.
	if _, err := st.RegisterKey(ctx, "alice", depLine, KeyOptions{Repo: "alice/r", Write: true}); !errors.Is(err, ErrKeyInUse) {
		t.Fatalf("re-adding with write: %v", err)
	}
	keys, err := st.ListKeys(ctx, "Alice")
	if err != nil || len(keys) != 2 {
		t.Fatalf("ListKeys = %+v, %v", keys, err)
	}
	if _, err := st.RemoveKey(ctx, "bob", dk.Fingerprint); !errors.Is(err, ErrNoKey) {
		t.Fatalf("bob removed alice's key: %v", err)
	}
	for _, k := range keys {
		if _, err := st.RemoveKey(ctx, "alice", k.Fingerprint); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.KeyIdentity(ctx, userPub); !errors.Is(err, ErrUnknownCredential) {
		t.Fatalf("removed key still works on the removing node: %v", err)
	}
}

// TestTokenErrorsSayWhy: a token that expired or was revoked is refused
// with a *TokenError saying which and when (still an
// ErrUnknownCredential), on the revoking node at once and on another once
// its cache entry lapses; a token never issued is plainly unknown. The
// revoked token's tombstone names no owner and is in no listing.
func TestTokenErrorsSayWhy(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	a := NewStoreWithOptions(ms, Options{Now: clk.Now})
	b := NewStoreWithOptions(ms, Options{Now: clk.Now})
	exp := clk.Now().Add(time.Hour)
	expiring, _, err := a.IssueToken(ctx, "alice", TokenOptions{Expires: exp})
	if err != nil {
		t.Fatal(err)
	}
	revoked, info, err := a.IssueToken(ctx, "alice", TokenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TokenIdentity(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	var te *TokenError
	if _, err := a.TokenIdentity(ctx, expiring); !errors.As(err, &te) || te.Revoked || !te.At.Equal(exp) ||
		!errors.Is(err, ErrUnknownCredential) || err.Error() != "token expired at 2026-01-02T04:04:05Z" {
		t.Fatalf("expired token: %v (%+v)", err, te)
	}
	revokedAt := clk.Now()
	if _, err := a.RevokeToken(ctx, "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	clk.Advance(DefaultPositiveTTL)
	for name, s := range map[string]*Store{"revoking node": a, "other node": b} {
		te = nil
		if _, err := s.TokenIdentity(ctx, revoked); !errors.As(err, &te) || !te.Revoked || !te.At.Equal(revokedAt) ||
			!errors.Is(err, ErrUnknownCredential) || err.Error() != "token was revoked at 2026-01-02T04:04:05Z" {
			t.Errorf("%s: revoked token: %v", name, err)
		}
	}
	if _, err := a.TokenIdentity(ctx, TokenPrefix+strings.Repeat("a", 52)); !errors.Is(err, ErrUnknownCredential) || errors.As(err, &te) {
		t.Errorf("never-issued token: %v, want a plain ErrUnknownCredential", err)
	}
	if list, err := a.ListTokens(ctx, "alice"); err != nil || len(list) != 1 || list[0].ID == info.ID {
		t.Errorf("list-tokens after revoke: %+v, %v", list, err)
	}
	if _, err := a.RevokeToken(ctx, "alice", info.ID); !errors.Is(err, ErrNoToken) {
		t.Errorf("revoking twice: %v, want ErrNoToken", err)
	}
	if bytes.Contains(ms.m[tokenPrefix+hashHex(revoked)], []byte("alice")) {
		t.Errorf("tombstone names the owner: %s", ms.m[tokenPrefix+hashHex(revoked)])
	}
}

// TestKeyInUseSaysHow: a key registered one way and added another way is
// refused with what it is registered as, also for its own owner.
func TestKeyInUseSaysHow(t *testing.T) {
	ctx := context.Background()
	st := NewStore(newMemStore())
	_, line := newKey(t)
	if _, err := st.RegisterKey(ctx, "alice", line, KeyOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		owner string
		o     KeyOptions
	}{
		{"alice", KeyOptions{Repo: "alice/web"}},
		{"bob", KeyOptions{}},
	}
	for _, c := range cases {
		_, err := st.RegisterKey(ctx, c.owner, line, c.o)
		if !errors.Is(err, ErrKeyInUse) || !strings.Contains(err.Error(), "already registered as a user key of alice") ||
			strings.Contains(err.Error(), "another owner") {
			t.Errorf("%s %+v: %v", c.owner, c.o, err)
		}
	}
}

// TestUser: a user is a name the owner index holds; looking one up
// writes nothing.
func TestUser(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	st := NewStore(ms)
	if _, err := st.User(ctx, "carol"); !errors.Is(err, ErrNoUser) {
		t.Fatalf("unknown user: %v", err)
	}
	if len(ms.keys()) != 0 {
		t.Fatalf("User wrote %v", ms.keys())
	}
	if _, err := st.CreateToken(ctx, "Carol"); err != nil {
		t.Fatal(err)
	}
	if u, err := st.User(ctx, "CAROL"); err != nil || u != "Carol" {
		t.Fatalf("User = %q, %v; want the canonical Carol", u, err)
	}
	if _, err := st.User(ctx, "a/b"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("bad name: %v", err)
	}
}
