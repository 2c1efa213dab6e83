// Package sshgit is rgit's SSH front end (gliderlabs/ssh): it accepts
// public-key authentication only and runs exactly two commands,
// `git-upload-pack '<path>'` and `git-receive-pack '<path>'`, through the
// shared transport/service/gitserve gate, and those of a configured Extra
// (extra.go: Git LFS's). Subsystems and any other command are refused
// with a message on stderr and exit status 1; a shell request is greeted
// (below).
//
// Identity: every public key may connect. A key registered to an owner
// (Config.Keys) authenticates as that owner; an unknown key connects as
// anonymous, which can read public repositories and nothing else. This lets
// anyone clone public repos over SSH (as over HTTP) without an account,
// while private repos and pushes still need a registered key. Denials for
// anonymous and for other users read the same ("repository not found"), so
// SSH reveals no more than HTTP does. A shell request (`ssh git@host`) is
// answered with who the key signed in as, GitHub-style, and exit status 1.
//
// What a client can hold is bounded: authentication must finish within
// Config.AuthTimeout; connections that have not authenticated with a
// registered key count against the per-address cap (Config.
// Unauthenticated), and such a connection runs one session at a time;
// a connection has at most MaxChannels sessions and a session at most
// MaxEnv environment variables; a session's input and output move at the
// minimum rate (Config.MinRate, within Config.StallTimeout), and a whole
// fetch request arrives within the protocol's request deadline.
//
// It imports transport/service/gitserve, transport/wire/gitproto,
// transport/wire/clientlimit, storage/auth, gliderlabs/ssh, x/crypto/ssh, zap
// and the standard library.
package sshgit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gliderlabs/ssh"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/clientlimit"
	"github.com/rgit/rgit/transport/wire/gitproto"
	"github.com/rgit/rgit/transport/wire/reqid"
)

