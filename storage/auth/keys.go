package auth

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
)

// ErrNoKey: RemoveKey found no key with that fingerprint for that owner.
var ErrNoKey = errors.New("no such key")

// keyRecord is the JSON value under auth/key/{hash(fingerprint)}. A
// deploy key has Repo set: it acts for no user, only on that repository
// (Owner is the repository's owner, who lists and removes it).
type keyRecord struct {
	Owner       string    `json:"owner"`
	Fingerprint string    `json:"fingerprint"`
	Key         string    `json:"key"` // the authorized_keys line as given
	Repo        string    `json:"repo,omitempty"`
	Write       bool      `json:"write,omitempty"` // deploy keys only
	CreatedBy   string    `json:"createdBy,omitempty"`
	Created     time.Time `json:"created"`
}

// Key describes a registered SSH key.
type Key struct {
	Fingerprint string `json:"fingerprint"`
	Owner       string `json:"owner"`
	Key         string `json:"key"`
	// Repo is set for deploy keys: the one repository the key works on.
	Repo      string    `json:"repo,omitempty"`
	Write     bool      `json:"write,omitempty"`
	CreatedBy string    `json:"createdBy,omitempty"`
	Created   time.Time `json:"created"`
}

func (r keyRecord) key() Key {
	return Key{Fingerprint: r.Fingerprint, Owner: r.Owner, Key: r.Key, Repo: r.Repo, Write: r.Write, CreatedBy: r.CreatedBy, Created: r.Created}
}

// describe says what kind of key k is, for messages: "a user key of
// alice", "a read-only deploy key of alice/web".
func (k Key) describe() string {
	if k.Repo == "" {
		return "a user key of " + k.Owner
	}
	if k.Write {
		return "a read-write deploy key of " + k.Repo
	}
	return "a read-only deploy key of " + k.Repo
}

// identity is the Identity a registered key authenticates.
func (r keyRecord) identity() Identity {
	if r.Repo != "" {
		return Identity{DeployKey: r.Fingerprint, Authenticated: true, Repos: []string{r.Repo}, ReadOnly: !r.Write}
	}
	return Identity{Owner: r.Owner, Authenticated: true, Key: r.Fingerprint}
}

// KeyOptions describe a key to add. The zero value is a user key.
type KeyOptions struct {
	// Repo ("owner/name", canonical spelling) makes it a deploy key of
	// that repository, read-only unless Write.
	Repo      string
	Write     bool
	CreatedBy string
}

// AddKey registers an authorized_keys line for owner and returns the key's
// SHA256:… fingerprint. owner may be spelled in any case (see
// ClaimOwner). Adding the same key again for the same owner is a no-op;
// for another owner, or as another kind of key, it fails with ErrKeyInUse.
func (st *Store) AddKey(ctx context.Context, owner string, authorizedKey []byte) (string, error) {
	k, err := st.RegisterKey(ctx, owner, authorizedKey, KeyOptions{})
	return k.Fingerprint, err
}

// RegisterKey is AddKey with options (deploy keys, audit). One key is one
// credential: adding it again with other options fails with ErrKeyInUse.
func (st *Store) RegisterKey(ctx context.Context, owner string, authorizedKey []byte, o KeyOptions) (Key, error) {
	owner, err := st.ClaimOwner(ctx, owner)
	if err != nil {
		return Key{}, fmt.Errorf("add key: %w", err)
	}
	pub, comment, options, _, err := ssh.ParseAuthorizedKey(authorizedKey)
	if err != nil {
		return Key{}, fmt.Errorf("add key: %w: %w", ErrInvalidKey, err)
	}
	if len(options) > 0 {
		// Options such as command= or from= would be silently ignored by
		// rgit; refusing them is more honest than pretending to apply them.
		return Key{}, fmt.Errorf("add key: %w: authorized_keys options are not supported", ErrInvalidKey)
	}
	fp := ssh.FingerprintSHA256(pub)
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if comment != "" {
		line += " " + comment
	}
	rec := keyRecord{Owner: owner, Fingerprint: fp, Key: line, Repo: o.Repo, Write: o.Write && o.Repo != "",
		CreatedBy: o.CreatedBy, Created: st.now().UTC()}
	b, err := json.Marshal(rec)
	if err != nil {
		return Key{}, fmt.Errorf("add key: encode: %w", err)
	}
	key := keyPrefix + hashHex(fp)
	err = st.s.PutIfAbsent(ctx, key, bytes.NewReader(b), int64(len(b)))
	if errors.Is(err, objstore.ErrExists) {
		var old keyRecord
		if rerr := st.readRecord(ctx, key, &old); rerr != nil {
			return Key{}, fmt.Errorf("add key %s: read existing: %w", fp, rerr)
		}
		if !names.Same(old.Owner, owner) || !names.Same(old.Repo, rec.Repo) || old.Write != rec.Write {
			return Key{}, fmt.Errorf("add key %s for %s: %w as %s (remove it first: remove-key %s %s)",
				fp, owner, ErrKeyInUse, old.key().describe(), old.Owner, fp)
		}
		return old.key(), nil
	}
	if err != nil {
		return Key{}, fmt.Errorf("add key %s for %s: %w", fp, owner, err)
	}
	st.keys.Drop(hashHex(fp))
	return rec.key(), nil
}

