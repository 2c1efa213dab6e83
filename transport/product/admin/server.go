package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/frontend/peer"
	"github.com/rgit/rgit/transport/product/hooks"
	"github.com/rgit/rgit/transport/wire/peertls"
)

// Server executes admin commands on one node.
type Server struct {
	Node   *actors.Node
	Deps   repo.Deps
	Auth   *auth.Store
	Secret string
	Log    *zap.Logger
	// GCMinAge is how old an unreferenced pack must be before gc deletes it.
	GCMinAge time.Duration
	// Peers, in cluster mode, finds other nodes: commands on a repository
	// owned elsewhere are relayed to its owner. nil: single node.
	Peers PeerAddrs
	// PeerTLS is the peer ports' TLS, for relaying to owners; nil: plaintext.
	PeerTLS *peertls.Config
	// Self is the node's name (RGIT_SELF) in cluster mode, for status and
	// where.
	Self string
	// Version describes the node's build (transport/node/version), for status and
	// version: during a rollout it shows which nodes run what.
	Version string
	// Rollout reports the node's rollout status (rollout-status); nil:
	// the command fails.
	Rollout func(context.Context) (RolloutStatus, error)
	// Cache is the read API's answer cache (RGIT_REDIS_URL); nil: none.
	Cache actors.CachePurger
	// KnownHosts returns the known_hosts line of the node's SSH host key
	// for clients reaching it as name (HostKey); nil: no SSH.
	KnownHosts func(name string) (string, error)
	// Hooks sends test-hook's pings; nil: test-hook fails.
	Hooks *hooks.Service

	once     sync.Once
	handlers *peer.Handlers
}

// purge runs after a change that must not stay visible through the cache
// (visibility flip, delete, purge-cache). It fails loudly: the change
// itself stays done, and the error names purge-cache as the retry.
func (s *Server) purge(ctx context.Context, r names.Repo, did string) (Done, error) {
	if s.Cache == nil {
		return Done{Output: did}, nil
	}
	if err := s.Cache.Purge(ctx, r); err != nil {
		return Done{}, fmt.Errorf("%s, but %w", did, err)
	}
	return Done{Output: did + "; cached answers purged"}, nil
}

// ServeHTTP answers the admin messages in peer envelopes on
// peer.PathMsg, for callers presenting the peer secret (everyone else gets
// 401). transport/node mounts it on the peer stream port and adds the leader's
// messages to Handlers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != peer.PathMsg {
		http.NotFound(w, r)
		return
	}
	if !authorized(w, r, s.Secret, s.Log) {
		return
	}
	s.Handlers().ServeHTTP(w, r)
}

// Handlers is the node's envelope router with every admin message
// registered; made on first use.
func (s *Server) Handlers() *peer.Handlers {
	s.once.Do(func() {
		s.handlers = peer.NewHandlers(s.Log)
		s.register(s.handlers)
	})
	return s.handlers
}

// register adds one handler per admin message.
func (s *Server) register(h *peer.Handlers) {
	handle(s, h, s.createRepo)
	handle(s, h, s.deleteRepo)
	handle(s, h, s.fork)
	handleProgress(s, h, s.repack)
	handle(s, h, s.gc)
	handle(s, h, s.setVisibility)
	handle(s, h, s.setHead)
	handle(s, h, s.purgeCache)
	handle(s, h, s.grant)
	handle(s, h, s.revoke)
	handle(s, h, s.listAccess)
	handle(s, h, s.protect)
	handle(s, h, s.unprotect)
	handle(s, h, s.addToken)
	handle(s, h, s.listTokens)
	handle(s, h, s.revokeToken)
	handle(s, h, s.addKey)
	handle(s, h, s.addDeployKey)
	handle(s, h, s.listKeys)
	handle(s, h, s.removeKey)
	handle(s, h, s.listRepos)
	handle(s, h, s.status)
	handle(s, h, s.where)
	handle(s, h, s.version)
	handle(s, h, s.rolloutStatus)
	handle(s, h, s.hostKey)
	handle(s, h, s.addHook)
	handle(s, h, s.listHooks)
	handle(s, h, s.removeHook)
	handle(s, h, s.testHook)
	handle(s, h, s.listDeliveries)
	handle(s, h, s.redeliver)
}

