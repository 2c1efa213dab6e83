package lfs

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/frontend/httpgit"
	"github.com/rgit/rgit/transport/frontend/httpmetrics"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/clientlimit"
	"github.com/rgit/rgit/transport/wire/gitproto"
	"github.com/rgit/rgit/transport/wire/reqid"
)

// Locks keeps a repository's Git LFS locks: its repo actor, on the node
// that owns it (transport/service/engine adapts actors.Node). Errors wrap
// storage/repo's lock sentinels and *repo.LockedError, or
// gitserve.ErrUnavailable when the repository cannot be reached now.
type Locks interface {
	CreateLock(ctx context.Context, r names.Repo, path, holder string) (repo.Lock, error)
	// DeleteLock removes lock id if holder took it, any lock when holder
	// is "" (an administrator's forced unlock), and returns it.
	DeleteLock(ctx context.Context, r names.Repo, id, holder string) (repo.Lock, error)
	Locks(ctx context.Context, r names.Repo) ([]repo.Lock, error)
}

// Config configures the LFS front end of one listener.
type Config struct {
	// Gate decides access and routes to the owner, as for git. Required.
	Gate *gitserve.Gate
	// Auth looks up tokens. Required.
	Auth auth.TokenSource
	// Store holds the objects. Required.
	Store objstore.Store
	// Locks keeps locks. Required.
	Locks Locks
	// Secret is the peer secret, from which tickets' key is derived: the
	// same on every node. Required.
	Secret string
	// Forward and Rerouter carry batch and lock requests for
	// repositories another node owns (cluster mode); nil Forward: such
	// requests answer 503.
	Forward  gitserve.Forwarder
	Rerouter gitserve.Rerouter
	Limits   Limits
	// Unauthenticated, if set, caps per client address the requests in
	// flight of callers without credentials (batch, locks) and the
	// downloads handed to them (RGIT_MAX_ANON_PER_ADDR: the budget git
	// requests and SSH connections share); more are answered 429. nil on
	// the peer port, where every request comes from a node.
	Unauthenticated *clientlimit.PerAddr
	// PublicURL is the base URL clients reach the HTTP port at
	// (RGIT_PUBLIC_URL), for the hrefs of node-served actions and
	// git-lfs-authenticate; "" derives it from the request's Host (over
	// SSH: the address the client connected to; see Server.SSH).
	PublicURL string
	// Peer marks the peer port's front end: its requests were forwarded
	// by another node, which says in HeaderBase where the client is.
	Peer bool
	// SessionKind names the git sessions of batch and lock requests
	// (actors.KindHTTP when empty).
	SessionKind actors.SessionKind
	Metrics     *Metrics
	Log         *zap.Logger
}

// HeaderBase carries the client's base URL from the node a request
// entered at to the owner it is forwarded to (trusted on the peer port
// only; the public port drops every X-Rgit- header).
const HeaderBase = "X-Rgit-Lfs-Base"

// Server is the LFS front end: the batch, transfer, verify and lock
// endpoints over HTTP (Register) and the SSH commands (ssh.go).
type Server struct {
	gate      *gitserve.Gate
	auth      auth.TokenSource
	objects   objects
	locks     Locks
	sign      signer
	fwd       gitserve.Forwarder
	rr        gitserve.Rerouter
	limits    Limits
	anon      *clientlimit.PerAddr
	publicURL string
	peer      bool
	kind      actors.SessionKind
	metrics   *Metrics
	log       *zap.Logger
	now       func() time.Time
	// mux serves the routes in process, for the SSH transfer's batch
	// and lock commands.
	mux *http.ServeMux
}

// New validates cfg and returns the front end.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Gate == nil, cfg.Auth == nil, cfg.Store == nil, cfg.Locks == nil:
		return nil, errors.New("lfs: Config needs Gate, Auth, Store and Locks")
	case len(cfg.Secret) < 16:
		return nil, errors.New("lfs: Config.Secret (the peer secret) must be at least 16 characters")
	}
	s := &Server{gate: cfg.Gate, auth: cfg.Auth, objects: newObjects(cfg.Store), locks: cfg.Locks, sign: newSigner(cfg.Secret),
		fwd: cfg.Forward, rr: cfg.Rerouter, limits: cfg.Limits.withDefaults(), anon: cfg.Unauthenticated, publicURL: strings.TrimRight(cfg.PublicURL, "/"),
		peer: cfg.Peer, kind: cfg.SessionKind, metrics: cfg.Metrics, log: cfg.Log, now: time.Now}
	if s.kind == "" {
		s.kind = actors.KindHTTP
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.mux = http.NewServeMux()
	s.Register(s.mux)
	return s, nil
}

