package peer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/service/gitserve"
)

// TestHTTPForwarderMoved: an owner answering the moved signal makes
// Forward report gitserve.ErrMoved, having written nothing, for requests
// that can be sent again; the next Forward sends the whole body again.
// A streamed body (a push) waits for the owner's 100 Continue, so it is
// still unsent after a moved answer and follows it too; one the owner
// had started reading gets a plain 503 error.
func TestHTTPForwarderMoved(t *testing.T) {
	var movedLeft atomic.Int32
	var readFirst atomic.Bool
	up := httptest.NewServer(PeerHTTP(secret, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if movedLeft.Add(-1) >= 0 {
			if readFirst.Load() {
				io.ReadFull(r.Body, make([]byte, 2))
			}
			gitserve.WriteMoved(w) // answered before reading the body
			return
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s body=%q", r.Method, b)
	})))
	defer up.Close()
	dir, _ := StaticDirectory(map[string]string{"rgit-1": strings.TrimPrefix(up.URL, "http://")})
	f := NewHTTPForwarder(dir, secret, nil)
	defer f.Close()

	replayable := func() *http.Request {
		body := []byte("0000")
		r := httptest.NewRequest("POST", "/a/b/git-upload-pack", bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		return r
	}
	for _, tc := range []struct {
		name string
		req  func() *http.Request
	}{
		{"GET", func() *http.Request { return httptest.NewRequest("GET", "/a/b/info/refs", nil) }},
		{"replayable POST", replayable},
	} {
		movedLeft.Store(1)
		r := tc.req()
		w := httptest.NewRecorder()
		if err := f.Forward(w, r, "rgit-1"); !errors.Is(err, gitserve.ErrMoved) {
			t.Fatalf("%s: moved answer: %v", tc.name, err)
		}
		if w.Body.Len() != 0 || len(w.Header()) != 0 {
			t.Errorf("%s: moved answer reached the client: %d %q %v", tc.name, w.Code, w.Body, w.Header())
		}
		w = httptest.NewRecorder()
		if err := f.Forward(w, r, "rgit-1"); err != nil {
			t.Fatalf("%s: second forward: %v", tc.name, err)
		}
		if want := fmt.Sprintf("%s body=%q", r.Method, map[bool]string{true: "0000"}[r.Method == "POST"]); w.Body.String() != want {
			t.Errorf("%s: owner saw %q, want %q", tc.name, w.Body, want)
		}
	}

	// A streamed body not yet sent follows the move: the next Forward
	// sends all of it.
	movedLeft.Store(1)
	r := httptest.NewRequest("POST", "/a/b/git-receive-pack", strings.NewReader("pack"))
	w := httptest.NewRecorder()
	if err := f.Forward(w, r, "rgit-1"); !errors.Is(err, gitserve.ErrMoved) || w.Body.Len() != 0 {
		t.Fatalf("streamed body, unsent: %v, wrote %q", err, w.Body)
	}
	if err := f.Forward(w, r, "rgit-1"); err != nil || w.Body.String() != `POST body="pack"` {
		t.Fatalf("streamed body, second forward: %v, owner saw %q", err, w.Body)
	}

	// A streamed body partly consumed cannot be sent again: not ErrMoved,
	// a 503 with nothing written.
	movedLeft.Store(1)
	readFirst.Store(true)
	r = httptest.NewRequest("POST", "/a/b/git-receive-pack", strings.NewReader("pack"))
	w = httptest.NewRecorder()
	err := f.Forward(w, r, "rgit-1")
	if errors.Is(err, gitserve.ErrMoved) || gitserve.Classify(err) != gitserve.Unavailable || w.Body.Len() != 0 {
		t.Errorf("streamed body, partly sent: %v (class %v), wrote %q", err, gitserve.Classify(err), w.Body)
	}
}

// movedRepo resolves nothing: this node released every repository.
type movedRepo struct{}

// errReleased is what the engine answers for a repository a draining node
// released.
var errReleased = fmt.Errorf("released: %w", gitserve.ErrMoved)

