// Package httpgit is rgit's smart HTTP front end (git's http-backend
// protocol): GET /{owner}/{name}[.git]/info/refs?service=…, POST
// …/git-upload-pack and …/git-receive-pack. Authentication is HTTP Basic
// with any username and a token as the password. Access decisions, repo
// resolution and the protocol engine come from transport/service/gitserve.
//
// Both directions stream: the request body is read incrementally (gzip
// decoded on the fly) and the response is flushed as the engine writes.
//
// It imports transport/service/gitserve, transport/wire/gitproto, storage/auth, zap and
// the standard library.
package httpgit

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/clientlimit"
	"github.com/rgit/rgit/transport/wire/gitproto"
	"github.com/rgit/rgit/transport/wire/reqid"
)

// DefaultMaxBody is the request body limit when Config.MaxBody is 0.
const DefaultMaxBody = 2 << 30

// Config configures the handler.
type Config struct {
	// Resolver finds repositories and opens sessions. Required.
	Resolver gitserve.Resolver
	// Auth looks up tokens. Required.
	Auth auth.TokenSource
	// Protocol runs the git protocol; nil means gitserve.GitProtocol.
	Protocol gitserve.Protocol
	// MaxBody bounds a POST body (RGIT_MAX_BODY), compressed and
	// decompressed alike. 0 means DefaultMaxBody; negative means no limit.
	MaxBody int64
	// Agent is advertised to clients; "" means the engine default.
	Agent  string
	Logger *zap.Logger
	// Metrics records each request; nil means none. Use
	// (*gitserve.PromMetrics).For("http").
	Metrics gitserve.Metrics
	// SessionKind names this front end's git sessions (actors.KindHTTP
	// when empty; the peer port's are actors.KindForwarded).
	SessionKind actors.SessionKind
	// FromPeers says every request comes from a peer node (the peer HTTP
	// port, behind the peer secret): its request ids are the forwarding
	// node's and are kept. Otherwise each request gets a new id and the
	// client's X-Request-Id is only logged beside it (package reqid).
	FromPeers bool
	// Forward carries a request for a repository another node owns to that
	// node (cluster mode; transport/frontend/peer.HTTPForwarder). nil: such requests
	// answer 503.
	Forward gitserve.Forwarder
	// Rerouter decides where a request goes after Forward failed to
	// reach the owner with nothing of the request consumed; nil: the
	// failure is final (503).
	Rerouter gitserve.Rerouter
	// Unauthenticated, if set, caps the git requests without credentials
	// that one client address has in flight (RGIT_MAX_ANON_PER_ADDR,
	// shared with SSH); more are answered 429. Leave it nil where every
	// request comes from a peer node.
	Unauthenticated *clientlimit.PerAddr
}

// Realm is the HTTP Basic realm of 401 answers.
const Realm = "rgit"

type handler struct {
	gate     *gitserve.Gate
	auth     auth.TokenSource
	maxBody  int64
	log      *zap.Logger
	metrics  gitserve.Metrics
	forward  gitserve.Forwarder
	rerouter gitserve.Rerouter
	kind     actors.SessionKind
	peers    bool // Config.FromPeers
	anon     *clientlimit.PerAddr
}

// Patterns are the net/http.ServeMux patterns the front end serves.
var Patterns = []string{
	"GET /{owner}/{repo}/info/refs",
	"POST /{owner}/{repo}/git-upload-pack",
	"POST /{owner}/{repo}/git-receive-pack",
}

// Server is the smart HTTP front end. It is an http.Handler serving only
// its Patterns (anything else is 404); Register mounts it on another mux.
type Server struct {
	h   *handler
	mux *http.ServeMux
}

// New validates cfg and returns the front end.
func New(cfg Config) (*Server, error) {
	h, err := newHandler(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{h: h, mux: http.NewServeMux()}
	s.Register(s.mux)
	return s, nil
}

// Handler is New for callers that cannot handle an error: an invalid
// Config yields a handler that answers 500 to everything and logs why.
func Handler(cfg Config) http.Handler {
	s, err := New(cfg)
	if err == nil {
		return s
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log.Error("git http front end misconfigured", zap.Error(err))
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "git front end misconfigured", http.StatusInternalServerError)
	})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Register adds the smart HTTP routes (Patterns) to mux. They coexist with