// handle registers fn as the handler of M (handleProgress).
func handle[M Msg, R Result](s *Server, h *peer.Handlers, fn func(context.Context, M) (R, error)) {
	handleProgress(s, h, func(ctx context.Context, m M, _ pack.ProgressFunc) (R, error) { return fn(ctx, m) })
}

// handleProgress registers fn as the handler of M, streamed: a message
// about a repository another node owns goes to the owner (relay); any
// other runs here, logged, its failure classified for rgit-admin's exit
// status (a *peer.CodedError).
func handleProgress[M Msg, R Result](s *Server, h *peer.Handlers, fn func(context.Context, M, pack.ProgressFunc) (R, error)) {
	peer.HandleStream(h, func(ctx context.Context, m M, progress func(string)) (R, error) {
		var r R
		if relayed, err := s.relay(ctx, m, &r, progress); relayed {
			return r, err
		}
		command, _ := m.op()
		s.Log.Info("admin command", zap.String("command", command), zap.Any("msg", m))
		r, err := fn(withActor(ctx, m), m, (&throttle{report: progress}).progress)
		if err != nil {
			s.Log.Warn("admin command failed", zap.String("command", command), zap.Any("msg", m), zap.Error(err))
			return r, &peer.CodedError{Code: codeOf(err), Msg: err.Error()}
		}
		return r, nil
	})
}

// throttle passes each stage's progress on at most every 200ms, and
// always its first report and its completion. Stages may report
// concurrently (a repack writes and indexes at once).
type throttle struct {
	report func(string)
	mu     sync.Mutex
	last   map[string]time.Time // per stage: when it was last reported
}

func (t *throttle) progress(stage string, done, total uint64) {
	now := time.Now()
	t.mu.Lock()
	last, seen := t.last[stage]
	if seen && done != total && now.Sub(last) < 200*time.Millisecond {
		t.mu.Unlock()
		return
	}
	if t.last == nil {
		t.last = map[string]time.Time{}
	}
	t.last[stage] = now
	t.mu.Unlock()
	msg := fmt.Sprintf("%s: %d", stage, done)
	if total > 0 {
		msg = fmt.Sprintf("%s: %3d%% (%d/%d)", stage, done*100/total, done, total)
	}
	t.report(msg)
}

// ErrUsage reports a malformed admin command.
var ErrUsage = errors.New("usage")

var errUnknownCommand = errors.New("unknown command")

// Done is the reply of a command whose answer is one line of text.
type Done struct {
	Output string `json:"output"`
}

func (d Done) Text() string { return d.Output }

func done(format string, args ...any) Done { return Done{Output: fmt.Sprintf(format, args...)} }

func (s *Server) createRepo(ctx context.Context, m CreateRepo) (Done, error) {
	rp, err := s.newName(ctx, m.Repo)
	if err != nil {
		return Done{}, err
	}
	if err := repo.Create(ctx, s.Deps, rp); err != nil {
		return Done{}, err
	}
	if _, raw, _ := strings.Cut(m.Repo, "/"); raw != rp.Name() {
		// names.Parse dropped a .git suffix: say so, the operator typed
		// another name.
		return done("created %s (without %q: repository names never end in .git; clone URLs may add it)",
			rp, strings.TrimPrefix(raw, rp.Name())), nil
	}
	return done("created %s", rp), nil
}

func (s *Server) deleteRepo(ctx context.Context, m DeleteRepo) (Done, error) {
	rp, err := s.existing(ctx, m.Repo)
	if err != nil {
		return Done{}, err
	}
	if err := s.Node.CloseRepo(ctx, rp); err != nil {
		return Done{}, err
	}
	if err := repo.Delete(ctx, s.Deps, rp); err != nil {
		return Done{}, err
	}
	keys, err := s.Auth.RemoveDeployKeys(ctx, rp)
	for _, k := range keys {
		s.audit(operator, "remove-key", zap.String("repo", k.Repo), zap.String("fingerprint", k.Fingerprint), zap.String("why", "delete-repo"))
	}
	if err != nil {
		return Done{}, fmt.Errorf("deleted %s, but not all its deploy keys (list-keys, remove-key): %w", rp, err)
	}
	return s.purge(ctx, rp, "deleted "+rp.String())
}

