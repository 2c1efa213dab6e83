package gitserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// Cluster routing as the front ends see it. Gate.Route decides once
// where a request is served and returns it as a value (Routed): a
// session here, or the node to forward it to. The front end then carries
// the request there through its forwarder (transport/frontend/peer) and
// FollowForward, instead of serving it.

var (
	// ErrPeerConnect: a forwarder could not connect to the owning node.
	// Forwarders wrap it only when nothing of the request was sent, so a
	// retry elsewhere is safe.
	ErrPeerConnect = errors.New("cannot connect to owning node")
	// ErrMoved: the node a request was forwarded to answered that it does
	// not hold the repository and will not take it (it is draining and its
	// lease ended while the forwarder's view still named it). Forwarders
	// wrap it only when the request can be sent again unchanged (nothing
	// was written to the client, the body is absent or replayable), so
	// FollowForward routes again through a Mover. Unfollowed, it is a 503.
	ErrMoved = fmt.Errorf("owner no longer holds the repository: %w", ErrUnavailable)
	// ErrHopLimit: forwarding again would exceed MaxHops (a routing loop
	// between nodes with stale views). Wraps ErrUnavailable: the client
	// retries once the views agree.
	ErrHopLimit = fmt.Errorf("forwarding hop limit reached: %w", ErrUnavailable)
)

// Forwarder proxies a whole request to another node, streaming both ways
// (transport/frontend/peer.HTTPForwarder). An error wrapping
// ErrPeerConnect or ErrUnavailable means nothing was written to w; after
// any other error the answer is already on its way.
type Forwarder interface {
	Forward(w http.ResponseWriter, r *http.Request, node string) error
}

// MaxHops bounds how many times one request is forwarded between nodes.
// One hop is normal (entry node → owner); a second covers a target whose
// view changed in flight; more means the views disagree and the request
// is refused rather than bounced around.
const MaxHops = 2

type hopsKey struct{}

// WithHops records in ctx how many times the request was already
// forwarded (the peer listeners set it from the X-Rgit-Hop header).
func WithHops(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, hopsKey{}, n)
}

// Hops returns how many times the request in ctx was already forwarded.
func Hops(ctx context.Context) int {
	n, _ := ctx.Value(hopsKey{}).(int)
	return n
}

// NextHop returns the hop count a forwarded request carries, or
// ErrHopLimit when forwarding again is not allowed.
func NextHop(ctx context.Context) (int, error) {
	n := Hops(ctx) + 1
	if n > MaxHops {
		return 0, fmt.Errorf("%w (%d)", ErrHopLimit, MaxHops)
	}
	return n, nil
}

// Rerouter is the cluster's answer to a failed connect: it applies the
// failover rules (re-read the map, force-grant a dead owner's GET traffic)
// and says where to go now. Errors mean give up (503).
type Rerouter interface {
	ConnectFailed(ctx context.Context, r names.Repo, node, method string) (actors.Route, error)
}

// ConnectReporter is implemented by a Rerouter that wants to hear that a
// forward connected to node after an earlier connect failure of the same
// request: the suspicion of that owner ends there, so one dropped connect
// never counts towards moving the repository later.
type ConnectReporter interface {
	Connected(r names.Repo, node string)
}

// Mover is the cluster's answer to a "moved" reply: the node named node,
// to which r was forwarded, said it does not hold it. The mover
// brings the local view up to date (waiting, briefly, for the released
// entry to expire) and says where to go now. Errors mean give up (503).
type Mover interface {
	Moved(ctx context.Context, r names.Repo, node string) (actors.Route, error)
}

// MoverOf returns the Mover among candidates (the forwarder, the
// rerouter), or nil: a front end is wired with whatever implements it.
func MoverOf(candidates ...any) Mover {
	for _, c := range candidates {
		if m, ok := c.(Mover); ok && m != nil {
			return m
		}
	}
	return nil
}

// IsMoved reports whether err, from Open or a Resolver, means that this
// node does not hold the repository and will not take it: a request
// forwarded here is then answered with the moved signal (WriteMoved)
// rather than a 503. Resolvers wrap ErrMoved (transport/service/engine maps the
// actor layer's MovedError to it).
func IsMoved(err error) bool { return errors.Is(err, ErrMoved) }

// The moved signal on the peer ports: 421 Misdirected Request (the
// request reached a server that cannot answer for it) marked with
// HeaderMoved, sent before anything else and before the request body or
// session input is read.
const HeaderMoved = "X-Rgit-Moved"

// WriteMoved answers a forwarded request with the moved signal. The
// connection closes after it: the request body is never wanted, and
// reading its rest (net/http does, to reuse the connection) would wait on
// a forwarder that may never finish sending it, holding the draining
// node's graceful shutdown.
func WriteMoved(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	w.Header().Set(HeaderMoved, "1")
	http.Error(w, "repository not held by this node", http.StatusMisdirectedRequest)
}

// IsMovedResponse reports whether a peer's answer is the moved signal.
func IsMovedResponse(code int, h http.Header) bool {
	return code == http.StatusMisdirectedRequest && h.Get(HeaderMoved) != ""
}

// maxMoves bounds how often one request follows a moved answer: once for
// the owner that drained, once more for a rolling restart that drains the
// next owner too.
const maxMoves = 2