// fixed paths such as /healthz or /metrics; ServeMux panics at registration
// on an ambiguous overlap (e.g. a method-less "/x/{rest...}").
func (s *Server) Register(mux *http.ServeMux) {
	h := s.h
	mux.HandleFunc(Patterns[0], h.session(h.infoRefs))
	mux.HandleFunc(Patterns[1], h.session(func(w http.ResponseWriter, r *http.Request) { h.rpc(w, r, gitserve.UploadPack) }))
	mux.HandleFunc(Patterns[2], h.session(func(w http.ResponseWriter, r *http.Request) { h.rpc(w, r, gitserve.ReceivePack) }))
}

// session gives the request its ids (package reqid): a new one, with the
// client's X-Request-Id beside it when sane; on the peer port, the ids the
// forwarding node sent. The answer carries the id and a forwarder sends
// both on. The request is one git session (gitserve.Gate.Begin) from here
// to its last byte, forwarded or not.
func (h *handler) session(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var id, client string
		if h.peers {
			id, client = reqid.Accept(r.Header.Get(reqid.Header)), r.Header.Get(reqid.ClientHeader)
			if !reqid.Valid(client) {
				client = ""
			}
		} else {
			id, client = reqid.Edge(r.Header.Get(reqid.Header))
		}
		w.Header().Set(reqid.Header, id)
		// A request without credentials may hold a session for as long
		// as its client is slow.
		release, ok := h.anon.AcquireRequest(r)
		if !ok {
			h.tooManyUnauthenticated(w, r)
			return
		}
		defer release()
		ctx, end, err := h.gate.Begin(reqid.WithClient(r.Context(), id, client), h.kind)
		defer end()
		if err != nil {
			h.log.Warn("git http request refused: no session", zap.Error(err), reqid.Field(ctx))
			http.Error(w, gitserve.Unavailable.Message(), http.StatusServiceUnavailable)
			return
		}
		next(w, r.WithContext(ctx))
	}
}

// tooManyUnauthenticated refuses a request over the per-address cap of
// requests without credentials.
func (h *handler) tooManyUnauthenticated(w http.ResponseWriter, r *http.Request) {
	msg := h.anon.Refusal()
	h.metrics.Observe("refused", strconv.Itoa(http.StatusTooManyRequests), 0, 0, 0)
	h.log.Info("git http request refused", zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr),
		zap.Int("status", http.StatusTooManyRequests), zap.String("reason", msg))
	w.Header().Set("Retry-After", RetryAfter)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusTooManyRequests)
	io.WriteString(w, msg+"\n")
}

func newHandler(cfg Config) (*handler, error) {
	if cfg.Auth == nil {
		return nil, errors.New("httpgit: Config.Auth is required")
	}
	gate, err := gitserve.NewGate(cfg.Resolver, cfg.Protocol, cfg.Agent)
	if err != nil {
		return nil, fmt.Errorf("httpgit: %w", err)
	}
	h := &handler{gate: gate, auth: cfg.Auth, maxBody: cfg.MaxBody, log: cfg.Logger, metrics: cfg.Metrics,
		forward: cfg.Forward, rerouter: cfg.Rerouter, kind: cmp.Or(cfg.SessionKind, actors.KindHTTP), peers: cfg.FromPeers, anon: cfg.Unauthenticated}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBody
	}
	if h.log == nil {
		h.log = zap.NewNop()
	}
	if h.metrics == nil {
		h.metrics = gitserve.NopMetrics{}
	}
	return h, nil
}

// request is the per-request state shared by the two endpoints.
type request struct {
	h     *handler
	log   *zap.Logger // h's, with the request id
	w     http.ResponseWriter
	r     *http.Request
	op    string
	start time.Time
	out   *streamWriter
	stats gitserve.Stats
	// proxied is the response writer handed to the forwarder, if the
	// request was forwarded.
	proxied *trackingWriter
}

func (h *handler) begin(w http.ResponseWriter, r *http.Request, op string) *request {
	// Identity headers are reserved for the peer port; nothing arriving on
	// the public port may carry them further.
	for k := range r.Header {
		if strings.HasPrefix(k, "X-Rgit-") {
			delete(r.Header, k)
		}
	}
	return &request{h: h, log: h.log.With(reqid.Field(r.Context())), w: w, r: r, op: op, start: time.Now()}
}

