package gitserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// Resolver finds repositories and opens git sessions on them. It is
// implemented by the actor layer (routing to the owning repo actor).
type Resolver interface {
	// Lookup returns repo metadata without opening it for a session, at
	// the same cost whether the repository is missing or private; an
	// error wrapping auth.ErrRepoNotFound if absent. r may be spelled in
	// any letter case; the answer has the canonical spelling. r was
	// validated where the request entered (ParsePath): nothing below the
	// front ends validates a name again.
	Lookup(ctx context.Context, r names.Repo) (auth.RepoInfo, error)
	// Session routes the repository once and, when this node serves it,
	// opens it for one git session (its repo actor); the caller calls
	// Release when done. A repository another node serves is answered
	// as a value (Resolved.Node), not an error. Errors wrapping
	// auth.ErrRepoNotFound mean the repo vanished since Lookup; errors
	// wrapping ErrUnavailable mean "try again later" (503).
	Session(ctx context.Context, r names.Repo, write bool) (Resolved, error)
}

// Resolved is a Resolver's routing decision for one session: served
// here over Backend (Release when done), or by the node Node names.
type Resolved struct {
	Backend gitproto.Backend
	Release func()
	Node    string // another node serves it; Backend is nil
}

// SessionTracker is implemented by resolvers that keep every git session
// a node serves as an actor (the engine: actors.Node.BeginSession). A
// front end begins the session before anything else and ends it when the
// session is over, local or forwarded; ctx carries it down to Session.
type SessionTracker interface {
	BeginSession(ctx context.Context, kind actors.SessionKind) (context.Context, func(), error)
}

// DenialObserver is implemented by resolvers whose Lookup starts work
// ahead of the access decision (the engine lists the database the open
// would read): Gate.Open tells them of each denial, so that such work is
// dropped, never used.
type DenialObserver interface {
	Denied(r names.Repo)
}

// Authoritative is implemented by backends that know the repository's
// settings as its writer holds them. Lookup's metadata may lag a
// visibility change made on another node by a cache TTL; the owner checks
// access again against these before serving (defence in depth).
type Authoritative interface {
	RepoInfo() auth.RepoInfo
}

// Protocol runs one git service over a byte stream. The production one is
// GitProtocol (rgit's own, on transport/wire/gitproto); tests substitute a fake.
type Protocol interface {
	UploadPack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error
	ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error
}

// Sentinel errors callers branch on.
var (
	// ErrBadPath: the request names no possible repository (bad syntax,
	// reserved owner). It is answered like a missing repository.
	ErrBadPath = errors.New("invalid repository path")
	// ErrUnavailable: the repository cannot be served right now (ownership
	// claim failed, node draining). Resolvers wrap it; clients get 503.
	ErrUnavailable = errors.New("repository temporarily unavailable")
)

// Service is a git service a client can ask for.
type Service int

const (
	UploadPack Service = iota + 1
	ReceivePack
)

// String is the git service name ("git-upload-pack").
func (s Service) String() string {
	switch s {
	case UploadPack:
		return "git-upload-pack"
	case ReceivePack:
		return "git-receive-pack"
	}
	return "unknown"
}

// Access is what the service does to the repository.
func (s Service) Access() auth.Access {
	if s == ReceivePack {
		return auth.Write
	}
	return auth.Read
}

// ParseService maps "git-upload-pack"/"git-receive-pack" to a Service.
func ParseService(name string) (Service, bool) {
	switch name {
	case "git-upload-pack":
		return UploadPack, true
	case "git-receive-pack":
		return ReceivePack, true
	}
	return 0, false
}

// ParsePath reads a repository path as a front end receives it,
// "/owner/name[.git]" (the leading slash optional, one ".git" suffix
// stripped), and validates it (storage/names): the one check of the name
// on this node, made where the request enters. The layers below (the
// gate, the engine, the actors) take the names.Repo and never check
// again. An invalid path is ErrBadPath.
func ParsePath(p string) (names.Repo, error) {
	r, err := names.Parse(strings.TrimPrefix(p, "/"))
	if err != nil {
		return names.Repo{}, fmt.Errorf("%w: %w", ErrBadPath, err)
	}
	return r, nil
}

