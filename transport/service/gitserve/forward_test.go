package gitserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

type fakeRerouter struct {
	routes []actors.Route // answered in order
	calls  []string
	err    error
}

func (f *fakeRerouter) ConnectFailed(_ context.Context, repo names.Repo, node, method string) (actors.Route, error) {
	f.calls = append(f.calls, fmt.Sprintf("%s %s %s", repo, node, method))
	if f.err != nil {
		return actors.Route{}, f.err
	}
	r := f.routes[0]
	f.routes = f.routes[1:]
	return r, nil
}

var errDown = fmt.Errorf("dial: %w", ErrPeerConnect)

func TestFollowForward(t *testing.T) {
	rt := Routed{Node: "rgit-1", Repo: names.MustParse("a/b")}
	ctx := context.Background()
	type result struct {
		tried   []string
		local   bool
		class   Class
		reroute []string
	}
	run := func(rr *fakeRerouter, method string, down map[string]bool) result {
		var res result
		var rrI Rerouter
		if rr != nil {
			rrI = rr
		}
		local, err := FollowForward(ctx, rrI, nil, rt, method,
			func(node string) error {
				res.tried = append(res.tried, node)
				if down[node] {
					return errDown
				}
				return nil
			})
		res.local = local
		res.class = Classify(err)
		if rr != nil {
			res.reroute = rr.calls
		}
		return res
	}
	// Owner answers: one attempt, no reroute.
	if r := run(&fakeRerouter{}, http.MethodGet, nil); fmt.Sprint(r.tried) != "[rgit-1]" || len(r.reroute) != 0 || r.class != OK {
		t.Errorf("healthy owner: %+v", r)
	}
	// Dead owner, GET: the re-read still names it, the second failure
	// force-grants here.
	rr := &fakeRerouter{routes: []actors.Route{{Node: "rgit-1"}, {Local: true}}}
	r := run(rr, http.MethodGet, map[string]bool{"rgit-1": true})
	if fmt.Sprint(r.tried) != "[rgit-1 rgit-1]" || !r.local || r.class != OK || len(r.reroute) != 2 {
		t.Errorf("dead owner moved here: %+v", r)
	}
	// Dead owner, moved to a third node.
	rr = &fakeRerouter{routes: []actors.Route{{Node: "rgit-2"}}}
	if r := run(rr, http.MethodGet, map[string]bool{"rgit-1": true}); fmt.Sprint(r.tried) != "[rgit-1 rgit-2]" || r.local || r.class != OK {
		t.Errorf("moved elsewhere: %+v", r)
	}
	// Bounded: a map that keeps naming dead nodes gives up with 503.
	rr = &fakeRerouter{routes: []actors.Route{{Node: "rgit-1"}, {Node: "rgit-1"}, {Node: "rgit-1"}}}
	if r := run(rr, http.MethodGet, map[string]bool{"rgit-1": true}); len(r.tried) != maxAttempts || r.class != Unavailable {
		t.Errorf("bounded: %+v", r)
	}
	// A POST (a push) follows a connect failure too: nothing was sent.
	rr = &fakeRerouter{routes: []actors.Route{{Local: true}}}
	if r := run(rr, http.MethodPost, map[string]bool{"rgit-1": true}); len(r.tried) != 1 || len(r.reroute) != 1 || !r.local || r.class != OK {
		t.Errorf("POST: %+v", r)
	}
	// No rerouter, or the rerouter failing (leader down): 503.
	if r := run(nil, http.MethodGet, map[string]bool{"rgit-1": true}); r.class != Unavailable {
		t.Errorf("no rerouter: %+v", r)
	}
	if r := run(&fakeRerouter{err: errors.New("leader down")}, http.MethodGet, map[string]bool{"rgit-1": true}); r.class != Unavailable || r.local {
		t.Errorf("rerouter failing: %+v", r)
	}
}

type fakeMover struct {
	routes []actors.Route
	calls  []string
}

func (f *fakeMover) Moved(_ context.Context, repo names.Repo, node string) (actors.Route, error) {
	f.calls = append(f.calls, fmt.Sprintf("%s %s", repo, node))
	if len(f.routes) == 0 {
		return actors.Route{}, errors.New("no route")
	}
	r := f.routes[0]
	f.routes = f.routes[1:]
	return r, nil
}

// TestFollowForwardMoved: an owner that answers "moved" (it drained) is
// followed through the Mover, for any method (the forwarder reports moved
// only for requests it can send again), a bounded number of times.
func TestFollowForwardMoved(t *testing.T) {
	rt := Routed{Node: "rgit-1", Repo: names.MustParse("a/b")}
	errMovedHere := fmt.Errorf("peer said: %w", ErrMoved)
	run := func(mv Mover, method string, moved map[string]bool) (tried []string, local bool, class Class) {
		local, err := FollowForward(context.Background(), nil, mv, rt, method,
			func(node string) error {
				tried = append(tried, node)
				if moved[node] {
					return errMovedHere
				}
				return nil
			})
		return tried, local, Classify(err)
	}
	mv := &fakeMover{routes: []actors.Route{{Node: "rgit-2"}}}
	if tried, local, c := run(mv, http.MethodPost, map[string]bool{"rgit-1": true}); fmt.Sprint(tried) != "[rgit-1 rgit-2]" || local || c != OK ||
		fmt.Sprint(mv.calls) != "[a/b rgit-1]" {
		t.Errorf("moved to rgit-2: tried %v local %v class %v calls %v", tried, local, c, mv.calls)
	}
	mv = &fakeMover{routes: []actors.Route{{Local: true}}}
	if tried, local, c := run(mv, http.MethodGet, map[string]bool{"rgit-1": true}); len(tried) != 1 || !local || c != OK {
		t.Errorf("moved here: tried %v local %v class %v", tried, local, c)
	}
	// A rolling restart: the next owner drained too; then the bound.
	mv = &fakeMover{routes: []actors.Route{{Node: "rgit-2"}, {Node: "rgit-0"}, {Node: "rgit-1"}}}
	moved := map[string]bool{"rgit-1": true, "rgit-2": true, "rgit-0": true}
	if tried, _, c := run(mv, http.MethodGet, moved); len(tried) != maxMoves+1 || c != Unavailable {
		t.Errorf("bounded: tried %v class %v", tried, c)
	}
	// No mover, or the mover giving up: 503.
	if _, _, c := run(nil, http.MethodGet, map[string]bool{"rgit-1": true}); c != Unavailable {
		t.Errorf("no mover: %v", c)
	}
	if _, local, c := run(&fakeMover{}, http.MethodGet, map[string]bool{"rgit-1": true}); c != Unavailable || local {
		t.Errorf("mover failing: %v local %v", c, local)
	}
}

