package peer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync"

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
//	← 422 {"error": "...", "code": "..."}   the handler failed, classified
//
// A message registered with HandleStream (an admin command: a repack runs
// for minutes) is answered as a stream instead: 200 and
// application/x-ndjson, any number of {"progress": "..."} lines, then
// exactly one of the answers above as the last line. Progress is text for
// a person; the reply stays one typed value. The receiver's hop count is
// in the handler's context (gitserve.Hops), so a handler that passes the
// message on to another node sends it with the next hop.
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
	Progress string          `json:"progress,omitempty"` // streamed answers only
	Reply    json.RawMessage `json:"reply,omitempty"`
	Error    string          `json:"error,omitempty"`
	Code     string          `json:"code,omitempty"`
	Refused  bool            `json:"refused,omitempty"`
}

// ndjson is the content type of a streamed answer.
const ndjson = "application/x-ndjson"

// typeName is a message's name on the wire: its Go type, package-qualified.
func typeName(t reflect.Type) string { return t.String() }

// RefusedError is a message the receiving node refused as such (malformed,
// of a type it does not handle, over the hop limit, or invalid for its
// handler), as opposed to one it could not answer now. Sending it again
// does not help.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return "message refused: " + e.Msg }

// CodedError is a handler's failure classified for the sender (the admin
// commands' not_found, usage, refused, …): the sender gets the same
// *CodedError back, so a node that passes a message on hands its
// client the owner's failure unchanged.
type CodedError struct {
	Code string
	Msg  string
}

func (e *CodedError) Error() string { return e.Msg }

// ErrInvalid is wrapped by a handler's error for a message that can never
// succeed (a bad repository name): the sender gets a *RefusedError.
var ErrInvalid = errors.New("invalid message")

// Handlers routes each message type to its handler. Register handlers
// with Handle or HandleStream before serving.
type Handlers struct {
	log *zap.Logger
	m   map[string]handler
}

type handler struct {
	fn     func(ctx context.Context, msg json.RawMessage, progress func(string)) (any, error)
	stream bool // answered as a stream (HandleStream)
}

// NewHandlers returns an empty router.
func NewHandlers(log *zap.Logger) *Handlers {
	return &Handlers{log: orNop(log), m: map[string]handler{}}
}

// Handle registers fn as the handler of messages of type M.
func Handle[M, R any](h *Handlers, fn func(ctx context.Context, m M) (R, error)) {
	register(h, false, func(ctx context.Context, m M, _ func(string)) (R, error) { return fn(ctx, m) })
}

// HandleStream registers fn as the handler of messages of type M whose
// answer streams: each progress call reaches the sender's progress
// function before the typed reply.
func HandleStream[M, R any](h *Handlers, fn func(ctx context.Context, m M, progress func(string)) (R, error)) {
	register(h, true, fn)
}

func register[M, R any](h *Handlers, stream bool, fn func(context.Context, M, func(string)) (R, error)) {
	h.m[typeName(reflect.TypeFor[M]())] = handler{stream: stream, fn: func(ctx context.Context, raw json.RawMessage, progress func(string)) (any, error) {
		var m M
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return fn(ctx, m, progress)
	}}
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
	hd, ok := h.m[e.Type]
	switch {
	case !ok:
		reply(w, http.StatusBadRequest, answer{Error: fmt.Sprintf("unknown message type %q", e.Type), Refused: true})
		return
	case e.Hop < 0 || e.Hop > gitserve.MaxHops:
		reply(w, http.StatusBadRequest, answer{Error: fmt.Sprintf("hop %d outside 0..%d", e.Hop, gitserve.MaxHops), Refused: true})
		return
	}
	ctx := gitserve.WithHops(r.Context(), e.Hop)
	if !hd.stream {
		out, err := hd.fn(ctx, e.Msg, nil)
		code, a := h.outcome(e.Type, out, err)
		reply(w, code, a)
		return
	}
	s := &progressStream{w: w, rc: http.NewResponseController(w)}
	w.Header().Set("Content-Type", ndjson)
	w.WriteHeader(http.StatusOK)
	out, err := hd.fn(ctx, e.Msg, s.progress)
	_, a := h.outcome(e.Type, out, err)
	s.line(a)
}