// ParseRepo is ParsePath for a path already split into owner and raw
// name (an HTTP route's path values).
func ParseRepo(owner, rawName string) (names.Repo, error) {
	r, err := names.Clean(owner, rawName)
	if err != nil {
		return names.Repo{}, fmt.Errorf("%w: %w", ErrBadPath, err)
	}
	return r, nil
}

// BadPath is the denial of a request whose path names no possible
// repository (err from ParsePath or ParseRepo): it is answered like a
// missing repository, since nothing can exist there.
func BadPath(svc Service, path string, id auth.Identity, err error) *DeniedError {
	return &DeniedError{Decision: auth.NotFound, Service: svc, Name: path, Identity: id, Err: err}
}

// DeniedError is returned when the access rules refuse a request.
type DeniedError struct {
	Decision    auth.Decision
	Service     Service
	Owner, Name string
	// Identity is the caller's, for the message it is shown
	// (ClientMessage).
	Identity auth.Identity
	// Err is the underlying cause (ErrBadPath, auth.ErrRepoNotFound, a
	// bad credential) if any.
	Err error
}

func (e *DeniedError) Error() string {
	repo := e.Name // a bad path (BadPath) has no owner
	if e.Owner != "" {
		repo = e.Owner + "/" + e.Name
	}
	s := fmt.Sprintf("%s %s: %s", e.Service, repo, e.Decision)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *DeniedError) Unwrap() error { return e.Err }

// Gate decides access and runs sessions; one is shared by a front end.
type Gate struct {
	resolver Resolver
	engine   Protocol
	agent    string
}

// NewGate returns a Gate. engine nil means GitProtocol; agent "" means the
// engine's default.
func NewGate(r Resolver, engine Protocol, agent string) (*Gate, error) {
	if r == nil {
		return nil, errors.New("gitserve: nil Resolver")
	}
	if engine == nil {
		engine = GitProtocol{}
	}
	return &Gate{resolver: r, engine: engine, agent: agent}, nil
}