// Patterns are the net/http.ServeMux patterns of the LFS endpoints.
var Patterns = []string{
	"POST /{owner}/{repo}/info/lfs/objects/batch",
	"GET /{owner}/{repo}/info/lfs/objects/{oid}",
	"PUT /{owner}/{repo}/info/lfs/objects/{oid}",
	"POST /{owner}/{repo}/info/lfs/verify",
	"POST /{owner}/{repo}/info/lfs/locks",
	"GET /{owner}/{repo}/info/lfs/locks",
	"POST /{owner}/{repo}/info/lfs/locks/verify",
	"POST /{owner}/{repo}/info/lfs/locks/{id}/unlock",
}

// Register adds the LFS routes (Patterns) to mux.
func (s *Server) Register(mux *http.ServeMux) {
	handlers := []http.HandlerFunc{s.batch, s.download, s.upload, s.verify, s.createLock, s.listLocks, s.verifyLocks, s.unlock}
	for i, p := range Patterns {
		mux.Handle(p, s.begin(handlers[i]))
	}
}

// begin gives the request its id (transport/wire/reqid) and, on the public
// port, drops every X-Rgit- header: only a peer may say where a client is.
func (s *Server) begin(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := reqid.Accept(r.Header.Get(reqid.Header))
		w.Header().Set(reqid.Header, id)
		if !s.peer {
			for k := range r.Header {
				if strings.HasPrefix(k, "X-Rgit-") {
					delete(r.Header, k)
				}
			}
		}
		next(w, r.WithContext(reqid.With(r.Context(), id)))
	})
}

// contentType is the batch and lock APIs' media type.
const contentType = "application/vnd.git-lfs+json"

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"message":"internal error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// message is the body of every error answer.
type message struct {
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
}

// Realm is the Basic realm of 401 answers.
const Realm = "rgit"

// errBadRequest marks a request the client got wrong (400).
var errBadRequest = fmt.Errorf("bad request: %w", gitproto.ErrProtocol)

// fail answers err: denials as git's (a private repository 401 anonymous,
// 404 otherwise, exactly like a missing one), limits 413, conflicts 409,
// malformed requests 400 or 422, busy 503, anything else 500 (logged).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) int {
	var denied *gitserve.DeniedError
	var limit *gitproto.LimitError
	var mbe *http.MaxBytesError
	status, msg := http.StatusInternalServerError, "internal server error"
	switch {
	case errors.As(err, &denied):
		msg = gitserve.ClientMessage(err)
		switch gitserve.Classify(err) {
		case gitserve.Unauthorized:
			status = http.StatusUnauthorized
			w.Header().Set("LFS-Authenticate", `Basic realm="`+Realm+`"`)
			w.Header().Set("WWW-Authenticate", `Basic realm="`+Realm+`"`)
		case gitserve.Forbidden:
			status = http.StatusForbidden
		default:
			status = http.StatusNotFound
		}
	case errors.As(err, &limit), errors.As(err, &mbe):
		status, msg = http.StatusRequestEntityTooLarge, err.Error()
		if mbe != nil && limit == nil {
			msg = s.limits.batchTooLarge().Error()
		}
	case errors.Is(err, errConflict):
		status, msg = http.StatusConflict, err.Error()
	case errors.Is(err, ErrSizeMismatch), errors.Is(err, ErrHashMismatch), errors.Is(err, repo.ErrBadLockPath), errors.Is(err, repo.ErrTooManyLocks):
		status, msg = http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, errBadTicket):
		status, msg = http.StatusUnauthorized, "this transfer link is invalid or has expired: ask again (git lfs retries by itself)"
	case errors.Is(err, ErrMissing), errors.Is(err, repo.ErrNoLock):
		status, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, gitproto.ErrProtocol):
		status, msg = http.StatusBadRequest, err.Error()
	case errors.Is(err, errAnonBusy):
		status, msg = http.StatusTooManyRequests, s.anon.Refusal()
		w.Header().Set("Retry-After", httpgit.RetryAfter)
	case errors.Is(err, gitserve.ErrUnavailable), errors.Is(err, gitserve.ErrHopLimit):
		status, msg = http.StatusServiceUnavailable, gitserve.Unavailable.Message()
		w.Header().Set("Retry-After", "2")
	case r.Context().Err() != nil:
		return 499 // the client is gone; nobody reads the answer
	}
	fields := []zap.Field{zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Int("status", status), zap.Error(err), reqid.Field(r.Context())}
	switch {
	case status >= 500:
		s.log.Error("git lfs request failed", fields...)
	case status == http.StatusUnauthorized:
		s.log.Debug("git lfs request needs credentials", fields...)
	default:
		s.log.Info("git lfs request refused", fields...)
	}
	writeJSON(w, status, message{Message: msg, RequestID: reqid.From(r.Context())})
	return status
}

