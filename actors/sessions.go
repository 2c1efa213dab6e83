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
// request) is a session actor, which the node's transport supervisor watches.
// GitSession.Resolve decides once where its repository is served (Route:
// here, or the owner to forward to; no mailbox unless the leader must
// grant a claim) and, when here, acquires the repo actor's session, held
// until the transport ends the git session; the bytes stream on the
// transport's own goroutine, never through a mailbox. The transport supervisor knows every
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
	// sessionBegun tells the transport supervisor of a new session
	// actor, which it watches until the session ends.
	sessionBegun struct {
		pid  *actor.PID
		kind SessionKind
	}
	// awaitSessions asks for a channel closed once no session is live;
	// *sessionsIdle answers.
	awaitSessions struct{ toTransport[*sessionsIdle] }
	sessionsIdle  struct{ done <-chan struct{} }
)

// transportSupervisor watches every session actor.
type transportSupervisor struct {
	node    *Node
	live    map[string]SessionKind // by actor id
	waiters []chan struct{}
}

func (t *transportSupervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *sessionBegun:
		// A session that already ended is watched all the same: the
		// watch of a stopped actor answers Terminated at once.
		ctx.Watch(m.pid)
		t.live[m.pid.Id] = m.kind
		t.node.metrics.sessions.WithLabelValues(string(m.kind)).Inc()
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

// sessionActor is one git session: its life is the session's, from
// BeginSession to End, which the transport supervisor watches.
type sessionActor struct{}

func (a *sessionActor) Receive(actor.Context) {}

// GitSession is a transport's handle on its session actor, and the holder
// of the repo session it resolved.
type GitSession struct {
	node *Node
	pid  *actor.PID
	once sync.Once

	mu      sync.Mutex
	session *RepoSession
}

// BeginSession starts the session actor of a git session of kind and
// tells the transport supervisor, which watches it (no round trip: the
// session does not wait for the supervisor). End it when the session is
// over, whatever happened.
func (n *Node) BeginSession(ctx context.Context, kind SessionKind) (*GitSession, error) {
	pid, err := n.system.Root.SpawnNamed(sessionProps, n.system.ProcessRegistry.NextId())
	if err != nil {
		return nil, fmt.Errorf("begin %s session: %w", kind, err)
	}
	n.system.Root.Send(n.transport, &sessionBegun{pid: pid, kind: kind})
	return &GitSession{node: n, pid: pid}, nil
}

var sessionProps = actor.PropsFromProducer(func() actor.Actor { return &sessionActor{} })

// Resolve decides where key is served: a RepoSession on this node (held
// by the git session until End; Release is harmless), or the route to the
// owner with a nil RepoSession. Errors are Route's and Node.Session's.
// Once it holds a repo session a git session is bound to it; until then
// a caller may resolve again (a retry after a refused claim, or a forward
// that failed before the owner answered routes afresh).
func (g *GitSession) Resolve(ctx context.Context, key names.Repo) (*RepoSession, Route, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.session != nil {
		return nil, Route{}, errors.New("session already bound to a repository")
	}
	route, err := g.node.Route(ctx, key)
	if err != nil || !route.Local {
		return nil, route, err
	}
	s, err := g.node.session(ctx, key)
	if err != nil {
		return nil, Route{}, err
	}
	g.session = s
	return s, route, nil
}

// End releases the repo session and stops the session actor. Safe to
// call more than once.
func (g *GitSession) End() {
	g.once.Do(func() {
		g.mu.Lock()
		s := g.session
		g.mu.Unlock()
		if s != nil {
			s.Release()
		}
		g.node.system.Root.Stop(g.pid)
	})
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
