package auth

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/rgit/rgit/storage/objstore"
)

// memStore is a minimal objstore.Store for these tests; it counts Gets so
// the cache can be observed.
type memStore struct {
	mu   sync.Mutex
	m    map[string][]byte
	gets int
	fail error // returned by Get when set
}

func newMemStore() *memStore { return &memStore{m: map[string][]byte{}} }

func (s *memStore) Get(_ context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	if s.fail != nil {
		return nil, objstore.ObjectInfo{}, s.fail
	}
	b, ok := s.m[key]
	if !ok {
		return nil, objstore.ObjectInfo{}, fmt.Errorf("get %s: %w", key, objstore.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(b)), objstore.ObjectInfo{Key: key, Size: int64(len(b))}, nil
}
func (s *memStore) GetRange(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return nil, errors.New("not implemented")
}
func (s *memStore) Head(context.Context, string) (objstore.ObjectInfo, error) {
	return objstore.ObjectInfo{}, errors.New("not implemented")
}
func (s *memStore) Put(_ context.Context, key string, r io.Reader, _ int64) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.m[key] = b
	s.mu.Unlock()
	return nil
}
func (s *memStore) PutIfAbsent(_ context.Context, key string, r io.Reader, _ int64) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[key]; ok {
		return objstore.ErrExists
	}
	s.m[key] = b
	return nil
}
func (s *memStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
	return nil
}
func (s *memStore) List(_ context.Context, prefix, _ string) iter.Seq2[objstore.ObjectInfo, error] {
	var ks []string
	for _, k := range s.keys() {
		if strings.HasPrefix(k, prefix) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return func(yield func(objstore.ObjectInfo, error) bool) {
		for _, k := range ks {
			if !yield(objstore.ObjectInfo{Key: k}, nil) {
				return
			}
		}
	}
}
func (s *memStore) Copy(context.Context, string, string) error { return errors.New("not implemented") }

func (s *memStore) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ks []string
	for k := range s.m {
		ks = append(ks, k)
	}
	return ks
}

func (s *memStore) getCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestTokenRoundTrip(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	st := NewStore(ms)
	tok, err := st.CreateToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+52 {
		t.Fatalf("token %q: unexpected shape", tok)
	}
	// Stored only hashed: the raw token appears in no key and no value.
	for _, k := range ms.keys() {
		if strings.HasPrefix(k, ownerPrefix) || strings.HasPrefix(k, tokenUsedPrefix) {
			continue // the owner index and last-use stamps: no secret in them
		}
		if want := "auth/token/" + hashHex(tok); k != want {
			t.Errorf("stored key %q, want %q", k, want)
		}
		if bytes.Contains(ms.m[k], []byte(tok)) || strings.Contains(k, tok) {
			t.Errorf("raw token stored under %q", k)
		}
	}
	id, err := st.TokenIdentity(ctx, tok)
	if err != nil || id.Owner != "alice" || !id.Authenticated || id.ReadOnly {
		t.Fatalf("TokenIdentity = %+v, %v", id, err)
	}
	tok2, err := st.CreateToken(ctx, "alice")
	if err != nil || tok2 == tok {
		t.Fatalf("second token %q, %v (first %q)", tok2, err, tok)
	}
	for _, bad := range []string{"", "rgit_", tok + "x", tok[:len(tok)-1], strings.ToUpper(tok), "nope"} {
		if _, err := st.TokenIdentity(ctx, bad); !errors.Is(err, ErrUnknownCredential) {
			t.Errorf("TokenIdentity(%q) err = %v, want ErrUnknownCredential", bad, err)
		}
	}
	if _, err := st.CreateToken(ctx, "api"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("CreateToken(api) err = %v", err)
	}
	if _, err := st.RevokeToken(ctx, "alice", hashHex(tok)[:tokenIDLen]); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TokenIdentity(ctx, tok); !errors.Is(err, ErrUnknownCredential) {
		t.Errorf("after delete: %v", err)
	}
}

func TestTokenRecordHashMismatchRejected(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	st := NewStore(ms)
	tok := TokenPrefix + "abc"
	// A record under the right key whose hash field disagrees (corrupt or
	// planted) must not authenticate.
	ms.m[tokenPrefix+hashHex(tok)] = []byte(`{"owner":"alice","hash":"00"}`)
	if _, err := st.TokenIdentity(ctx, tok); !errors.Is(err, ErrUnknownCredential) {
		t.Fatalf("err = %v", err)
	}
}

