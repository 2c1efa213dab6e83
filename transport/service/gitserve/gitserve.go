package gitserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// RepoInfo is the repository metadata the access rules need.
type RepoInfo = auth.RepoInfo

// Resolver finds repositories and opens git sessions on them. It is
// implemented by the actor layer (routing to the owning repo actor).
type Resolver interface {
	// Lookup returns repo metadata without opening it for a session, at
	// the same cost whether the repository is missing or private; an
	// error wrapping auth.ErrRepoNotFound if absent. owner and name may
	// be spelled in any letter case; the answer has the canonical
	// spelling.
	Lookup(ctx context.Context, owner, name string) (RepoInfo, error)
	// Session opens the repo for one git session (routes to its repo
	// actor); the caller calls release when done. Errors wrapping
	// auth.ErrRepoNotFound mean the repo vanished since Lookup; errors
	// wrapping ErrUnavailable mean "try again later" (503).
	Session(ctx context.Context, owner, name string, write bool) (b gitproto.Backend, release func(), err error)
}

// SessionTracker is implemented by resolvers that keep every git session
// a node serves as an actor (the engine: actors.Node.BeginSession). A
// front end begins the session before anything else and ends it when the
// session is over, local or forwarded; ctx carries it down to Session.
type SessionTracker interface {
	BeginSession(ctx context.Context, kind string) (context.Context, func(), error)
}

// DenialObserver is implemented by resolvers whose Lookup starts work
// ahead of the access decision (the engine lists the database the open
// would read): Gate.Open tells them of each denial, so that such work is
// dropped, never used.
type DenialObserver interface {
	Denied(owner, name string)
}

// Session kinds, as front ends name them to Begin.
const (
	KindHTTP      = "http"
	KindSSH       = "ssh"
	KindForwarded = "forwarded"
	KindAPI       = "api"
)

// Authoritative is implemented by backends that know the repository's
// settings as its writer holds them. Lookup's metadata may lag a
// visibility change made on another node by a cache TTL; the owner checks
// access again against these before serving (defence in depth).
type Authoritative interface {
	RepoInfo() RepoInfo
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

// ParsePath splits "/owner/name[.git]" (leading slash optional) into owner
// and raw name. It checks only the shape; Open validates the names.
func ParsePath(p string) (owner, rawName string, err error) {
	p = strings.TrimPrefix(p, "/")
	owner, rawName, ok := strings.Cut(p, "/")
	if !ok || owner == "" || rawName == "" || strings.Contains(rawName, "/") {
		return "", "", fmt.Errorf("%w: %q", ErrBadPath, p)
	}
	return owner, rawName, nil
}

// CleanRepo validates owner and a raw repository name from a URL or SSH
// command (storage/names.Clean: one optional ".git" suffix is stripped).
func CleanRepo(owner, rawName string) (string, string, error) {
	r, err := names.Clean(owner, rawName)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrBadPath, err)
	}
	return r.Owner(), r.Name(), nil
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
	s := fmt.Sprintf("%s %s/%s: %s", e.Service, e.Owner, e.Name, e.Decision)
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
func (g *Gate) Begin(ctx context.Context, kind string) (context.Context, func(), error) {
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
	Service     Service
	Owner, Name string
	id          auth.Identity
	gate        *Gate
	backend     gitproto.Backend
	release     func()
}

// Open validates the repository name, looks it up (metadata only: nothing
// is opened for a caller who may not proceed, and a private repository
// costs what a missing one does), applies auth.Decide for id and, if
// allowed, opens a session on the canonical spelling, deciding again
// against the backend's own settings when it is Authoritative. It never reads request bodies, so a
// front end can answer a denial before the client sends one. Denials are
// *DeniedError; ErrBadPath paths are NotFound (no repository can exist
// there, so nothing is revealed by a 404).
func (g *Gate) Open(ctx context.Context, svc Service, owner, rawName string, id auth.Identity) (*AuthorizedSession, error) {
	owner, name, err := CleanRepo(owner, rawName)
	if err != nil {
		return nil, &DeniedError{Decision: auth.NotFound, Service: svc, Owner: owner, Name: rawName, Identity: id, Err: err}
	}
	info, err := g.resolver.Lookup(ctx, owner, name)
	found := err == nil
	if err != nil && !errors.Is(err, auth.ErrRepoNotFound) {
		return nil, fmt.Errorf("lookup %s/%s: %w", owner, name, err)
	}
	if found && (!names.Same(info.Repo.Owner(), owner) || !names.Same(info.Repo.Name(), name)) {
		// A resolver answering for another repo is a bug; refuse rather
		// than apply that repo's visibility to this one.
		return nil, fmt.Errorf("lookup %s/%s: resolver returned %s", owner, name, info.Repo)
	}
	if found {
		// Any spelling reaches the repository under its canonical one.
		owner, name = info.Repo.Owner(), info.Repo.Name()
	}
	if d := auth.Decide(id, info, found, svc.Access()); d != auth.Allow {
		if o, ok := g.resolver.(DenialObserver); ok {
			o.Denied(owner, name)
		}
		var cause error
		if !found {
			cause = auth.ErrRepoNotFound
		}
		return nil, &DeniedError{Decision: d, Service: svc, Owner: owner, Name: name, Identity: id, Err: cause}
	}
	b, release, err := g.resolver.Session(ctx, owner, name, svc == ReceivePack)
	if errors.Is(err, auth.ErrRepoNotFound) {
		// Deleted between Lookup and Session: answer as Decide would now.
		d := auth.Decide(id, RepoInfo{}, false, svc.Access())
		return nil, &DeniedError{Decision: d, Service: svc, Owner: owner, Name: name, Identity: id, Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("open session %s/%s: %w", owner, name, err)
	}
	if release == nil {
		release = func() {}
	}
	if a, ok := b.(Authoritative); ok {
		if d := auth.Decide(id, a.RepoInfo(), true, svc.Access()); d != auth.Allow {
			release()
			return nil, &DeniedError{Decision: d, Service: svc, Owner: owner, Name: name, Identity: id}
		}
	}
	return &AuthorizedSession{Service: svc, Owner: owner, Name: name, id: id, gate: g, backend: b, release: release}, nil
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
		return st, fmt.Errorf("%s %s/%s: %w", s.Service, s.Owner, s.Name, err)
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
func (g *Gate) Serve(ctx context.Context, svc Service, owner, rawName string, id auth.Identity, in io.Reader, out io.Writer, opt gitproto.Options) (Stats, error) {
	sess, err := g.Open(ctx, svc, owner, rawName, id)
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