// KeyIdentity authenticates an SSH public key: the Identity it carries,
// or ErrUnknownCredential.
func (st *Store) KeyIdentity(ctx context.Context, pub ssh.PublicKey) (Identity, error) {
	if pub == nil {
		return Anonymous, ErrUnknownCredential
	}
	fp := ssh.FingerprintSHA256(pub)
	h := hashHex(fp)
	rec, err := cached(st.keys, h, func() (keyRecord, error) {
		var rec keyRecord
		if err := st.readRecord(ctx, keyPrefix+h, &rec); err != nil {
			return rec, err
		}
		stored, _, _, _, err := ssh.ParseAuthorizedKey([]byte(rec.Key))
		if err != nil {
			return rec, fmt.Errorf("lookup key %s: stored record: %w", fp, err)
		}
		// Compare the full key, not just the fingerprint the store key was
		// derived from.
		if subtle.ConstantTimeCompare(stored.Marshal(), pub.Marshal()) != 1 || rec.Owner == "" {
			return rec, ErrUnknownCredential
		}
		return rec, nil
	})
	if err != nil {
		return Anonymous, err
	}
	return rec.identity(), nil
}

// ListKeys returns the keys of owner (any spelling), deploy keys of
// owner's repositories included, oldest first. It lists every key in the
// store: an operator command, not a request path.
func (st *Store) ListKeys(ctx context.Context, owner string) ([]Key, error) {
	var out []Key
	for info, err := range st.s.List(ctx, keyPrefix, "") {
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		var rec keyRecord
		if err := st.readRecord(ctx, info.Key, &rec); errors.Is(err, ErrUnknownCredential) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		if names.Same(rec.Owner, owner) {
			out = append(out, rec.key())
		}
	}
	slices.SortFunc(out, func(a, b Key) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// RemoveKey deletes owner's key (or deploy key) with fingerprint fp and
// returns it. Other nodes stop accepting it within the positive cache TTL.
func (st *Store) RemoveKey(ctx context.Context, owner, fp string) (Key, error) {
	h := hashHex(fp)
	var rec keyRecord
	err := st.readRecord(ctx, keyPrefix+h, &rec)
	if errors.Is(err, ErrUnknownCredential) || (err == nil && !names.Same(rec.Owner, owner)) {
		return Key{}, fmt.Errorf("remove key %s of %s: %w", fp, owner, ErrNoKey)
	}
	if err != nil {
		return Key{}, fmt.Errorf("remove key %s: %w", fp, err)
	}
	if err := st.s.Delete(ctx, keyPrefix+h); err != nil {
		return Key{}, fmt.Errorf("remove key %s: %w", fp, err)
	}
	st.keys.Drop(h)
	return rec.key(), nil
}

// RemoveDeployKeys removes every deploy key of repo, for
// delete-repo: a repository created again under the name starts without
// them. It returns the keys removed.
func (st *Store) RemoveDeployKeys(ctx context.Context, repo names.Repo) ([]Key, error) {
	keys, err := st.ListKeys(ctx, repo.Owner())
	if err != nil {
		return nil, err
	}
	var removed []Key
	for _, k := range keys {
		if k.Repo == "" || !strings.EqualFold(k.Repo, repo.String()) {
			continue
		}
		if _, err := st.RemoveKey(ctx, k.Owner, k.Fingerprint); err != nil && !errors.Is(err, ErrNoKey) {
			return removed, err
		}
		removed = append(removed, k)
	}
	return removed, nil
}