// finish logs and records the request. err is the failure, if any; once the
// response has started only logging is possible.
func (q *request) finish(err error) {
	class := gitserve.Classify(err)
	status := http.StatusOK
	if q.proxied != nil && q.proxied.code != 0 {
		status = q.proxied.code // the owner's answer
	} else if !q.started() {
		status = statusOf(class)
		if err != nil {
			msg := gitserve.ClientMessage(err)
			if be, ok := errors.AsType[*gitproto.BusyError](err); ok {
				msg = be.Error() // names the settings, nothing private
			}
			q.fail(status, msg)
		}
	}
	q.h.metrics.Observe(q.op, strconv.Itoa(status), time.Since(q.start), q.stats.BytesIn, q.stats.BytesOut)
	fields := []zap.Field{
		zap.String("op", q.op), zap.String("path", q.r.URL.Path), zap.String("remote", q.r.RemoteAddr),
		zap.Int("status", status), zap.String("class", class.String()), zap.Error(err),
	}
	if err == nil {
		q.log.Debug("git http request", append(fields, zap.Duration("duration", time.Since(q.start)))...)
		return
	}
	switch class {
	case gitserve.Internal:
		q.log.Error("git http request failed", fields...)
	case gitserve.Unavailable:
		q.log.Warn("git http request failed", fields...)
	case gitserve.Unauthorized:
		// git's first request is routinely anonymous; this is the
		// credential challenge, not an incident.
		q.log.Debug("git http request needs credentials", fields...)
	default:
		q.log.Info("git http request refused", fields...)
	}
}

// started reports whether the answer's headers have gone out, by the
// engine or by a forwarded node.
func (q *request) started() bool {
	return (q.out != nil && q.out.started) || (q.proxied != nil && q.proxied.wrote)
}