// KeyLookup maps a public key to the identity it carries (a user, or a
// deploy key of one repository); *auth.Store implements it. An unknown key
// is an error wrapping auth.ErrUnknownCredential.
type KeyLookup interface {
	KeyIdentity(ctx context.Context, pub gossh.PublicKey) (auth.Identity, error)
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = ssh.ErrServerClosed

// DefaultIdleTimeout closes connections that move no data for this long.
const DefaultIdleTimeout = 5 * time.Minute

// DefaultStallTimeout is how far a session's input (while the server
// waits for it) and output may fall behind the minimum rate; a client
// that sends or reads nothing is cut off after it.
const DefaultStallTimeout = time.Minute

// DefaultAuthTimeout is how long a connection may take to authenticate.
const DefaultAuthTimeout = 30 * time.Second

// Fixed bounds of one connection: concurrent sessions (channels), and the
// environment variables (requests and bytes) one session may set. git
// needs one session and GIT_PROTOCOL.
const (
	MaxChannels = 8
	MaxEnv      = 16
	MaxEnvBytes = 4096
)

// Config configures the SSH server.
type Config struct {
	// Addr is the listen address for ListenAndServe (RGIT_SSH_ADDR,
	// default ":2222").
	Addr string
	// HostKeyPath is the host private key (RGIT_HOST_KEY). If the file does
	// not exist an ed25519 key is generated and written there (OpenSSH
	// PEM, mode 0600). Required.
	HostKeyPath string
	// Resolver finds repositories and opens sessions. Required.
	Resolver gitserve.Resolver
	// Keys maps public keys to owners. Required.
	Keys KeyLookup
	// Protocol runs the git protocol; nil means gitserve.GitProtocol.
	Protocol gitserve.Protocol
	// Agent is advertised to clients; "" means the engine default.
	Agent string
	// IdleTimeout closes idle connections; 0 means DefaultIdleTimeout,
	// negative means never.
	IdleTimeout time.Duration
	// StallTimeout is how far a session's input, while the server waits
	// for it, and its output may fall behind MinRate (time the server
	// spends computing does not count); a client that sends or reads
	// nothing is cut off after it. 0 means DefaultStallTimeout, negative
	// means never.
	StallTimeout time.Duration
	// MinRate is the minimum transfer rate in bytes per second; 0: the
	// stall time alone.
	MinRate int64
	// AuthTimeout bounds the time from connecting to authenticated; 0
	// means DefaultAuthTimeout, negative means never.
	AuthTimeout time.Duration
	// Unauthenticated, if set, caps per client address the connections
	// that have not authenticated with a registered key (shared with the
	// HTTP front end): anonymous connections keep their unit until they
	// close. Over it a connection is closed at once.
	Unauthenticated *clientlimit.PerAddr
	Logger          *zap.Logger
	// Metrics records each session; nil means none. Use
	// (*gitserve.PromMetrics).For("ssh").
	Metrics gitserve.Metrics
	// Forward runs sessions on repositories another node owns on that node
	// (cluster mode; transport/frontend/peer.SessionClient). nil: they fail as
	// unavailable.
	Forward gitserve.SessionForwarder
	// Rerouter decides where an upload-pack goes after Forward failed to
	// connect to the owner; nil: the failure is final.
	Rerouter gitserve.Rerouter
	// Extra serves commands beside git's own (Git LFS); nil: none.
	Extra Extra
}

// Server is the SSH front end.
type Server struct {
	srv     *ssh.Server
	gate    *gitserve.Gate
	keys    KeyLookup
	log     *zap.Logger
	metrics gitserve.Metrics
	forward gitserve.SessionForwarder
	reroute gitserve.Rerouter
	extra   Extra
	rate    clientlimit.Rate // Grace 0: no pacing
	authDur time.Duration    // 0: never
	anon    *clientlimit.PerAddr
	hostKey gossh.PublicKey
	// handlers counts running session handlers, so Shutdown and Close
	// return only once every session has let go of its repository.
	handlers sync.WaitGroup
	// mu guards stopping: once set, no handler joins handlers, so Wait
	// never races an Add (a connection accepted just before the close).
	mu       sync.Mutex
	stopping bool
}

// NewServer validates cfg, loads or creates the host key and returns a
// server ready to Serve.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Keys == nil {
		return nil, errors.New("sshgit: Config.Keys is required")
	}
	if cfg.HostKeyPath == "" {
		return nil, errors.New("sshgit: Config.HostKeyPath (RGIT_HOST_KEY) is required")
	}
	gate, err := gitserve.NewGate(cfg.Resolver, cfg.Protocol, cfg.Agent)
	if err != nil {
		return nil, fmt.Errorf("sshgit: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	signer, created, err := loadOrCreateHostKey(cfg.HostKeyPath)
	if err != nil {
		return nil, fmt.Errorf("sshgit: host key (RGIT_HOST_KEY): %w", err)
	}
	if created {
		log.Warn("generated new ssh host key", zap.String("path", cfg.HostKeyPath),
			zap.String("fingerprint", gossh.FingerprintSHA256(signer.PublicKey())))
	}
	if err := writePublicKey(cfg.HostKeyPath, signer.PublicKey()); err != nil {
		// A key mounted read-only (a Kubernetes secret) has no room beside
		// it; the known_hosts line is in the start-up log and rgit-admin.
		log.Info("ssh host key: public key not written beside it", zap.Error(err))
	}
	s := &Server{gate: gate, keys: cfg.Keys, log: log, metrics: cfg.Metrics, forward: cfg.Forward, reroute: cfg.Rerouter,
		anon: cfg.Unauthenticated, hostKey: signer.PublicKey(), extra: cfg.Extra}
	if s.metrics == nil {
		s.metrics = gitserve.NopMetrics{}
	}
	idle := cfg.IdleTimeout
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	if idle < 0 {
		idle = 0
	}
	s.rate = clientlimit.Rate{Grace: orDefault(cfg.StallTimeout, DefaultStallTimeout), BytesPerSec: cfg.MinRate}
	s.authDur = orDefault(cfg.AuthTimeout, DefaultAuthTimeout)
	s.srv = &ssh.Server{
		Addr: cfg.Addr,
		Handler: func(sess ssh.Session) {
			if !s.join() {
				sess.Exit(1)
				return
			}
			defer s.handlers.Done()
			s.handle(sess)
		},
		IdleTimeout: idle,
		// Any key may connect; the owner (or anonymous) is decided per
		// session from the key the connection authenticated with.
		PublicKeyHandler: func(ssh.Context, ssh.PublicKey) bool { return true },
		// Grant a pty request without allocating anything: git never
		// asks for one, and a person typing `ssh git@host` (which asks)
		// gets the greeting instead of "PTY allocation request failed",
		// which -tt makes fatal.
		PtyCallback:          func(ssh.Context, ssh.Pty) bool { return true },
		ConnCallback:         s.accept,
		ServerConfigCallback: s.serverConfig,
		// Sessions only, within the channel and environment bounds. No
		// port forwarding, no subsystems (sftp): the zero values of the
		// remaining callbacks refuse them.
		ChannelHandlers: map[string]ssh.ChannelHandler{"session": s.sessionChannel},
		Version:         "rgit",
	}
	s.srv.AddHostKey(signer)
	return s, nil
}

// ListenAndServe listens on Config.Addr and serves.
func (s *Server) ListenAndServe() error {
	addr := s.srv.Addr
	if addr == "" {
		addr = ":2222"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sshgit: listen %s: %w", addr, err)
	}
	return s.Serve(ln)
}

// Serve accepts connections on ln until Shutdown or Close; it then returns
// ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Shutdown stops accepting connections and waits for open connections to
// finish until ctx is done; then it closes whatever is left and returns
// ctx's error. Either way every session handler has returned by then.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if ctx.Err() != nil {
		if cerr := s.srv.Close(); cerr != nil && !errors.Is(cerr, ssh.ErrServerClosed) {
			s.log.Warn("ssh close after shutdown deadline", zap.Error(cerr))
		}
		err = ctx.Err()
	}
	s.waitHandlers()
	return err
}