// Begin starts a git session of kind through the resolver's SessionTracker
// (a no-op for resolvers without one) and returns the context to serve it
// under and the function that ends it. A failure is ErrUnavailable.
func (g *Gate) Begin(ctx context.Context, kind actors.SessionKind) (context.Context, func(), error) {
	t, ok := g.resolver.(SessionTracker)
	if !ok {
		return ctx, func() {}, nil
	}
	ctx, end, err := t.BeginSession(ctx, kind)
	if err != nil {
		return ctx, func() {}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return ctx, end, nil
}

// AuthorizedSession is one authorised git session; Close it when done.
type AuthorizedSession struct {
	Service Service
	// Repo is the repository in its canonical spelling.
	Repo    names.Repo
	id      auth.Identity
	gate    *Gate
	backend gitproto.Backend
	release func()
}

// Routed is the gate's routing decision for one authorized request,
// made once (Gate.Route): serve it here on Session, or forward it to
// Node. Repo is the repository's canonical spelling.
type Routed struct {
	Session *AuthorizedSession // nil: forward to Node
	Node    string
	Repo    names.Repo
}

// Route looks the repository up (metadata only: nothing is opened for a
// caller who may not proceed, and a private repository costs what a
// missing one does), applies auth.Decide for id and, if allowed, routes
// it once: a session here on the canonical spelling (deciding again
// against the backend's own settings when it is Authoritative), or the
// node that serves it. It never reads request bodies, so a front end can
// answer a denial before the client sends one. Denials are *DeniedError.
func (g *Gate) Route(ctx context.Context, svc Service, r names.Repo, id auth.Identity) (Routed, error) {
	info, err := g.resolver.Lookup(ctx, r)
	found := err == nil
	if err != nil && !errors.Is(err, auth.ErrRepoNotFound) {
		return Routed{}, fmt.Errorf("lookup %s: %w", r, err)
	}
	if found && !info.Repo.Same(r) {
		// A resolver answering for another repo is a bug; refuse rather
		// than apply that repo's visibility to this one.
		return Routed{}, fmt.Errorf("lookup %s: resolver returned %s", r, info.Repo)
	}
	if found {
		// Any spelling reaches the repository under its canonical one.
		r = info.Repo
	}
	denied := func(d auth.Decision, cause error) *DeniedError {
		return &DeniedError{Decision: d, Service: svc, Owner: r.Owner(), Name: r.Name(), Identity: id, Err: cause}
	}
	if d := auth.Decide(id, info, found, svc.Access()); d != auth.Allow {
		if o, ok := g.resolver.(DenialObserver); ok {
			o.Denied(r)
		}
		var cause error
		if !found {
			cause = auth.ErrRepoNotFound
		}
		return Routed{}, denied(d, cause)
	}
	res, err := g.resolver.Session(ctx, r, svc == ReceivePack)
	if errors.Is(err, auth.ErrRepoNotFound) {
		// Deleted between Lookup and Session: answer as Decide would now.
		return Routed{}, denied(auth.Decide(id, auth.RepoInfo{}, false, svc.Access()), err)
	}
	if err != nil {
		return Routed{}, fmt.Errorf("open session %s: %w", r, err)
	}
	if res.Backend == nil {
		if res.Node == "" {
			return Routed{}, fmt.Errorf("open session %s: resolver named neither a backend nor a node", r)
		}
		// Served by another node, which decides access again itself.
		return Routed{Node: res.Node, Repo: r}, nil
	}
	release := res.Release
	if release == nil {
		release = func() {}
	}
	if a, ok := res.Backend.(Authoritative); ok {
		if d := auth.Decide(id, a.RepoInfo(), true, svc.Access()); d != auth.Allow {
			release()
			return Routed{}, denied(d, nil)
		}
	}
	sess := &AuthorizedSession{Service: svc, Repo: r, id: id, gate: g, backend: res.Backend, release: release}
	return Routed{Session: sess, Repo: r}, nil
}

// Open is Route for a request that is served here or not at all: a
// front end without a forwarder, or one the failover sent back here (its
// answer is final). A repository another node serves is ErrUnavailable.
func (g *Gate) Open(ctx context.Context, svc Service, r names.Repo, id auth.Identity) (*AuthorizedSession, error) {
	rt, err := g.Route(ctx, svc, r, id)
	if err != nil {
		return nil, err
	}
	if rt.Session == nil {
		return nil, NotHere(rt)
	}
	return rt.Session, nil
}

// NotHere is the error of a request for a repository another node serves
// that this node cannot forward (503: the client retries).
func NotHere(rt Routed) error {
	return fmt.Errorf("%s is served by node %s: %w", rt.Repo, rt.Node, ErrUnavailable)
}

// Stats counts a session's traffic.
type Stats struct {
	BytesIn, BytesOut int64
}

// Run runs the engine for the session's service. opt.Agent defaults to the
// Gate's agent. Stats are valid even when err != nil.
func (s *AuthorizedSession) Run(ctx context.Context, in io.Reader, out io.Writer, opt gitproto.Options) (Stats, error) {
	if opt.Agent == "" {
		opt.Agent = s.gate.agent
	}
	cin := &countingReader{r: in}
	if in == nil {
		cin.r = eofReader{}
	}
	cout := &countingWriter{w: out}
	ctx = auth.WithIdentity(ctx, s.id) // who, for the audit lines below
	var err error
	switch s.Service {
	case UploadPack:
		err = s.gate.engine.UploadPack(ctx, s.backend, cin, cout, opt)
	case ReceivePack:
		err = s.gate.engine.ReceivePack(ctx, s.backend, cin, cout, opt)
	default:
		err = fmt.Errorf("unknown service %d", s.Service)
	}
	st := Stats{BytesIn: cin.n.Load(), BytesOut: cout.n.Load()}
	if err != nil {
		return st, fmt.Errorf("%s %s: %w", s.Service, s.Repo, err)
	}
	return st, nil
}

// Backend is the repository the session was opened on, for front ends
// that read it directly rather than run a protocol engine (the read API).
// Valid until Close.
func (s *AuthorizedSession) Backend() gitproto.Backend { return s.backend }

// Close releases the session's hold on the repository. Idempotent.
func (s *AuthorizedSession) Close() {
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// Serve is Open + Run + Close for front ends with nothing to do between
// the decision and the stream (SSH).
func (g *Gate) Serve(ctx context.Context, svc Service, r names.Repo, id auth.Identity, in io.Reader, out io.Writer, opt gitproto.Options) (Stats, error) {
	sess, err := g.Open(ctx, svc, r, id)
	if err != nil {
		return Stats{}, err
	}
	defer sess.Close()
	return sess.Run(ctx, in, out, opt)
}

// The counters are atomic because an engine may leave a reader goroutine
// blocked on the client stream after it returns.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