func TestLookupCache(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	st := NewStoreWithOptions(ms, Options{PositiveTTL: 30 * time.Second, NegativeTTL: 5 * time.Second, Now: clk.Now})
	tok, err := st.CreateToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := st.TokenIdentity(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if g := ms.getCount(); g != 1 {
		t.Fatalf("gets after 3 positive lookups = %d, want 1", g)
	}
	// Revocation elsewhere is seen only after the positive TTL.
	ms.Delete(ctx, tokenPrefix+hashHex(tok))
	clk.Advance(29 * time.Second)
	if _, err := st.TokenIdentity(ctx, tok); err != nil {
		t.Fatalf("within TTL: %v", err)
	}
	clk.Advance(time.Second)
	if _, err := st.TokenIdentity(ctx, tok); !errors.Is(err, ErrUnknownCredential) {
		t.Fatalf("after TTL: %v", err)
	}
	g := ms.getCount()
	// Negative answers are cached for the negative TTL.
	st.TokenIdentity(ctx, tok)
	if ms.getCount() != g {
		t.Fatalf("negative answer not cached")
	}
	clk.Advance(5 * time.Second)
	st.TokenIdentity(ctx, tok)
	if ms.getCount() != g+1 {
		t.Fatalf("negative answer outlived its TTL")
	}
	// Store failures are not cached.
	ms.mu.Lock()
	ms.fail = errors.New("boom")
	ms.mu.Unlock()
	clk.Advance(time.Minute)
	if _, err := st.TokenIdentity(ctx, tok); err == nil || errors.Is(err, ErrUnknownCredential) {
		t.Fatalf("store failure surfaced as %v", err)
	}
	ms.mu.Lock()
	ms.fail = nil
	ms.mu.Unlock()
	if _, err := st.TokenIdentity(ctx, tok); !errors.Is(err, ErrUnknownCredential) {
		t.Fatalf("after outage: %v", err)
	}
}

func newKey(t *testing.T) (ssh.PublicKey, []byte) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sp, ssh.MarshalAuthorizedKey(sp)
}

func TestKeys(t *testing.T) {
	ctx := context.Background()
	ms := newMemStore()
	st := NewStore(ms)
	pub, line := newKey(t)
	withComment := append(bytes.TrimSpace(line), []byte(" alice@laptop\n")...)
	fp, err := st.AddKey(ctx, "alice", withComment)
	if err != nil {
		t.Fatal(err)
	}
	if fp != ssh.FingerprintSHA256(pub) || !strings.HasPrefix(fp, "SHA256:") {
		t.Fatalf("fingerprint %q", fp)
	}
	wantKey := "auth/key/" + hashHex(fp)
	if ks := ms.keys(); len(ks) != 2 || !slices.Contains(ks, wantKey) || !slices.Contains(ks, ownerPrefix+"alice") {
		t.Fatalf("keys %v, want [%s]", ks, wantKey)
	}
	if !bytes.Contains(ms.m[wantKey], []byte("alice@laptop")) {
		t.Errorf("authorized key line not stored: %s", ms.m[wantKey])
	}
	id, err := st.KeyIdentity(ctx, pub)
	if err != nil || id.Owner != "alice" || !id.Authenticated || id.DeployKey != "" {
		t.Fatalf("KeyIdentity = %+v, %v", id, err)
	}
	if _, err := st.AddKey(ctx, "alice", line); err != nil {
		t.Errorf("re-adding same key for same owner: %v", err)
	}
	if _, err := st.AddKey(ctx, "bob", line); !errors.Is(err, ErrKeyInUse) {
		t.Errorf("adding alice's key for bob: %v", err)
	}
	other, _ := newKey(t)
	if _, err := st.KeyIdentity(ctx, other); !errors.Is(err, ErrUnknownCredential) {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := st.KeyIdentity(ctx, nil); !errors.Is(err, ErrUnknownCredential) {
		t.Errorf("nil key: %v", err)
	}
	for _, bad := range []string{"", "ssh-ed25519 AAAA", "not a key", `command="ls" ` + string(line)} {
		if _, err := st.AddKey(ctx, "alice", []byte(bad)); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("AddKey(%q) err = %v, want ErrInvalidKey", bad, err)
		}
	}
	if _, err := st.AddKey(ctx, "a/b", line); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad owner: %v", err)
	}
}
