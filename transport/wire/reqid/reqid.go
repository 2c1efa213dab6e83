// Package reqid carries a request id from the front end that received a
// request (HTTP or SSH) through forwarding to the owning node, so one
// request's log lines on every node it crossed share a "request_id"
// field.
//
// The id is always made by the node at the edge: a client must not be
// able to file its requests under another request's id. A sane
// X-Request-Id the client sent (a load balancer's or a caller's) is kept
// beside it as "client_request_id", so it still reaches rgit's logs. Both
// travel between nodes in headers the peer ports trust (the peer secret
// authenticates the sender). It imports nothing of rgit but zap.
package reqid

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Header carries the id on HTTP requests, public and peer alike; HTTP
// answers carry the node's id in it. On a public port its value is the
// client's (see Edge).
const Header = "X-Request-Id"

// ClientHeader carries the client's own id between nodes, beside Header.
// It is an X-Rgit- header: public front ends drop those, so only a peer
// sets it.
const ClientHeader = "X-Rgit-Client-Request-Id"

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

// Accept returns incoming when it is Valid, else a New id: for ids a
// trusted sender (a peer) made.
func Accept(incoming string) string {
	if Valid(incoming) {
		return incoming
	}
	return New()
}

// Edge returns the ids of a request a client sent to a public port: a New
// id, and the client's own X-Request-Id when it is Valid ("" otherwise).
func Edge(incoming string) (id, client string) {
	if Valid(incoming) {
		client = incoming
	}
	return New(), client
}

// ids is what a context carries.
type ids struct{ id, client string }

func (v ids) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("request_id", v.id)
	if v.client != "" {
		enc.AddString("client_request_id", v.client)
	}
	return nil
}

type key struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context {
	return WithClient(ctx, id, "")
}

// WithClient returns ctx carrying id and the client's own id ("": none).
func WithClient(ctx context.Context, id, client string) context.Context {
	return context.WithValue(ctx, key{}, ids{id: id, client: client})
}

// From returns the id ctx carries, or "".
func From(ctx context.Context) string {
	v, _ := ctx.Value(key{}).(ids)
	return v.id
}

// ClientFrom returns the client's id ctx carries, or "".
func ClientFrom(ctx context.Context) string {
	v, _ := ctx.Value(key{}).(ids)
	return v.client
}

// Field is the log fields of ctx's ids ("request_id", and
// "client_request_id" when the client sent one); a no-op field when ctx
// carries none.
func Field(ctx context.Context) zap.Field {
	if v, _ := ctx.Value(key{}).(ids); v.id != "" {
		return zap.Inline(v)
	}
	return zap.Skip()
}
