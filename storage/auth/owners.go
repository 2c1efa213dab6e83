package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
)

// ownerPrefix holds the owner index: index/owner/{fold(owner)} → the
// owner's canonical spelling. Owner identity is case-insensitive: the
// first spelling used (add-token, add-key, create-repo, fork, or the
// start-up migration for repositories older than the index) is kept, and
// every later spelling is mapped to it, so "Alice" cannot become a second
// owner next to "alice".
const ownerPrefix = "index/owner/"

type ownerRecord struct {
	Owner string `json:"owner"`
}

// ClaimOwner returns owner's canonical spelling, recording owner as it if
// the owner is new (create-if-absent, so nodes agree).
func (st *Store) ClaimOwner(ctx context.Context, owner string) (string, error) {
	if err := names.ValidateOwner(owner); err != nil {
		return "", err
	}
	key := ownerPrefix + names.Fold(owner)
	rec, _ := json.Marshal(ownerRecord{Owner: owner}) // cannot fail: one string
	err := st.s.PutIfAbsent(ctx, key, bytes.NewReader(rec), int64(len(rec)))
	if err == nil {
		return owner, nil
	}
	if !errors.Is(err, objstore.ErrExists) {
		return "", fmt.Errorf("claim owner %s: %w", owner, err)
	}
	var old ownerRecord
	if err := st.readRecord(ctx, key, &old); err != nil {
		return "", fmt.Errorf("claim owner %s: %w", owner, err)
	}
	if !names.Same(old.Owner, owner) {
		return "", fmt.Errorf("claim owner %s: index entry names %q", owner, old.Owner)
	}
	return old.Owner, nil
}

// ErrNoUser: the name is not a user (User).
var ErrNoUser = errors.New("not a user")

// User returns the canonical spelling of user (any spelling) if it is a
// user: a name in the owner index, where ClaimOwner puts every name that
// was given a token, a key or a repository, or was made a collaborator.
// Otherwise it returns ErrNoUser. Nothing is written.
func (st *Store) User(ctx context.Context, user string) (string, error) {
	if err := names.ValidateOwner(user); err != nil {
		return "", err
	}
	var rec ownerRecord
	err := st.readRecord(ctx, ownerPrefix+names.Fold(user), &rec)
	switch {
	case errors.Is(err, ErrUnknownCredential):
		return "", fmt.Errorf("%s is %w (no token, key or repository was ever made for it)", user, ErrNoUser)
	case err != nil:
		return "", fmt.Errorf("look up user %s: %w", user, err)
	}
	return rec.Owner, nil
}