// outcome is the answer to a handler's result, with the status it has
// when it is not streamed.
func (h *Handlers) outcome(typ string, out any, err error) (int, answer) {
	var coded *CodedError
	switch {
	case errors.Is(err, ErrInvalid) || errors.Is(err, cluster.ErrInvalidName):
		return http.StatusBadRequest, answer{Error: err.Error(), Refused: true}
	case errors.As(err, &coded):
		return http.StatusUnprocessableEntity, answer{Error: coded.Msg, Code: coded.Code}
	case err != nil:
		h.log.Warn("peer message failed", zap.String("type", typ), zap.Error(err))
		return http.StatusServiceUnavailable, answer{Error: err.Error()}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return http.StatusInternalServerError, answer{Error: "encode reply: " + err.Error()}
	}
	return http.StatusOK, answer{Reply: b}
}

// progressStream writes a streamed answer's lines; handlers may report
// progress from several goroutines.
type progressStream struct {
	mu sync.Mutex
	w  io.Writer
	rc *http.ResponseController
}

func (s *progressStream) progress(msg string) { s.line(answer{Progress: msg}) }

func (s *progressStream) line(a answer) {
	b, _ := json.Marshal(a)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(append(b, '\n'))
	_ = s.rc.Flush()
}

func reply(w http.ResponseWriter, code int, a answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(a)
}

// Send delivers m to the node whose peer stream port is at base
// (http://host:port, or https:// with peer TLS) and decodes
// its reply into out (a pointer to the handler's result type). A message
// the node refused is a *RefusedError, a classified failure of its
// handler a *CodedError; any other failure (no connection, a 503) is
// returned wrapped with its cause.
func Send[M any](ctx context.Context, hc *http.Client, base, secret string, hop int, m M, out any) error {
	return SendProgress(ctx, hc, base, secret, hop, m, out, nil)
}

// SendProgress is Send for a message whose answer may stream
// (HandleStream): progress, when not nil, hears each progress line as it
// arrives. The message's wire type is its dynamic type, so m may be held
// in an interface.
func SendProgress[M any](ctx context.Context, hc *http.Client, base, secret string, hop int, m M, out any, progress func(string)) error {
	msg, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %T: %w", m, err)
	}
	body, err := json.Marshal(envelope{Type: typeName(reflect.TypeOf(m)), Hop: hop, Msg: msg})
	if err != nil {
		return fmt.Errorf("encode envelope: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+PathMsg, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	SetVersion(req.Header)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var a answer
	status := resp.Status // of the failure, for a plain answer
	if resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == ndjson {
		status = "streamed answer"
		if a, err = readStream(resp.Body, progress); err != nil {
			return fmt.Errorf("%T to %s: %w", m, base, err)
		}
	} else {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxMessage))
		if err != nil {
			return fmt.Errorf("%T to %s: read answer: %w", m, base, err)
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			// Not an envelope's answer: the secret check (401) or a proxy.
			msg := fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(raw[:min(len(raw), 512)]))
			if resp.StatusCode >= 400 && resp.StatusCode < 500 {
				return &RefusedError{Msg: msg}
			}
			return fmt.Errorf("%T to %s: %s", m, base, msg)
		}
		if resp.StatusCode != http.StatusOK && !a.Refused && a.Code == "" {
			return fmt.Errorf("%T to %s: %s: %s", m, base, resp.Status, a.Error)
		}
	}
	switch {
	case a.Refused:
		return &RefusedError{Msg: a.Error}
	case a.Code != "":
		return &CodedError{Code: a.Code, Msg: a.Error}
	case a.Error != "":
		return fmt.Errorf("%T to %s: %s: %s", m, base, status, a.Error)
	}
	if err := json.Unmarshal(a.Reply, out); err != nil {
		return fmt.Errorf("%T to %s: bad reply: %w", m, base, err)
	}
	return nil
}

// errNoAnswer: a streamed answer ended before its last line.
var errNoAnswer = errors.New("the node closed the stream before answering")

// readStream reads a streamed answer: progress lines, then the answer.
func readStream(r io.Reader, progress func(string)) (answer, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxMessage)
	for sc.Scan() {
		var a answer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			return answer{}, fmt.Errorf("bad answer line: %w", err)
		}
		if a.Progress == "" {
			return a, nil
		}
		if progress != nil {
			progress(a.Progress)
		}
	}
	if err := sc.Err(); err != nil {
		return answer{}, fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	return answer{}, errNoAnswer
}
