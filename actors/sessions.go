package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rgit/rgit/storage/names"
)

// Git sessions as actors. Every git session the node serves (a smart-HTTP
// request, an SSH channel, a session forwarded by another node, a read-API
// request) is a session actor under the node's transport supervisor. The
// session actor resolves where its repository is served (Route: here, or
// the owner to forward to) and, when here, holds the repo actor's session
// until the transport ends it; the bytes stream on the transport's own
// goroutine, never through a mailbox. The transport supervisor knows every
// live session: WaitSessions (the drain) waits for them, /metrics counts
// them by kind, and one session's failure (a panic in its actor) stops only
// that session.

// SessionKind is where a git session came from (a metric label).
type SessionKind string

const (
	KindHTTP      SessionKind = "http"
	KindSSH       SessionKind = "ssh"
	KindForwarded SessionKind = "forwarded"
	KindAPI       SessionKind = "api"
)

var sessionKinds = []SessionKind{KindHTTP, KindSSH, KindForwarded, KindAPI}

// Messages of the transport supervisor and its session actors.
type (
	// beginSession spawns a session actor; *sessionBegun answers.
	beginSession struct {
		toTransport[*sessionBegun]
		kind SessionKind
	}
	sessionBegun struct{ pid *actor.PID }
	// awaitSessions asks for a channel closed once no session is live;
	// *sessionsIdle answers.
	awaitSessions struct{ toTransport[*sessionsIdle] }
	sessionsIdle  struct{ done <-chan struct{} }
	// resolveRepo asks a session actor where owner/name is served and, if
	// here, to open the repo actor's session; *repoResolved answers. ctx
	// bounds the routing (a claim may wait for the leader).
	resolveRepo struct {
		toSession[*repoResolved]
		ctx context.Context
		key names.Repo
	}
	repoResolved struct {
		session *RepoSession // non-nil when served here
		route   RouteResult  // where to forward otherwise
		err     error
	}
)

// transportSupervisor is the parent of every session actor.
type transportSupervisor struct {
	node    *Node
	live    map[string]SessionKind // by actor id
	waiters []chan struct{}
}

func (t *transportSupervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *beginSession:
		pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &sessionActor{node: t.node, kind: m.kind}
		}, actor.WithSupervisor(sessionStrategy)))
		t.live[pid.Id] = m.kind
		t.node.metrics.sessions.WithLabelValues(string(m.kind)).Inc()
		ctx.Respond(&sessionBegun{pid: pid})
	case *actor.Terminated:
		kind, ok := t.live[m.Who.Id]
		if !ok {
			return
		}
		delete(t.live, m.Who.Id)
		t.node.metrics.sessions.WithLabelValues(string(kind)).Dec()
		if len(t.live) == 0 {
			for _, w := range t.waiters {
				close(w)
			}
			t.waiters = nil
		}
	case *awaitSessions:
		done := make(chan struct{})
		if len(t.live) == 0 {
			close(done)
		} else {
			t.waiters = append(t.waiters, done)
		}
		ctx.Respond(&sessionsIdle{done: done})
	}
}

// sessionStrategy stops a session actor that panicked: the session failed,
// and no other session is affected.
var sessionStrategy = actor.NewOneForOneStrategy(0, time.Minute, func(any) actor.Directive {
	return actor.StopDirective
})

// sessionActor is one git session.
type sessionActor struct {
	node    *Node
	kind    SessionKind
	session *RepoSession
}

func (a *sessionActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *resolveRepo:
		r := a.resolve(m)
		ctx.Respond(&r)
	case *actor.Stopping:
		if a.session != nil {
			a.session.Release()
		}
	}
}

// resolve routes the repository and opens it here if this node serves it.
func (a *sessionActor) resolve(m *resolveRepo) repoResolved {
	if a.session != nil {
		return repoResolved{err: errors.New("session already bound to a repository")}
	}
	route, err := a.node.Route(m.ctx, m.key)
	if err != nil || !route.Local {
		return repoResolved{route: route, err: err}
	}
	s, err := a.node.Session(m.ctx, m.key)
	if err != nil {
		return repoResolved{err: err}
	}
	a.session = s
	return repoResolved{session: s, route: route}
}

// GitSession is a transport's handle on its session actor.
type GitSession struct {
	node *Node
	pid  *actor.PID
	once sync.Once
}

// BeginSession registers a git session of kind with the transport
// supervisor. End it when the session is over, whatever happened.
func (n *Node) BeginSession(ctx context.Context, kind SessionKind) (*GitSession, error) {
	r, err := askTransport(ctx, n, &beginSession{kind: kind}, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("begin %s session: %w", kind, err)
	}
	return &GitSession{node: n, pid: r.pid}, nil
}

// Resolve asks the session actor where key is served: a RepoSession
// on this node (held by the session until End; Release is harmless), or
// the route to the owner with a nil RepoSession. Errors are Route's and
// Node.Session's.
func (g *GitSession) Resolve(ctx context.Context, key names.Repo) (*RepoSession, RouteResult, error) {
	r, err := askSession(ctx, g.node, g.pid, &resolveRepo{ctx: ctx, key: key}, g.node.cfg.OpenTimeout)
	if err != nil {
		return nil, RouteResult{}, err
	}
	return r.session, r.route, r.err
}

// End stops the session actor, releasing what it holds. Safe to call more
// than once.
func (g *GitSession) End() {
	g.once.Do(func() { g.node.system.Root.Stop(g.pid) })
}

// WaitSessions returns once no git session is live on the node, or with
// ctx's error. The drain calls it after the listeners stopped accepting.
func (n *Node) WaitSessions(ctx context.Context) error {
	r, err := askTransport(ctx, n, &awaitSessions{}, 10*time.Second)
	if err != nil {
		return fmt.Errorf("wait for sessions: %w", err)
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for sessions: %w", ctx.Err())
	}
}

type gitSessionKey struct{}

// WithGitSession returns ctx carrying g, so that the layers below the
// transport (the engine's Resolver) resolve through the session actor.
func WithGitSession(ctx context.Context, g *GitSession) context.Context {
	return context.WithValue(ctx, gitSessionKey{}, g)
}

// GitSessionOf is the session WithGitSession put in ctx, or nil.
func GitSessionOf(ctx context.Context) *GitSession {
	g, _ := ctx.Value(gitSessionKey{}).(*GitSession)
	return g
}