func TestIsMoved(t *testing.T) {
	if !IsMoved(fmt.Errorf("x: %w", ErrMoved)) || IsMoved(ErrUnavailable) || IsMoved(nil) {
		t.Error("IsMoved on the sentinel")
	}
	if !IsMoved(fmt.Errorf("lookup: %w: %w", ErrUnavailable, ErrMoved)) || IsMoved(ErrUnavailable) {
		t.Error("IsMoved on an error marked by method")
	}
	rec := httptest.NewRecorder()
	WriteMoved(rec)
	if !IsMovedResponse(rec.Code, rec.Header()) || IsMovedResponse(http.StatusMisdirectedRequest, http.Header{}) {
		t.Errorf("moved signal round trip: %d %v", rec.Code, rec.Header())
	}
}

func TestHops(t *testing.T) {
	ctx := context.Background()
	if n, err := NextHop(ctx); n != 1 || err != nil {
		t.Fatalf("first hop: %d %v", n, err)
	}
	if n, err := NextHop(WithHops(ctx, MaxHops-1)); n != MaxHops || err != nil {
		t.Fatalf("last hop: %d %v", n, err)
	}
	if _, err := NextHop(WithHops(ctx, MaxHops)); !errors.Is(err, ErrHopLimit) || Classify(err) != Unavailable {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestClassifyForwarding(t *testing.T) {
	if c := Classify(fmt.Errorf("x: %w", &RemoteError{Node: "rgit-1", Class: Forbidden})); c != Forbidden {
		t.Errorf("remote class: %v", c)
	}
	if c := Classify(NotHere(Routed{Node: "rgit-1", Repo: names.MustParse("a/b")})); c != Unavailable {
		t.Errorf("unforwarded: %v", c)
	}
	for c := OK; c <= Internal; c++ {
		if ParseClass(c.String()) != c {
			t.Errorf("ParseClass(%q) != %v", c.String(), c)
		}
	}
}

// downForwarder fails every forward before connecting.
type downForwarder struct{ tried []string }

func (f *downForwarder) ForwardSession(_ context.Context, node string, _ SessionRequest, _ io.Reader, _ io.Writer) (Stats, error) {
	f.tried = append(f.tried, node)
	return Stats{}, errDown
}

// The failover's "it is yours now" is final only while this node's own
// routing agrees: RunRouted serves the request here through Gate.Serve,
// which routes once more, and a repository that moved on meanwhile is a
// 503 (the client retries), never a second round of forwarding or a
// session on a repository this node does not hold.
func TestRunRoutedLocalAfterFailover(t *testing.T) {
	ctx := context.Background()
	alice := auth.Identity{Owner: "alice", Authenticated: true}
	repo := names.MustParse("alice/r")
	for _, c := range []struct {
		name      string
		nowOn     string // where this node's routing sends the repository after the failover
		wantClass Class
		wantOut   string
		sessions  int
	}{
		{"served here", "", OK, "upload v2 agent=test/1:want", 1},
		{"moved on meanwhile", "rgit-3", Unavailable, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := &stubResolver{info: auth.RepoInfo{Repo: repo}, node: c.nowOn}
			g, err := NewGate(res, echoEngine{}, "test/1")
			if err != nil {
				t.Fatal(err)
			}
			fwd := &downForwarder{}
			rr := &fakeRerouter{routes: []actors.Route{{Local: true}}}
			req := SessionRequest{Service: UploadPack, Repo: repo, Identity: alice, Protocol: 2}
			var out strings.Builder
			_, err = g.RunRouted(ctx, fwd, rr, req, Routed{Node: "rgit-1", Repo: repo},
				strings.NewReader("want"), &out, gitproto.Options{Protocol: 2})
			if got := Classify(err); got != c.wantClass {
				t.Fatalf("class %v (%v), want %v", got, err, c.wantClass)
			}
			if out.String() != c.wantOut {
				t.Errorf("output %q, want %q", out.String(), c.wantOut)
			}
			if len(fwd.tried) != 1 || fwd.tried[0] != "rgit-1" {
				t.Errorf("forwarded to %v, want once to rgit-1", fwd.tried)
			}
			if res.sessions != c.sessions || res.released != c.sessions {
				t.Errorf("sessions %d released %d, want %d", res.sessions, res.released, c.sessions)
			}
		})
	}
}
