package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"

	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/transport/gitserve"
)

// Typed messages between nodes. A message is a Go value of a type both
// nodes know (the leader's messages are cluster.ClaimLease and its kin, the
// same values the leader actor receives in process); it crosses the peer
// stream port in one envelope, and its reply comes back as the handler's
// typed result:
//
//	POST /peer/v1/msg  Authorization: Bearer <secret>
//	{"type": "cluster.ClaimLease", "hop": 0, "msg": {...}}
//	← 200 {"reply": {...}}
//	← 503 {"error": "..."}                  the receiver could not answer
//	← 400 {"error": "...", "refused": true} malformed, unknown type, hop limit
//
// Git session bytes never travel this way (see SessionForwarder).

// PathMsg is the path of the envelope on the peer stream port.
const PathMsg = "/peer/v1/msg"

// maxMessage bounds an envelope or its answer (a renewal lists every
// repository a node holds: tens of thousands of names at most).
const maxMessage = 8 << 20

type envelope struct {
	Type string          `json:"type"`
	Hop  int             `json:"hop"`
	Msg  json.RawMessage `json:"msg"`
}

type answer struct {
	Reply   json.RawMessage `json:"reply,omitempty"`
	Error   string          `json:"error,omitempty"`
	Refused bool            `json:"refused,omitempty"`
}

// typeName is a message's name on the wire: its Go type, package-qualified.
func typeName(t reflect.Type) string { return t.String() }

// RefusedError is a message the receiving node refused as such (malformed,
// of a type it does not handle, over the hop limit, or invalid for its
// handler), as opposed to one it could not answer now. Sending it again
// does not help.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return "message refused: " + e.Msg }

// ErrInvalid is wrapped by a handler's error for a message that can never
// succeed (a bad repository name): the sender gets a *RefusedError.
var ErrInvalid = errors.New("invalid message")

// Handlers routes each message type to its handler. Register handlers
// with Handle before serving.
type Handlers struct {
	log *zap.Logger
	m   map[string]func(ctx context.Context, msg json.RawMessage) (any, error)
}

// NewHandlers returns an empty router.
func NewHandlers(log *zap.Logger) *Handlers {
	return &Handlers{log: orNop(log), m: map[string]func(context.Context, json.RawMessage) (any, error){}}
}

// Handle registers fn as the handler of messages of type M.
func Handle[M, R any](h *Handlers, fn func(ctx context.Context, m M) (R, error)) {
	h.m[typeName(reflect.TypeFor[M]())] = func(ctx context.Context, raw json.RawMessage) (any, error) {
		var m M
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return fn(ctx, m)
	}
}

// HandleLeader registers the leader's messages, answered by leader() on
// the leader node; elsewhere leader returns nil and the messages are
// answered 503 (the sender's directory is wrong, or the leader restarts).
func HandleLeader(h *Handlers, leader func() cluster.LeaderService) {
	errNotLeader := errors.New("this node is not the ownership leader")
	Handle(h, func(ctx context.Context, m cluster.ClaimLease) (cluster.Decision, error) {
		if l := leader(); l != nil {
			return l.Claim(ctx, m)
		}
		return cluster.Decision{}, errNotLeader
	})
	Handle(h, func(ctx context.Context, m cluster.RenewLeases) (cluster.LeasesRenewed, error) {
		if l := leader(); l != nil {
			return l.Renew(ctx, m)
		}
		return cluster.LeasesRenewed{}, errNotLeader
	})
	Handle(h, func(ctx context.Context, m cluster.ReleaseLease) (cluster.Decision, error) {
		if l := leader(); l != nil {
			return l.Release(ctx, m)
		}
		return cluster.Decision{}, errNotLeader
	})
	Handle(h, func(ctx context.Context, m cluster.ForceGrantLease) (cluster.Decision, error) {
		if l := leader(); l != nil {
			return l.ForceGrant(ctx, m)
		}
		return cluster.Decision{}, errNotLeader
	})
}

// ServeHTTP answers one envelope. Mount it behind RequireBearer.
func (h *Handlers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var e envelope
	if err := json.NewDecoder(io.LimitReader(r.Body, maxMessage)).Decode(&e); err != nil {
		reply(w, http.StatusBadRequest, answer{Error: "bad envelope: " + err.Error(), Refused: true})
		return
	}
	fn, ok := h.m[e.Type]
	switch {
	case !ok:
		reply(w, http.StatusBadRequest, answer{Error: fmt.Sprintf("unknown message type %q", e.Type), Refused: true})
		return
	case e.Hop < 0 || e.Hop > gitserve.MaxHops:
		reply(w, http.StatusBadRequest, answer{Error: fmt.Sprintf("hop %d outside 0..%d", e.Hop, gitserve.MaxHops), Refused: true})
		return
	}
	out, err := fn(r.Context(), e.Msg)
	switch {
	case errors.Is(err, ErrInvalid) || errors.Is(err, cluster.ErrInvalidName):
		reply(w, http.StatusBadRequest, answer{Error: err.Error(), Refused: true})
		return
	case err != nil:
		h.log.Warn("peer message failed", zap.String("type", e.Type), zap.Error(err))
		reply(w, http.StatusServiceUnavailable, answer{Error: err.Error()})
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		reply(w, http.StatusInternalServerError, answer{Error: "encode reply: " + err.Error()})
		return
	}
	reply(w, http.StatusOK, answer{Reply: b})
}

func reply(w http.ResponseWriter, code int, a answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(a)
}

// Send delivers m to the node whose peer stream port is at base
// (http://host:port, or https:// with peer TLS) and decodes
// its reply into out (a pointer to the handler's result type). A message
// the node refused is a *RefusedError; any other failure (no connection,
// a 503) is returned wrapped with its cause.
func Send[M any](ctx context.Context, hc *http.Client, base, secret string, hop int, m M, out any) error {
	msg, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %T: %w", m, err)
	}
	body, err := json.Marshal(envelope{Type: typeName(reflect.TypeFor[M]()), Hop: hop, Msg: msg})
	if err != nil {
		return fmt.Errorf("encode envelope: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+PathMsg, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxMessage))
	if err != nil {
		return fmt.Errorf("%T to %s: read answer: %w", m, base, err)
	}
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		// Not an envelope's answer: the secret check (401) or a proxy.
		msg := fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(raw[:min(len(raw), 512)]))
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return &RefusedError{Msg: msg}
		}
		return fmt.Errorf("%T to %s: %s", m, base, msg)
	}
	switch {
	case a.Refused:
		return &RefusedError{Msg: a.Error}
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%T to %s: %s: %s", m, base, resp.Status, a.Error)
	}
	if err := json.Unmarshal(a.Reply, out); err != nil {
		return fmt.Errorf("%T to %s: bad reply: %w", m, base, err)
	}
	return nil
}
