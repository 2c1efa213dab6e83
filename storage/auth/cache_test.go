package auth

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rgit/rgit/storage/objstore"
)

// gateStore holds the first Get of key after the store has answered it
// (the record is read) until release is closed: the lookup is in flight.
type gateStore struct {
	*memStore
	key              string
	entered, release chan struct{}
	held             atomic.Bool
}

func (g *gateStore) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	rc, info, err := g.memStore.Get(ctx, key)
	if key == g.key && g.held.CompareAndSwap(false, true) {
		close(g.entered)
		<-g.release
	}
	return rc, info, err
}

// TestRevokeDuringLookup: a token revoked (a key removed) on this node
// while a lookup of it is in flight is refused by the next lookup: the
// lookup that read the record before the revocation does not put it back
// in the cache.
func TestRevokeDuringLookup(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// setup registers the credential and returns its store key, a
		// lookup and the revocation.
		setup func(t *testing.T, st *Store) (key string, lookup func() error, revoke func() error)
	}{
		{"token", func(t *testing.T, st *Store) (string, func() error, func() error) {
			tok, info, err := st.IssueToken(ctx, "alice", TokenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return tokenPrefix + hashHex(tok),
				func() error { _, err := st.TokenIdentity(ctx, tok); return err },
				func() error { _, err := st.RevokeToken(ctx, "alice", info.ID); return err }
		}},
		{"key", func(t *testing.T, st *Store) (string, func() error, func() error) {
			pub, line := newKey(t)
			fp, err := st.AddKey(ctx, "alice", line)
			if err != nil {
				t.Fatal(err)
			}
			return keyPrefix + hashHex(fp),
				func() error { _, err := st.KeyIdentity(ctx, pub); return err },
				func() error { _, err := st.RemoveKey(ctx, "alice", fp); return err }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gs := &gateStore{memStore: newMemStore(), entered: make(chan struct{}), release: make(chan struct{})}
			st := NewStore(gs)
			key, lookup, revoke := tc.setup(t, st)
			gs.key = key
			inFlight := make(chan error, 1)
			go func() { inFlight <- lookup() }()
			<-gs.entered // the record has been read; the lookup has not returned
			if err := revoke(); err != nil {
				t.Fatal(err)
			}
			close(gs.release)
			if err := <-inFlight; err != nil {
				t.Fatalf("lookup in flight: %v (it read the record before the revocation)", err)
			}
			if err := lookup(); !errors.Is(err, ErrUnknownCredential) {
				t.Fatalf("after revocation on this node: %v, want ErrUnknownCredential", err)
			}
		})
	}
}

// TestTokenFloodKeepsGoodToken: a flood of made-up rgit_ tokens, many
// times the cache's size, neither pushes out a token in use nor makes its
// next use cost a store read.
func TestTokenFloodKeepsGoodToken(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	st := NewStoreWithOptions(ms, Options{MaxEntries: 64})
	tok, err := st.CreateToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.TokenIdentity(ctx, tok); err != nil {
		t.Fatal(err)
	}
	for i := range 64 * 10 {
		junk := TokenPrefix + strings.Repeat("a", 40) + string(rune('a'+i%26)) + strings.Repeat("b", i/26)
		if _, err := st.TokenIdentity(ctx, junk); !errors.Is(err, ErrUnknownCredential) {
			t.Fatalf("made-up token %d: %v", i, err)
		}
	}
	gets := ms.getCount()
	for range 3 {
		if id, err := st.TokenIdentity(ctx, tok); err != nil || id.Owner != "alice" {
			t.Fatalf("good token after the flood: %+v %v", id, err)
		}
	}
	if n := ms.getCount() - gets; n != 0 {
		t.Fatalf("good token cost %d store reads after the flood, want 0", n)
	}
}