func (s *Server) fork(ctx context.Context, m Fork) (Done, error) {
	src, err := s.existing(ctx, m.From)
	if err != nil {
		return Done{}, err
	}
	dst, err := s.newName(ctx, m.To)
	if err != nil {
		return Done{}, err
	}
	sess, err := s.Node.Session(ctx, src)
	if err != nil {
		return Done{}, err
	}
	defer sess.Release()
	if err := repo.Fork(ctx, s.Deps, sess.Snapshot, dst); err != nil {
		return Done{}, err
	}
	return done("forked %s to %s", src, dst), nil
}

func (s *Server) repack(ctx context.Context, m Repack, progress pack.ProgressFunc) (Done, error) {
	rp, err := s.existing(ctx, m.Repo)
	if err != nil {
		return Done{}, err
	}
	p, err := s.Node.Repack(ctx, rp, progress)
	if err != nil {
		return Done{}, err
	}
	if p.Name == "" {
		return done("%s has nothing to repack", rp), nil
	}
	return done("repacked %s into %s (%d objects)", rp, p.Name, p.Objects), nil
}

func (s *Server) gc(ctx context.Context, m GC) (Done, error) {
	rp, err := s.existing(ctx, m.Repo)
	if err != nil {
		return Done{}, err
	}
	st, err := s.Node.CollectGarbage(ctx, rp, s.GCMinAge)
	if err != nil {
		return Done{}, err
	}
	return done("gc %s: %+v", rp, st), nil
}

func (s *Server) setVisibility(ctx context.Context, m SetVisibility) (Done, error) {
	who, err := s.actingAs(ctx, "set-visibility", m.Repo, m.As)
	if err != nil {
		return Done{}, err
	}
	v := m.Visibility
	if v != "public" && v != "private" {
		return Done{}, fmt.Errorf("%w: visibility must be public or private, not %q", ErrUsage, v)
	}
	rp, err := s.existing(ctx, m.Repo)
	if err != nil {
		return Done{}, err
	}
	if err := s.Node.SetVisibility(ctx, rp, v == "public"); err != nil {
		return Done{}, err
	}
	d, err := s.purge(ctx, rp, rp.String()+" is "+v)
	if err == nil {
		s.audit(who, "set-visibility", zap.String("repo", m.Repo), zap.String("visibility", v))
	}
	return d, err
}

func (s *Server) purgeCache(ctx context.Context, m PurgeCache) (Done, error) {
	r, err := names.Parse(m.Repo)
	if err != nil {
		return Done{}, err
	}
	if s.Cache == nil {
		return Done{}, errors.New("purge-cache: this node has no read-API cache (RGIT_REDIS_URL is unset)")
	}
	return s.purge(ctx, r, "purge-cache "+r.String())
}

func (s *Server) setHead(ctx context.Context, m SetHead) (Done, error) {
	rp, err := s.existing(ctx, m.Repo)
	if err != nil {
		return Done{}, err
	}
	if err := s.Node.SetHead(ctx, rp, m.Ref); err != nil {
		return Done{}, err
	}
	return done("HEAD of %s is %s", rp, m.Ref), nil
}

func (s *Server) version(context.Context, Version) (Done, error) { return Done{Output: s.Version}, nil }

func (s *Server) hostKey(_ context.Context, m HostKey) (Done, error) {
	if s.KnownHosts == nil {
		return Done{}, errors.New("host-key: this node serves no SSH")
	}
	line, err := s.KnownHosts(m.Host)
	if err != nil {
		return Done{}, err
	}
	return Done{Output: line}, nil
}

// existing parses "owner/name" and resolves it to the spelling the
// repository is stored under (repo.Canonical).
func (s *Server) existing(ctx context.Context, arg string) (names.Repo, error) {
	r, err := names.Parse(arg)
	if err != nil {
		return names.Repo{}, err
	}
	return repo.Canonical(ctx, s.Deps, r)
}

// newName parses the "owner/name" of a repository to create, with the
// owner's canonical spelling (auth.Store.ClaimOwner); a name taken in
// another letter case is refused by repo.Create and repo.Fork.
func (s *Server) newName(ctx context.Context, arg string) (names.Repo, error) {
	r, err := names.Parse(arg)
	if err != nil {
		return names.Repo{}, err
	}
	owner, err := s.Auth.ClaimOwner(ctx, r.Owner())
	if err != nil {
		return names.Repo{}, err
	}
	return names.New(owner, r.Name())
}