// maxAttempts bounds the connect attempts of one request: the first, the
// retry after the failover's re-read (which may still name the dead owner:
// that second failure is what lets the leader force-grant), and one at the
// node the force-grant chose.
const maxAttempts = 3

// FollowForward carries one request routed to another node (rt.Node)
// there with forward. When that fails to connect it asks rr where to go
// and retries there, a bounded number of times; when the node answers
// that the repository moved (ErrMoved) it asks mv and retries likewise.
// Forwarders report either only while nothing of the request was
// consumed, so every request, a push too, may follow them (a dead owner's
// repository moves to where the same request is then served). It
// returns local true, with nothing of the request consumed, when the
// repository moved to this node: the caller serves it here (Gate.Open),
// and that answer is final. method names the request for the rerouter
// (SSH upload-pack, and HTTP upload-pack with a replayable body, count as
// GET). With rr nil a connect failure is final; with mv nil a moved
// answer is.
func FollowForward(ctx context.Context, rr Rerouter, mv Mover, rt Routed, method string,
	forward func(node string) error) (local bool, err error) {
	node, repo := rt.Node, rt.Repo
	fails, moves := 0, 0
	for {
		err := forward(node)
		if cr, ok := rr.(ConnectReporter); ok && fails > 0 && !errors.Is(err, ErrPeerConnect) {
			cr.Connected(repo, node)
		}
		var r actors.Route
		var rerr error
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, ErrMoved):
			if mv == nil || moves == maxMoves {
				return false, fmt.Errorf("forward %s to %s: %w", repo, node, err)
			}
			moves++
			if r, rerr = mv.Moved(ctx, repo, node); rerr != nil {
				return false, fmt.Errorf("reroute %s after %s released it: %w: %w", repo, node, ErrUnavailable, rerr)
			}
		case errors.Is(err, ErrPeerConnect):
			if fails++; rr == nil || fails == maxAttempts {
				return false, fmt.Errorf("forward %s to %s: %w: %w", repo, node, ErrUnavailable, err)
			}
			if r, rerr = rr.ConnectFailed(ctx, repo, node, method); rerr != nil {
				return false, fmt.Errorf("reroute %s after connect failure to %s: %w: %w", repo, node, ErrUnavailable, rerr)
			}
		default:
			return false, err
		}
		if r.Local {
			return true, nil
		}
		node = r.Node
	}
}

// SessionRequest is a git session to be run on another node: what the
// owner needs to apply the access rules without seeing the client's
// credentials (SSH keys cannot be re-checked elsewhere).
type SessionRequest struct {
	Service  Service
	Repo     names.Repo // validated on this node; the owner's peer port checks its own copy
	Identity auth.Identity
	Protocol int // git protocol version the client asked for
}

// SessionForwarder runs a git session on another node, piping in and out.
// It returns an error wrapping ErrPeerConnect when it could not connect
// (nothing was read from in), and the remote session's error otherwise.
type SessionForwarder interface {
	ForwardSession(ctx context.Context, node string, req SessionRequest, in io.Reader, out io.Writer) (Stats, error)
}

// RemoteError is a session that failed on the node it was forwarded to:
// the owner classified it and the front end reports that class.
type RemoteError struct {
	Node  string
	Class Class
	Msg   string // the owner's log text, for this node's log
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("on node %s: %s: %s", e.Node, e.Class, e.Msg)
}

// ServeRouted is Serve for a cluster: Route, then RunRouted.
func (g *Gate) ServeRouted(ctx context.Context, fwd SessionForwarder, rr Rerouter, req SessionRequest,
	in io.Reader, out io.Writer, opt gitproto.Options) (Stats, error) {
	rt, err := g.Route(ctx, req.Service, req.Repo, req.Identity)
	if err != nil {
		return Stats{}, err
	}
	return g.RunRouted(ctx, fwd, rr, req, rt, in, out, opt)
}

// RunRouted runs req as Route decided (rt): here on its session, or on
// the node that serves it, carried there with fwd (following connect
// failures through rr and moved answers through the Mover among fwd and
// rr), and here after all if the failover moved the repository to this
// node (Gate.Serve: this node's answer is final). fwd nil: a request for
// another node's repository is NotHere. A front end that must answer
// before starting the session (the peer stream port answers a moved
// repository before its upgrade) routes first and then continues here.
func (g *Gate) RunRouted(ctx context.Context, fwd SessionForwarder, rr Rerouter, req SessionRequest,
	rt Routed, in io.Reader, out io.Writer, opt gitproto.Options) (Stats, error) {
	if rt.Session != nil {
		defer rt.Session.Close()
		return rt.Session.Run(ctx, in, out, opt)
	}
	if fwd == nil {
		return Stats{}, NotHere(rt)
	}
	method := http.MethodGet
	if req.Service == ReceivePack {
		method = http.MethodPost
	}
	var st Stats
	// A forwarded session reports ErrMoved before its upgrade and
	// ErrPeerConnect before connecting, when nothing of in was read:
	// receive-pack may follow both.
	local, err := FollowForward(ctx, rr, MoverOf(fwd, rr), rt, method, func(node string) error {
		var ferr error
		st, ferr = fwd.ForwardSession(ctx, node, req, in, out)
		return ferr
	})
	if err != nil || !local {
		return st, err
	}
	return g.Serve(ctx, req.Service, rt.Repo, req.Identity, in, out, opt)
}
