// Package reqid carries a request id from the front end that received a
// request (HTTP or SSH) through forwarding to the owning node, so one
// request's log lines on every node it crossed share a "request_id"
// field. The id is made at the edge, or taken from the client's
// X-Request-Id when that is sane (a load balancer's or a caller's id then
// reaches rgit's logs), and travels between nodes in the same header.
// It imports nothing of rgit.
package reqid

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"go.uber.org/zap"
)

// Header carries the id on HTTP requests, public and peer alike; HTTP
// answers echo it.
const Header = "X-Request-Id"

// MaxLen bounds an accepted id: long enough for a UUID or a trace id,
// short enough for a log field.
const MaxLen = 64

// Valid reports whether s is an id worth keeping: 1 to MaxLen characters
// of [A-Za-z0-9._:-], so it cannot inject fields, lines or escapes into
// logs.
func Valid(s string) bool {
	if s == "" || len(s) > MaxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// New returns a fresh random id (16 hex digits).
func New() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Accept returns incoming when it is Valid, else a New id.
func Accept(incoming string) string {
	if Valid(incoming) {
		return incoming
	}
	return New()
}

type key struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// From returns the id ctx carries, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}

// Field is the log field of ctx's id ("request_id"); a no-op field when
// ctx carries none.
func Field(ctx context.Context) zap.Field {
	if id := From(ctx); id != "" {
		return zap.String("request_id", id)
	}
	return zap.Skip()
}