// Close closes the listeners and all connections immediately and waits for
// the session handlers, whose contexts that cancels, to return.
func (s *Server) Close() error {
	err := s.srv.Close()
	s.waitHandlers()
	return err
}

// join registers a starting session handler; false once the server stops.
func (s *Server) join() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.handlers.Add(1)
	return true
}

// waitHandlers stops new handlers from joining and waits for the rest.
func (s *Server) waitHandlers() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.handlers.Wait()
}

// handle runs one session. gliderlabs calls it for "exec" and "shell"
// requests; the session ends (exit 0) when it returns unless it set a
// status.
func (s *Server) handle(sess ssh.Session) {
	if sess.RawCommand() == "" {
		s.greet(sess)
		return
	}
	start := time.Now()
	op := "ssh"
	var stats gitserve.Stats
	// SSH has no header to take an id from: every session gets a new one,
	// which forwarding carries to the owner.
	ctx := reqid.With(sess.Context(), reqid.New())
	err := s.serve(ctx, sess, &op, &stats)
	class := gitserve.Classify(err)
	s.metrics.Observe(op, class.String(), time.Since(start), stats.BytesIn, stats.BytesOut)
	if err == nil {
		_ = sess.Exit(0)
		s.log.Debug("git ssh session", zap.String("op", op), zap.String("user", sess.User()),
			zap.String("remote", sess.RemoteAddr().String()), zap.Duration("duration", time.Since(start)), reqid.Field(ctx))
		return
	}
	msg := gitserve.ClientMessage(err)
	var ue *usageError
	var le *gitproto.LimitError
	var be *gitproto.BusyError
	switch {
	case errors.As(err, &ue):
		msg = ue.msg
	case errors.As(err, &le):
		// Names a limit and its setting, nothing private.
		msg = le.Error()
	case errors.As(err, &be):
		msg = be.Error()
	}
	s.stderr(sess, "ERROR: "+msg+"\n")
	_ = sess.Exit(1)

	fields := []zap.Field{zap.String("op", op), zap.String("user", sess.User()),
		zap.String("remote", sess.RemoteAddr().String()), zap.String("command", truncate(sess.RawCommand(), 200)),
		zap.String("class", class.String()), zap.Error(err), reqid.Field(ctx)}
	switch class {
	case gitserve.Internal:
		s.log.Error("git ssh session failed", fields...)
	case gitserve.Unavailable:
		s.log.Warn("git ssh session failed", fields...)
	default:
		s.log.Info("git ssh session refused", fields...)
	}
}