// identity authenticates the caller: a RemoteAuth ticket (what
// git-lfs-authenticate handed out over SSH), else a token, else
// anonymous. A credential that is present and bad is an error: the
// client meant to authenticate and gets 401.
func (s *Server) identity(r *http.Request) (auth.Identity, error) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "RemoteAuth "); ok {
		t, err := s.sign.open(tok, s.now())
		if err != nil || t.Op != opAuth || t.ID == nil {
			return auth.Anonymous, &gitserve.DeniedError{Decision: auth.Unauthorized, Err: auth.ErrBadCredentials}
		}
		return *t.ID, nil
	}
	id, err := auth.FromRequest(r, s.auth)
	switch {
	case errors.Is(err, auth.ErrBadCredentials):
		return auth.Anonymous, &gitserve.DeniedError{Decision: auth.Unauthorized, Identity: id, Err: err}
	case err != nil:
		return auth.Anonymous, fmt.Errorf("%w: %w", gitserve.ErrUnavailable, err)
	}
	return id, nil
}

// errAnonBusy: the caller's address holds its share of unauthenticated
// requests already (429).
var errAnonBusy = errors.New("too many unauthenticated requests from this address")

// caller is identity, and for a caller without credentials a unit of the
// per-address cap held until release: a stranger holds no more requests
// here than on git. It costs no store lookup.
func (s *Server) caller(r *http.Request) (auth.Identity, func(), error) {
	id, err := s.identity(r)
	if err != nil || id.Authenticated {
		return id, func() {}, err
	}
	release, err := s.holdAnon(r)
	return id, release, err
}

// holdAnon takes a unit of the per-address cap until release, or
// answers errAnonBusy.
func (s *Server) holdAnon(r *http.Request) (func(), error) {
	release, ok := s.anon.Acquire(r.RemoteAddr)
	if !ok {
		return func() {}, errAnonBusy
	}
	return release, nil
}

// readBody reads a JSON request body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, v any) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: read body: %w", errBadRequest, err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return nil, fmt.Errorf("%w: malformed JSON: %w", errBadRequest, err)
	}
	return body, nil
}

// routed runs serve on the request's repository once access is decided
// (svc's: upload-pack for reads, receive-pack for writes), here when this
// node owns it, else on its owner: the request is forwarded with its
// body (already read), following failover and moved answers, and served
// here again if the repository moved here. method names the request for
// the failover rules (GET: it changes nothing). It answers every failure
// and returns the answer's status, or forwarded.
func (s *Server) routed(w http.ResponseWriter, r *http.Request, svc gitserve.Service, id auth.Identity, body []byte, method string,
	serve func(w http.ResponseWriter, r *http.Request, sess *gitserve.AuthorizedSession) int) int {
	ctx, end, err := s.gate.Begin(r.Context(), s.kind)
	defer end()
	if err != nil {
		return s.fail(w, r, err)
	}
	rp, err := gitserve.ParseRepo(r.PathValue("owner"), r.PathValue("repo"))
	if err != nil {
		return s.fail(w, r, gitserve.BadPath(svc, r.PathValue("owner")+"/"+r.PathValue("repo"), id, err))
	}
	return s.serveRouted(w, r.WithContext(ctx), svc, rp, id, body, method, serve)
}

