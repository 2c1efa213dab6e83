package httpgit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/service/gitserve/gitservetest"
)

// movingResolver says another node (owner) owns every repository until
// local is set (a failover moved them here).
type movingResolver struct {
	*gitservetest.Resolver
	owner string
	local atomic.Bool
}

func (m *movingResolver) Session(ctx context.Context, r names.Repo, w bool) (gitserve.Resolved, error) {
	if !m.local.Load() {
		return gitserve.Resolved{Node: m.owner}, nil
	}
	return m.Resolver.Session(ctx, r, w)
}

// fakeForwarder answers for live nodes and fails to connect to dead ones.
type fakeForwarder struct {
	mu    sync.Mutex
	dead  map[string]bool
	nodes []string
}

func (f *fakeForwarder) Forward(w http.ResponseWriter, r *http.Request, node string) error {
	f.mu.Lock()
	f.nodes = append(f.nodes, node)
	f.mu.Unlock()
	if f.dead[node] {
		return fmt.Errorf("dial %s: %w", node, gitserve.ErrPeerConnect)
	}
	w.WriteHeader(http.StatusTeapot)
	fmt.Fprintf(w, "forwarded to %s", node)
	return nil
}

// localRerouter moves the repository here on the first connect failure.
type localRerouter struct {
	res   *movingResolver
	calls atomic.Int32
}

func (l *localRerouter) ConnectFailed(_ context.Context, _ names.Repo, _, _ string) (actors.Route, error) {
	l.calls.Add(1)
	l.res.local.Store(true)
	return actors.Route{Local: true}, nil
}

func TestForwarding(t *testing.T) {
	f := newFixture(t)
	setup := func(owner string, dead bool, withForward bool) (*httptest.Server, *fakeForwarder, *localRerouter, *recMetrics) {
		res := &movingResolver{Resolver: f.res, owner: owner}
		fw := &fakeForwarder{dead: map[string]bool{owner: dead}}
		rr := &localRerouter{res: res}
		met := &recMetrics{}
		cfg := Config{Resolver: res, Auth: gitservetest.Tokens{aliceTok: "alice"}, Protocol: f.eng, Metrics: met, Rerouter: rr}
		if withForward {
			cfg.Forward = fw
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		return srv, fw, rr, met
	}
	const refs = "/alice/pub.git/info/refs?service=git-upload-pack"

	// Owned elsewhere: proxied, the owner's status recorded.
	srv, fw, rr, met := setup("rgit-1", false, true)
	r := do(t, mustReq(t, "GET", srv.URL+refs, "", nil))
	if r.status != http.StatusTeapot || r.body != "forwarded to rgit-1" || rr.calls.Load() != 0 || fmt.Sprint(fw.nodes) != "[rgit-1]" {
		t.Fatalf("forward: %d %q, tried %v", r.status, r.body, fw.nodes)
	}
	if obs := met.all(); len(obs) != 1 || obs[0].op != "info-refs-upload-pack-forward" || obs[0].status != "418" {
		t.Errorf("metrics %+v", obs)
	}

	// Owner dead, GET: the failover moves the repository here and the
	// request is served locally.
	srv, fw, rr, met = setup("rgit-1", true, true)
	r = do(t, mustReq(t, "GET", srv.URL+refs, "", nil))
	if r.status != 200 || !strings.Contains(r.body, "# service=git-upload-pack") || rr.calls.Load() != 1 || fmt.Sprint(fw.nodes) != "[rgit-1]" {
		t.Fatalf("failover to local: %d %q, reroutes %d, tried %v", r.status, r.body, rr.calls.Load(), fw.nodes)
	}
	if obs := met.all(); len(obs) != 1 || obs[0].op != "info-refs-upload-pack" {
		t.Errorf("failover recorded %+v, want the local run only", obs)
	}

	// Owner dead, upload-pack POST: a read with a small body, kept to be
	// sent again, so it fails over like a GET and the body is replayed
	// into the local run (the engine answers the flush-only request).
	srv, _, rr, _ = setup("rgit-1", true, true)
	r = do(t, mustReq(t, "POST", srv.URL+"/alice/pub.git/git-upload-pack", "0000",
		map[string]string{"Content-Type": "application/x-git-upload-pack-request"}))
	if r.status != http.StatusOK || rr.calls.Load() != 1 {
		t.Fatalf("upload-pack POST to a dead owner: %d %q, reroutes %d", r.status, r.body, rr.calls.Load())
	}

	// Owner dead, receive-pack POST: nothing of the body was sent, so it
	// fails over too and the same request runs here (the engine answers
	// the flush-only push: 200, not the 503 of a failed forward).
	srv, _, rr, _ = setup("rgit-1", true, true)
	push := mustReq(t, "POST", srv.URL+"/alice/pub.git/git-receive-pack", "0000",
		map[string]string{"Content-Type": "application/x-git-receive-pack-request"})
	push.SetBasicAuth("x", aliceTok) // a push is decided before it is forwarded
	r = do(t, push)
	if r.status != http.StatusOK || rr.calls.Load() != 1 {
		t.Fatalf("receive-pack POST to a dead owner: %d %q, reroutes %d", r.status, r.body, rr.calls.Load())
	}

	// No forwarder configured: 503, never served here.
	srv, _, _, _ = setup("rgit-1", false, false)
	if r := do(t, mustReq(t, "GET", srv.URL+refs, "", nil)); r.status != http.StatusServiceUnavailable {
		t.Fatalf("no forwarder: %d", r.status)
	}
}

func mustReq(t *testing.T, method, url, body string, hdr map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// releasedResolver: this node released every repository (it is draining).
type releasedResolver struct{ *gitservetest.Resolver }

// errReleased is what the engine answers for a repository a draining node
// released.
var errReleased = fmt.Errorf("released: %w", gitserve.ErrMoved)

func (releasedResolver) Lookup(context.Context, names.Repo) (auth.RepoInfo, error) {
	return auth.RepoInfo{}, fmt.Errorf("route: %w: %w", gitserve.ErrUnavailable, errReleased)
}

// TestMovedAnswer: a request forwarded to a node that released the
// repository gets the moved signal (so the forwarder routes again); a
// client's own request there gets the ordinary 503.
func TestMovedAnswer(t *testing.T) {
	f := newFixture(t)
	s, err := New(Config{Resolver: releasedResolver{f.res}, Auth: gitservetest.Tokens{aliceTok: "alice"}, Protocol: f.eng})
	if err != nil {
		t.Fatal(err)
	}
	hop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r.WithContext(gitserve.WithHops(r.Context(), 1)))
	})
	const refs = "/alice/pub.git/info/refs?service=git-upload-pack"
	for _, tc := range []struct {
		name      string
		h         http.Handler
		wantMoved bool
	}{{"forwarded", hop, true}, {"direct", s, false}} {
		w := httptest.NewRecorder()
		tc.h.ServeHTTP(w, httptest.NewRequest("GET", refs, nil))
		if moved := gitserve.IsMovedResponse(w.Code, w.Header()); moved != tc.wantMoved ||
			(!tc.wantMoved && w.Code != http.StatusServiceUnavailable) {
			t.Errorf("%s: %d %v, moved signal %v", tc.name, w.Code, w.Header(), moved)
		}
	}
}