// fail writes a short text error.
func (q *request) fail(status int, msg string) {
	h := q.w.Header()
	switch status {
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Basic realm="`+Realm+`"`)
	case http.StatusServiceUnavailable:
		// Busy (memory admission), claim failed, draining: all pass soon.
		h.Set("Retry-After", RetryAfter)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	noCache(h)
	q.w.WriteHeader(status)
	io.WriteString(q.w, msg+"\n")
}

// RetryAfter is the Retry-After of 503 answers, in seconds.
const RetryAfter = "2"

func statusOf(c gitserve.Class) int {
	switch c {
	case gitserve.OK:
		return http.StatusOK
	case gitserve.Unauthorized:
		return http.StatusUnauthorized
	case gitserve.NotFound:
		return http.StatusNotFound
	case gitserve.Forbidden:
		return http.StatusForbidden
	case gitserve.BadRequest:
		return http.StatusBadRequest
	case gitserve.TooLarge:
		return http.StatusRequestEntityTooLarge
	case gitserve.Unavailable:
		return http.StatusServiceUnavailable
	case gitserve.Canceled:
		// The client is most likely gone; nginx's 499 is not standard, and
		// this status is mostly for logs and metrics.
		return http.StatusRequestTimeout
	}
	return http.StatusInternalServerError
}

// refuse answers a request rejected before authentication and records it.
func (q *request) refuse(status int, msg string) {
	q.fail(status, msg)
	q.h.metrics.Observe(q.op, strconv.Itoa(status), time.Since(q.start), 0, 0)
	q.log.Info("git http request refused", zap.String("op", q.op), zap.String("path", q.r.URL.Path),
		zap.String("remote", q.r.RemoteAddr), zap.Int("status", status), zap.String("reason", msg))
}

// identity authenticates the caller. No Authorization header means
// anonymous; a header with a bad token is an error (the client meant to
// authenticate, so it gets 401 and can retry, not a silent downgrade).
func (h *handler) identity(r *http.Request) (auth.Identity, error) {
	id, err := auth.FromRequest(r, h.auth)
	if err != nil && !errors.Is(err, auth.ErrBadCredentials) {
		return auth.Anonymous, fmt.Errorf("%w: %w", gitserve.ErrUnavailable, err)
	}
	return id, err
}

// open authenticates the caller and opens a session for svc on the
// request's repository. On failure it has already answered and returns nil.
func (h *handler) open(q *request, svc gitserve.Service) *gitserve.AuthorizedSession {
	owner, rawName := q.r.PathValue("owner"), q.r.PathValue("repo")
	id, err := h.identity(q.r)
	if errors.Is(err, auth.ErrBadCredentials) {
		err = &gitserve.DeniedError{Decision: auth.Unauthorized, Service: svc, Owner: owner, Name: rawName, Err: err}
	}
	if err != nil {
		q.finish(err)
		return nil
	}
	repo, err := gitserve.ParseRepo(owner, rawName)
	if err != nil {
		q.finish(gitserve.BadPath(svc, owner+"/"+rawName, id, err))
		return nil
	}
	rt, err := h.gate.Route(q.r.Context(), svc, repo, id)
	if err == nil && rt.Session == nil {
		if h.forward == nil {
			q.finish(gitserve.NotHere(rt))
			return nil
		}
		local, err := h.forwardTo(q, rt, svc)
		if !local {
			q.finish(err)
			return nil
		}
		// The failover moved the repository here: serve it here, and
		// that answer is final (Open forwards nothing).
		rt.Session, err = h.gate.Open(q.r.Context(), svc, rt.Repo, id)
		if err != nil {
			q.finish(err)
			return nil
		}
	}
	if gitserve.Hops(q.r.Context()) > 0 && gitserve.IsMoved(err) {
		// Forwarded here by a node whose view still names this draining
		// one: tell it to route again, before anything is written.
		q.moved(err)
		return nil
	}
	if err != nil {
		q.finish(err)
		return nil
	}
	return rt.Session
}

// moved answers a forwarded request with the moved signal and records it.
func (q *request) moved(err error) {
	gitserve.WriteMoved(q.w)
	q.h.metrics.Observe(q.op, strconv.Itoa(http.StatusMisdirectedRequest), time.Since(q.start), 0, 0)
	q.log.Info("forwarded git http request for a repository this node released; answered moved",
		zap.String("op", q.op), zap.String("path", q.r.URL.Path), zap.Error(err))
}

// maxReplayBody bounds the upload-pack request body a forwarder keeps to
// send again elsewhere (after a moved answer or a connect failure).
// Negotiation requests are small; a larger one is streamed, like a push,
// and gets a second chance only while none of it was sent.
const maxReplayBody = 1 << 20

// forwardTo carries the request to the node rt names, following connect
// failures to wherever the node's failover sends it and moved answers to
// wherever the node routes next. Upload-pack POSTs whose body fits
// maxReplayBody are kept in memory to be sent again; other bodies (pushes)
// stream once, so they follow only while none of them was sent (the
// forwarder reports nothing else as a connect failure or a move). It
// returns local true when the repository moved here instead, with the
// request as it arrived (its body rewound) for the caller to serve.
func (h *handler) forwardTo(q *request, rt gitserve.Routed, svc gitserve.Service) (local bool, err error) {
	op := q.op
	q.op += "-forward"
	q.proxied = &trackingWriter{ResponseWriter: q.w}
	method := q.r.Method
	if method == http.MethodPost && svc == gitserve.UploadPack {
		replayable, err := bufferBody(q.r, maxReplayBody)
		if err != nil {
			return false, bodyError("read upload-pack request", err)
		}
		if replayable {
			method = http.MethodGet // a read that can be sent again
		}
	}
	local, err = gitserve.FollowForward(q.r.Context(), h.rerouter, gitserve.MoverOf(h.forward, h.rerouter), rt, method,
		func(node string) error { return h.forward.Forward(q.proxied, q.r, node) })
	if !local || err != nil {
		return false, err
	}
	// Nothing was sent anywhere that consumed the request: it is served
	// here as if it had never been forwarded.
	q.op, q.proxied = op, nil
	if q.r.GetBody != nil {
		body, err := q.r.GetBody()
		if err != nil {
			return false, fmt.Errorf("rewind the request body: %w", err)
		}
		q.r.Body = body
	}
	return true, nil
}

// bufferBody reads r's body into memory if it is at most limit bytes and
// makes it replayable (GetBody, exact ContentLength). A longer body is
// left streaming, its first bytes put back in front, and false returned.
func bufferBody(r *http.Request, limit int64) (bool, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return true, nil
	}
	if r.ContentLength > limit {
		return false, nil
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return false, err
	}
	if int64(len(buf)) > limit {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
		return false, nil
	}
	r.Body.Close()
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	r.Body, _ = r.GetBody()
	r.ContentLength, r.TransferEncoding = int64(len(buf)), nil
	return true, nil
}

// trackingWriter records whether the forwarded answer has started, so a
// failed forward is answered only when nothing was written yet.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
	code  int
}

func (t *trackingWriter) WriteHeader(code int) {
	if code >= 200 && !t.wrote {
		t.wrote, t.code = true, code
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(p []byte) (int, error) {
	if !t.wrote {
		t.wrote, t.code = true, http.StatusOK
	}
	return t.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach Flush and EnableFullDuplex.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

func noCache(h http.Header) {
	// As git-http-backend does: no cache may reuse an advertisement or a
	// result.
	h.Set("Expires", "Fri, 01 Jan 1980 00:00:00 GMT")
	h.Set("Pragma", "no-cache")
	h.Set("Cache-Control", "no-cache, max-age=0, must-revalidate")
}

func (h *handler) infoRefs(w http.ResponseWriter, r *http.Request) {
	svcName := r.URL.Query().Get("service")
	q := h.begin(w, r, "info-refs")
	if svcName == "" {
		q.refuse(http.StatusForbidden, "dumb HTTP is not supported: use a git client that speaks smart HTTP")
		return
	}
	svc, ok := gitserve.ParseService(svcName)
	if !ok {
		q.refuse(http.StatusForbidden, "unsupported service: "+svcName)
		return
	}
	q.op = "info-refs-" + strings.TrimPrefix(svcName, "git-")
	sess := h.open(q, svc)
	if sess == nil {
		return
	}
	defer sess.Close()
	proto := gitproto.ParseProtocol(r.Header.Get("Git-Protocol"))
	q.out = newStreamWriter(w, "application/x-"+svcName+"-advertisement")
	if proto < 2 || svc == gitserve.ReceivePack {
		// Smart HTTP v0/v1 prefixes the advertisement with the service
		// line; v2 (upload-pack only: git has no v2 push) does not.
		if err := writePreamble(q.out, svcName); err != nil {
			q.finish(fmt.Errorf("write preamble: %w", err))
			return
		}
	}
	var err error
	q.stats, err = sess.Run(r.Context(), nil, q.out, gitproto.Options{Protocol: proto, StatelessRPC: true, AdvertiseOnly: true})
	q.stats.BytesOut = q.out.n // includes the preamble
	q.finish(err)
}

func writePreamble(w io.Writer, svcName string) error {
	line := "# service=" + svcName + "\n"
	_, err := fmt.Fprintf(w, "%04x%s0000", len(line)+4, line)
	return err
}

func (h *handler) rpc(w http.ResponseWriter, r *http.Request, svc gitserve.Service) {
	q := h.begin(w, r, strings.TrimPrefix(svc.String(), "git-"))
	// Cheap checks first, all before authentication and before anything
	// reads the body: a too-large body is refused without resolving the
	// repository, and with Expect: 100-continue the client never sends it.
	if h.maxBody > 0 && r.ContentLength > h.maxBody {
		q.refuse(http.StatusRequestEntityTooLarge, limitError{&http.MaxBytesError{Limit: h.maxBody}}.Error())
		return
	}
	wantType := "application/x-" + svc.String() + "-request"
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != wantType {
		q.refuse(http.StatusUnsupportedMediaType, "content type must be "+wantType)
		return
	}
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	if enc != "" && enc != "identity" && enc != "gzip" && enc != "x-gzip" {
		q.refuse(http.StatusUnsupportedMediaType, "unsupported content encoding: "+enc)
		return
	}
	sess := h.open(q, svc)
	if sess == nil {
		return
	}
	defer sess.Close()

	// The engine may write (progress, keepalives) before it has read the
	// whole request; HTTP/1 needs full duplex enabled for that. HTTP/2
	// always is, and returns ErrNotSupported, which is fine.
	_ = http.NewResponseController(w).EnableFullDuplex()
	// In full-duplex mode net/http must not be left to discard an unread
	// body itself (it would read concurrently with its own background
	// reader): consume a bounded rest here, so an engine that answers
	// early leaves the connection reusable, and a larger rest closes it.
	defer io.Copy(io.Discard, io.LimitReader(r.Body, 256<<10))

	// The request's deadline is the connection's, through Pace's body
	// when the listener paces.
	var input gitproto.ReadDeadliner = http.NewResponseController(w)
	if d, ok := r.Body.(gitproto.ReadDeadliner); ok {
		input = d
	}
	var body io.Reader = r.Body
	if h.maxBody > 0 {
		body = http.MaxBytesReader(w, r.Body, h.maxBody)
	}
	if enc == "gzip" || enc == "x-gzip" {
		gz, err := gzip.NewReader(body)
		if err != nil {
			q.finish(bodyError("gzip request body", err))
			return
		}
		defer gz.Close()
		body = gz
		if h.maxBody > 0 {
			// The limit also applies after decompression: a small gzip
			// body may expand enormously.
			body = &limitReader{r: gz, left: h.maxBody, limit: h.maxBody}
		}
	}
	if h.maxBody > 0 {
		body = namedLimit{body}
	}
	proto := gitproto.ParseProtocol(r.Header.Get("Git-Protocol"))
	q.out = newStreamWriter(w, "application/x-"+svc.String()+"-result")
	var err error
	q.stats, err = sess.Run(r.Context(), body, q.out, gitproto.Options{Protocol: proto, StatelessRPC: true, Input: input})
	q.finish(err)
}

// bodyError classifies a failure to read the request body: the size limit
// keeps its own class, anything else is the client's fault.
func bodyError(what string, err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, gitproto.ErrProtocol, err)
}

// limitReader fails with *http.MaxBytesError once more than limit bytes
// have been read, so a decompressed body over the limit is classified like
// a raw one.
type limitReader struct {
	r     io.Reader
	left  int64
	limit int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// Probe for one more byte: exactly-at-the-limit bodies are fine.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, &http.MaxBytesError{Limit: l.limit}
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// limitError is a body over the limit. Its text can reach a git client
// (a push's unpack status, once the answer has started), so it names the
// limit and its variable; it wraps *http.MaxBytesError, which classifies
// it as too large.
type limitError struct{ *http.MaxBytesError }

func (e limitError) Error() string {
	return fmt.Sprintf("request body over the limit of %d bytes (RGIT_MAX_BODY)", e.Limit)
}

func (e limitError) Unwrap() error { return e.MaxBytesError }

// namedLimit turns the body limit's *http.MaxBytesError into a limitError.
type namedLimit struct{ r io.Reader }

func (n namedLimit) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	var mbe *http.MaxBytesError
	if err != nil && errors.As(err, &mbe) {
		err = limitError{mbe}
	}
	return k, err
}

// streamWriter sends the success headers on the first write (so an engine
// that fails before writing anything still gets a proper error status) and
// flushes after every write so progress and pack data reach the client as
// they are produced.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctype   string
	started bool
	n       int64
}

func newStreamWriter(w http.ResponseWriter, ctype string) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w), ctype: ctype}
}

func (s *streamWriter) Write(p []byte) (int, error) {
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", s.ctype)
		noCache(h)
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	n, err := s.w.Write(p)
	s.n += int64(n)
	if err != nil {
		return n, err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return n, fmt.Errorf("flush response: %w", err)
	}
	return n, nil
}

// Pace bounds what a slow client holds on an HTTP listener; use it on
// every listener. The request body must arrive, and the answer be read,
// at rate.BytesPerSec, falling behind it by at most rate.Grace: a body
// that stops moving is cut off after Grace, and so is an answer the
// client stops reading, while a slow but steady transfer of any length
// is fine. Only time a handler spends waiting on the client counts. A
// read cut off fails with clientlimit.ErrTooSlow (the front end answers
// 408 if it has not answered yet); an answer that starts after that, or
// any answer that closes the connection, leaves nothing of the body for
// net/http to wait for. The body is an gitproto.ReadDeadliner: the
// protocol layer puts a whole request under a deadline with it. A zero
// rate.Grace returns h unchanged.
func Pace(h http.Handler, rate clientlimit.Rate) http.Handler {
	if rate.Grace <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		pw := &pacedWriter{ResponseWriter: w, rc: rc, pace: clientlimit.NewWriter(deadlineWriter{w, rc}, rate)}
		if r.Body != nil && r.Body != http.NoBody {
			pw.body = &pacedBody{ReadCloser: r.Body, Reader: clientlimit.NewReader(deadlineBody{r.Body, rc}, rate)}
			r.Body = pw.body
		}
		h.ServeHTTP(pw, r)
		if pw.body == nil {
			return
		}
		switch {
		case pw.Header().Get("Connection") == "close", pw.body.Expired():
			// Nothing more of the body is wanted, or it stopped coming:
			// net/http's discard must not wait for it (a client holding
			// a half-sent body would keep the connection, and a graceful
			// shutdown, waiting).
			_ = rc.SetReadDeadline(time.Now())
		default:
			_ = rc.SetReadDeadline(time.Now().Add(rate.Grace))
		}
	})
}

// pacedBody is a request body under Pace; its SetReadDeadline bounds a
// whole request.
type pacedBody struct {
	io.ReadCloser
	*clientlimit.Reader
}

func (b *pacedBody) Read(p []byte) (int, error) { return b.Reader.Read(p) }

var _ gitproto.ReadDeadliner = (*pacedBody)(nil)

// deadlineBody is the request body with the connection's read deadline.
type deadlineBody struct {
	io.Reader
	rc *http.ResponseController
}

func (d deadlineBody) SetReadDeadline(t time.Time) error { return d.rc.SetReadDeadline(t) }

// deadlineWriter is the response with the connection's write deadline.
type deadlineWriter struct {
	io.Writer
	rc *http.ResponseController
}

func (d deadlineWriter) SetWriteDeadline(t time.Time) error { return d.rc.SetWriteDeadline(t) }

// pacedWriter is a response under Pace. It closes the connection after an
// answer that starts once the body was cut off: the rest of the body
// will not come, and the connection must not wait for the next request
// in its place.
type pacedWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	pace    *clientlimit.Writer
	body    *pacedBody // nil: the request had none
	started bool
}

func (w *pacedWriter) WriteHeader(code int) {
	if !w.started && code >= 200 {
		w.started = true
		if w.body != nil && w.body.Expired() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *pacedWriter) Write(p []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	return w.pace.Write(p)
}

// paceChunk is the most of a file ReadFrom sends under one deadline: its
// bytes' worth of time at the rate is what a client that stops reading
// may still hold the connection for (64 s at 4 KiB/s), as after a write
// of as many bytes.
const paceChunk = 256 << 10

// ReadFrom sends a regular file, an *os.File or an io.LimitedReader of
// one (what objstore.Send hands it), through net/http's ReadFrom, which
// moves it with sendfile(2), paceChunk bytes under each deadline. It
// copies anything else through Write, as io.Copy would: time spent
// waiting for a source that is not a file must not count against the
// client.
func (w *pacedWriter) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := w.ResponseWriter.(io.ReaderFrom)
	lr, limited := src.(*io.LimitedReader)
	if !limited {
		lr = &io.LimitedReader{R: src, N: math.MaxInt64}
	}
	if !ok || !regularFile(lr.R) {
		return io.Copy(struct{ io.Writer }{w}, src)
	}
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	var sent int64
	for lr.N > 0 {
		chunk := &io.LimitedReader{R: lr.R, N: min(lr.N, paceChunk)}
		want := chunk.N
		n, err := w.pace.Do(int(want), func() (int, error) {
			n, err := rf.ReadFrom(chunk)
			return int(n), err
		})
		sent += int64(n)
		lr.N -= int64(n)
		if err != nil || int64(n) < want {
			return sent, err
		}
	}
	return sent, nil
}

// regularFile reports whether r is an open regular file (not a pipe or a
// socket, whose reads may wait).
func regularFile(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode().IsRegular()
}

// FlushError flushes under the rate's deadline (http.ResponseController
// calls it).
func (w *pacedWriter) FlushError() error {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	_, err := w.pace.Do(0, func() (int, error) { return 0, w.rc.Flush() })
	return err
}

// Unwrap lets http.ResponseController reach deadlines, EnableFullDuplex
// and Hijack.
func (w *pacedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