func (s *Server) serveRouted(w http.ResponseWriter, r *http.Request, svc gitserve.Service, rp names.Repo, id auth.Identity, body []byte, method string,
	serve func(w http.ResponseWriter, r *http.Request, sess *gitserve.AuthorizedSession) int) int {
	rt, err := s.gate.Route(r.Context(), svc, rp, id)
	if err == nil && rt.Session == nil {
		status, local := s.forward(w, r, rt, body, method)
		if !local {
			return status
		}
		// The failover moved the repository here: this node's answer
		// is final (Open forwards nothing).
		rt.Session, err = s.gate.Open(r.Context(), svc, rt.Repo, id)
	}
	if err != nil && gitserve.Hops(r.Context()) > 0 && gitserve.IsMoved(err) {
		gitserve.WriteMoved(w)
		return http.StatusMisdirectedRequest
	}
	if err != nil {
		return s.fail(w, r, err)
	}
	defer rt.Session.Close()
	return serve(w, r, rt.Session)
}

// forward carries the request to the node rt names; see routed. local
// reports that the repository moved here instead (nothing was answered).
func (s *Server) forward(w http.ResponseWriter, r *http.Request, rt gitserve.Routed, body []byte, method string) (status int, local bool) {
	if s.fwd == nil {
		return s.fail(w, r, gitserve.NotHere(rt)), false
	}
	r.Header.Set(HeaderBase, s.base(r))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.Body, _ = r.GetBody()
	r.ContentLength, r.TransferEncoding = int64(len(body)), nil
	tw := &httpmetrics.StatusWriter{ResponseWriter: w}
	local, err := gitserve.FollowForward(r.Context(), s.rr, gitserve.MoverOf(s.fwd, s.rr), rt, method,
		func(node string) error { return s.fwd.Forward(tw, r, node) })
	switch {
	case local:
		r.Body, _ = r.GetBody() // nothing of it was sent
		return 0, true
	case err != nil && tw.Status == 0:
		return s.fail(w, r, err), false
	case err != nil:
		s.log.Warn("git lfs: forwarded answer failed", zap.String("path", r.URL.Path), zap.Error(err), reqid.Field(r.Context()))
	}
	return forwarded, false
}

// forwarded is the status routed reports for an answer another node
// gave: the owner counts it in its metrics, not this node.
const forwarded = -1