func (movedRepo) Lookup(context.Context, names.Repo) (auth.RepoInfo, error) {
	return auth.RepoInfo{}, fmt.Errorf("route: %w: %w", gitserve.ErrUnavailable, errReleased)
}

func (movedRepo) Session(context.Context, names.Repo, bool) (gitserve.Resolved, error) {
	return gitserve.Resolved{}, errReleased
}

// TestSessionMoved: a forwarded session for a repository the owner
// released is answered before the upgrade, with nothing read from the
// client's input, so the caller can send it elsewhere.
func TestSessionMoved(t *testing.T) {
	gate, err := gitserve.NewGate(movedRepo{}, echoEngine{}, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(RequireBearer(secret, nil, &SessionHandler{Gate: gate}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	var p int
	fmt.Sscan(port, &p)
	dir, _ := StaticDirectory(map[string]string{"rgit-1": net.JoinHostPort(host, fmt.Sprint(p-1))})
	in := strings.NewReader("untouched")
	for _, svc := range []gitserve.Service{gitserve.UploadPack, gitserve.ReceivePack} {
		_, err := NewSessionClient(dir, secret).ForwardSession(context.Background(), "rgit-1",
			gitserve.SessionRequest{Service: svc, Repo: names.MustParse("a/b")}, in, io.Discard)
		if !errors.Is(err, gitserve.ErrMoved) {
			t.Fatalf("%s: %v", svc, err)
		}
	}
	if in.Len() != len("untouched") {
		t.Error("input consumed by a session that never started")
	}
}

// TestHTTPForwarderLostBeforeAnswer: a connection lost before the owner
// answered (a pooled connection to a node that was just killed) is
// reported like a failed connect, with nothing written, while nothing of
// the request was consumed: the request may go elsewhere. A push whose
// body the owner had started reading gets an error that is not.
func TestHTTPForwarderLostBeforeAnswer(t *testing.T) {
	up := httptest.NewServer(PeerHTTP(secret, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			io.ReadFull(r.Body, make([]byte, 2))
		}
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close() // dies before answering
		}
	})))
	defer up.Close()
	dir, _ := StaticDirectory(map[string]string{"rgit-1": strings.TrimPrefix(up.URL, "http://")})
	f := NewHTTPForwarder(dir, secret, nil)
	defer f.Close()

	w := httptest.NewRecorder()
	if err := f.Forward(w, httptest.NewRequest("GET", "/a/b/info/refs", nil), "rgit-1"); !errors.Is(err, gitserve.ErrPeerConnect) || w.Body.Len() != 0 {
		t.Fatalf("GET: %v, wrote %q", err, w.Body)
	}
	w = httptest.NewRecorder()
	err := f.Forward(w, httptest.NewRequest("POST", "/a/b/git-receive-pack", strings.NewReader("pack")), "rgit-1")
	if err == nil || errors.Is(err, gitserve.ErrPeerConnect) || errors.Is(err, gitserve.ErrMoved) {
		t.Fatalf("push with its body partly read: %v", err)
	}
}

// TestSessionLostBeforeAnswer: a forwarded session whose connection is
// lost before the owner answers the upgrade (the owner was killed) is
// reported like a failed connect, with nothing read from the client's
// input, so the SSH front end retries it elsewhere as HTTP forwarding
// does.
func TestSessionLostBeforeAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			http.ReadRequest(bufio.NewReader(c)) // the upgrade request, then death
			c.Close()
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	var p int
	fmt.Sscan(port, &p)
	dir, _ := StaticDirectory(map[string]string{"rgit-1": net.JoinHostPort(host, fmt.Sprint(p-1))})
	in := strings.NewReader("untouched")
	for _, svc := range []gitserve.Service{gitserve.UploadPack, gitserve.ReceivePack} {
		_, err := NewSessionClient(dir, secret).ForwardSession(context.Background(), "rgit-1",
			gitserve.SessionRequest{Service: svc, Repo: names.MustParse("a/b")}, in, io.Discard)
		if !errors.Is(err, gitserve.ErrPeerConnect) {
			t.Fatalf("%s: %v, want a connect failure", svc, err)
		}
	}
	if in.Len() != len("untouched") {
		t.Error("input consumed by a session that never started")
	}
}
