package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// TokenSource resolves a token to the identity it authenticates; *Store
// implements it.
type TokenSource interface {
	TokenIdentity(ctx context.Context, token string) (Identity, error)
}

// ErrBadCredentials: an HTTP request carried credentials that name no
// valid token (unknown, revoked, expired or malformed). The client meant to
// authenticate, so it gets 401 and may retry, never a silent downgrade to
// anonymous.
var ErrBadCredentials = errors.New("invalid credentials")

// FromRequest authenticates an HTTP request, the one rule of git over
// HTTP, the read API and the web page: no Authorization header is
// anonymous; Basic (any user name, the token as password) or Bearer is the
// token's identity; anything else, or a token that is not valid, is
// ErrBadCredentials. Other errors are failed lookups (the store is down).
func FromRequest(r *http.Request, tokens TokenSource) (Identity, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Anonymous, nil
	}
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		_, token, ok = r.BasicAuth()
	}
	if !ok || token == "" {
		return Anonymous, ErrBadCredentials
	}
	id, err := tokens.TokenIdentity(r.Context(), token)
	switch {
	case errors.Is(err, ErrUnknownCredential):
		return Anonymous, fmt.Errorf("%w: %w", ErrBadCredentials, err)
	case err != nil:
		return Anonymous, fmt.Errorf("token lookup: %w", err)
	}
	return id, nil
}