// base is the URL the client reached this server at: RGIT_PUBLIC_URL,
// else what the forwarding node said (peer port), else the request's own
// scheme and Host.
func (s *Server) base(r *http.Request) string {
	if s.publicURL != "" {
		return s.publicURL
	}
	if b := r.Header.Get(HeaderBase); s.peer && b != "" {
		return b
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// repoURL is the LFS endpoint of r under base.
func repoURL(base string, r names.Repo) string {
	return base + "/" + r.String() + ".git/info/lfs"
}

// statParallel bounds the store lookups one batch runs at once.
const statParallel = 16

// batch answers POST …/info/lfs/objects/batch.
func (s *Server) batch(w http.ResponseWriter, r *http.Request) {
	op := "unknown"
	if status := s.batchStatus(w, r, &op); status != forwarded {
		s.metrics.batch(op, status)
	}
}

func (s *Server) batchStatus(w http.ResponseWriter, r *http.Request, op *string) int {
	id, release, err := s.caller(r)
	defer release()
	if err != nil {
		return s.fail(w, r, err)
	}
	var req batchRequest
	body, err := readBody(w, r, s.limits.MaxBatchBytes, &req)
	if err != nil {
		return s.fail(w, r, err)
	}
	transfer, err := checkBatch(&req, s.limits, !id.Authenticated)
	if err != nil {
		return s.fail(w, r, err)
	}
	*op = req.Operation
	svc := gitserve.UploadPack
	if req.Operation == opUpload {
		svc = gitserve.ReceivePack
	}
	// A batch changes nothing: it may follow failover like a read.
	return s.routed(w, r, svc, id, body, http.MethodGet, func(w http.ResponseWriter, r *http.Request, sess *gitserve.AuthorizedSession) int {
		return s.answerBatch(w, r, sess, &req, transfer, !id.Authenticated)
	})
}

// answerBatch is the owner's answer: each object checked, looked up in
// the store (in parallel) and given its actions or its error. anon marks
// the node-served downloads it hands out as a stranger's, held against
// the per-address cap.
func (s *Server) answerBatch(w http.ResponseWriter, r *http.Request, sess *gitserve.AuthorizedSession, req *batchRequest, transfer string, anon bool) int {
	ctx := r.Context()
	rp := sess.Repo
	resp := batchResponse{Transfer: transfer, HashAlgo: "sha256", Objects: make([]objectAnswer, len(req.Objects))}
	present := make([]bool, len(req.Objects))
	errs := make([]error, len(req.Objects))
	sem := make(chan struct{}, statParallel)
	var wg sync.WaitGroup
	for i, o := range req.Objects {
		resp.Objects[i] = objectAnswer{OID: o.OID, Size: o.Size, Error: checkObject(req.Operation, o, s.limits)}
		if resp.Objects[i].Error != nil {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			present[i], errs[i] = s.objects.present(ctx, rp, o.OID, o.Size)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return s.fail(w, r, fmt.Errorf("look up objects of %s: %w: %w", rp, gitserve.ErrUnavailable, err))
	}
	base := s.base(r)
	for i := range resp.Objects {
		a := &resp.Objects[i]
		if a.Error != nil {
			s.metrics.object(req.Operation, "error")
			continue
		}
		acts, e := actionsFor(req.Operation, present[i])
		if a.Error = e; e != nil {
			s.metrics.object(req.Operation, "error")
			continue
		}
		if len(acts) == 0 {
			s.metrics.object(req.Operation, "present")
			continue
		}
		a.Authenticated = true
		a.Actions = map[string]action{}
		for _, kind := range acts {
			act, err := s.action(ctx, base, rp, kind, transfer, objectSpec{OID: a.OID, Size: a.Size}, anon)
			if err != nil {
				return s.fail(w, r, err)
			}
			a.Actions[kind] = act
		}
		s.metrics.object(req.Operation, "action")
	}
	writeJSON(w, http.StatusOK, resp)
	return http.StatusOK
}

// action is one action of a batch answer: on a presigning store the
// store's own URL for the transfer, else the node's signed path; verify
// is always the node's (it reads what the store recorded).
func (s *Server) action(ctx context.Context, base string, rp names.Repo, kind, transfer string, o objectSpec, anon bool) (action, error) {
	ttl := ActionTTL
	a := action{ExpiresIn: int(ttl / time.Second)}
	if transfer == transferSSH {
		return a, nil // the bytes go over the SSH connection
	}
	t := ticket{Op: kind, Owner: rp.Owner(), Name: rp.Name(), OID: o.OID, Size: o.Size, Exp: s.now().Add(ttl).Unix(), Anon: anon}
	key := repo.LFSKey(rp, o.OID)
	switch {
	case kind == opVerify:
		a.Href = repoURL(base, rp) + "/verify?t=" + s.sign.sign(t)
		return a, nil
	case s.objects.pre == nil:
		a.Href = repoURL(base, rp) + "/objects/" + o.OID + "?t=" + s.sign.sign(t)
		return a, nil
	}
	var p objstore.Presigned
	var err error
	if kind == opDownload {
		p, err = s.objects.pre.PresignGet(ctx, key, ttl)
	} else {
		var sum [32]byte
		if _, err := hex.Decode(sum[:], []byte(o.OID)); err != nil {
			return a, fmt.Errorf("object id %s: %w", o.OID, err)
		}
		p, err = s.objects.pre.PresignPut(ctx, key, o.Size, sum, ttl)
	}
	if err != nil {
		return a, err
	}
	s.metrics.presignedBytes(kind, o.Size)
	a.Href, a.Header = p.URL, p.Header
	return a, nil
}

// objectTicket is the ticket of a transfer or verify request, checked
// against op and the path's repository and object, and the repository it
// names (in its canonical spelling, which the store keys use).
func (s *Server) objectTicket(r *http.Request, op string) (ticket, names.Repo, error) {
	t, err := s.sign.open(r.URL.Query().Get("t"), s.now())
	if err != nil {
		return ticket{}, names.Repo{}, err
	}
	tr, terr := names.New(t.Owner, t.Name)
	rp, err := gitserve.ParseRepo(r.PathValue("owner"), r.PathValue("repo"))
	if err != nil || terr != nil || t.Op != op || !rp.Same(tr) {
		return ticket{}, names.Repo{}, errBadTicket
	}
	if oid := r.PathValue("oid"); oid != "" && oid != t.OID {
		return ticket{}, names.Repo{}, errBadTicket
	}
	return t, tr, nil
}

// download serves GET …/info/lfs/objects/{oid}: the node-served download,
// streamed, resumable with a Range from an offset to the end.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	t, rp, err := s.objectTicket(r, opDownload)
	release := func() {}
	if err == nil && t.Anon {
		release, err = s.holdAnon(r)
	}
	defer release()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	off, ranged := rangeStart(r.Header.Get("Range"), t.Size)
	switch {
	case ranged && t.Size == 0:
		off, ranged = 0, false
	case ranged && off >= t.Size:
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", t.Size))
		writeJSON(w, http.StatusRequestedRangeNotSatisfiable, message{Message: "range starts past the object's end"})
		return
	}
	rc, size, err := s.objects.open(r.Context(), rp, t.OID, off)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", fmt.Sprint(size-off))
	if ranged {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, size-1, size))
		w.WriteHeader(http.StatusPartialContent)
	}
	n, err := objstore.Send(w, rc)
	s.metrics.nodeBytes(opDownload, n)
	if err != nil && r.Context().Err() == nil {
		s.log.Warn("git lfs download cut short", zap.String("oid", t.OID), zap.Int64("sent", n), zap.Error(err), reqid.Field(r.Context()))
	}
}