func (s *Server) serve(ctx context.Context, sess ssh.Session, op *string, stats *gitserve.Stats) error {
	raw := sess.RawCommand()
	if verb, _, _ := strings.Cut(raw, " "); s.extra != nil && s.extra.Serves(verb) {
		return s.serveExtra(ctx, sess, raw, op)
	}
	svc, path, err := ParseCommand(raw)
	if err != nil {
		return err
	}
	*op = strings.TrimPrefix(svc.String(), "git-")
	repo, err := gitserve.ParsePath(path)
	if err != nil {
		return gitserve.BadPath(svc, path, auth.Anonymous, err)
	}
	id, err := s.identity(sess)
	if err != nil {
		return err
	}
	opt := gitproto.Options{Protocol: gitproto.ParseProtocol(envValue(sess.Environ(), "GIT_PROTOCOL"))}
	req := gitserve.SessionRequest{Service: svc, Repo: repo, Identity: id, Protocol: opt.Protocol}
	ctx, end, err := s.gate.Begin(ctx, actors.KindSSH)
	defer end()
	if err != nil {
		return err
	}
	if s.rate.Grace <= 0 {
		*stats, err = s.gate.ServeRouted(ctx, s.forward, s.reroute, req, sess, sess, opt)
		return err
	}
	in, stop := pipeInput(sess)
	defer stop()
	paced := clientlimit.NewReader(in, s.rate)
	opt.Input = paced
	out := newKillWriter(sess, func() { closeConn(sess) })
	defer out.stop()
	*stats, err = s.gate.ServeRouted(ctx, s.forward, s.reroute, req, paced, clientlimit.NewWriter(out, s.rate), opt)
	return err
}

// identity maps the connection's public key to an owner. Unknown keys are
// anonymous (see the package comment); a failing lookup is an error, not a
// silent downgrade, so an owner never sees "not found" for an outage.
func (s *Server) identity(sess ssh.Session) (auth.Identity, error) {
	// sess.PublicKey is the last key the public-key callback saw. Since
	// x/crypto v0.31 (CVE-2024-45337) that is always the key the client
	// authenticated with, not merely one it asked about.
	pub := sess.PublicKey()
	if pub == nil {
		return auth.Anonymous, nil
	}
	id, err := s.keys.KeyIdentity(sess.Context(), pub)
	if errors.Is(err, auth.ErrUnknownCredential) {
		return auth.Anonymous, nil
	}
	if err != nil {
		return auth.Anonymous, fmt.Errorf("key lookup: %w: %w", gitserve.ErrUnavailable, err)
	}
	return id, nil
}

// usageError is a refused command; its message is shown as is. It counts
// as a client protocol error (gitserve.BadRequest).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return gitproto.ErrProtocol }

// ParseCommand parses an SSH exec command. Accepted, and nothing else:
//
//	git-upload-pack '<path>'     git-receive-pack '<path>'
//	git-upload-pack <path>       git-receive-pack <path>
//
// where path is "owner/name[.git]" with an optional leading "/" (git sends
// the URL path quoted). No "~" forms, no other quoting, no extra arguments.
func ParseCommand(raw string) (gitserve.Service, string, error) {
	verb, arg, ok := strings.Cut(raw, " ")
	svc, known := gitserve.ParseService(verb)
	if !known {
		return 0, "", &usageError{fmt.Sprintf("unsupported command %q: only git-upload-pack and git-receive-pack are allowed", truncate(verb, 64))}
	}
	if !ok || arg == "" {
		return 0, "", &usageError{verb + ": missing repository path"}
	}
	if len(arg) >= 2 && arg[0] == '\'' && arg[len(arg)-1] == '\'' {
		arg = arg[1 : len(arg)-1]
	}
	if arg == "" || strings.ContainsAny(arg, "' \t\r\n\\\"`$;&|<>*?~") {
		return 0, "", &usageError{verb + ": invalid repository path"}
	}
	return svc, arg, nil
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