// rangeStart reads a Range header of one range from an offset to the end
// ("bytes=N-", or "bytes=N-M" with M the last byte), what git-lfs sends
// to resume; any other Range is ignored (the whole object is sent).
func rangeStart(h string, size int64) (int64, bool) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return 0, false
	}
	from, to, ok := strings.Cut(spec, "-")
	var off, last int64
	if !ok || from == "" {
		return 0, false
	}
	if _, err := fmt.Sscanf(from, "%d", &off); err != nil || off < 0 || fmt.Sprint(off) != from {
		return 0, false
	}
	if to != "" {
		if _, err := fmt.Sscanf(to, "%d", &last); err != nil || last != size-1 || fmt.Sprint(last) != to {
			return 0, false
		}
	}
	return off, true
}

// upload serves PUT …/info/lfs/objects/{oid}: the node-served upload,
// streamed into the store and checked on the way (objects.put).
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	t, rp, err := s.objectTicket(r, opUpload)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if r.ContentLength >= 0 && r.ContentLength != t.Size {
		s.fail(w, r, fmt.Errorf("body of %d bytes for an object of %d: %w", r.ContentLength, t.Size, ErrSizeMismatch))
		return
	}
	n, err := s.objects.put(r.Context(), rp, t.OID, t.Size, r.Body)
	s.metrics.nodeBytes(opUpload, n)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// verify serves POST …/info/lfs/verify: the object must be in the store
// whole, its size and SHA-256 confirmed (objects.verify).
func (s *Server) verify(w http.ResponseWriter, r *http.Request) {
	t, rp, err := s.objectTicket(r, opVerify)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var o objectSpec
	if _, err := readBody(w, r, 4096, &o); err != nil {
		s.fail(w, r, err)
		return
	}
	if o.OID != t.OID || o.Size != t.Size {
		s.fail(w, r, fmt.Errorf("%w: verify names %s of %d bytes, the link %s of %d", errBadRequest, o.OID, o.Size, t.OID, t.Size))
		return
	}
	if err := s.objects.verify(r.Context(), rp, t.OID, t.Size, false); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
