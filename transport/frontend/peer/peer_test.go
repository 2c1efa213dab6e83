package peer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/format"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

const secret = "0123456789abcdef-secret"

func TestDirectory(t *testing.T) {
	d, err := StaticDirectory(map[string]string{"rgit-0": "127.0.0.1:9081", "rgit-1": "127.0.0.1:9181"})
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := d.HTTPAddr("rgit-1"); a != "127.0.0.1:9181" {
		t.Errorf("HTTPAddr = %q", a)
	}
	if a, _ := d.StreamAddr("rgit-1"); a != "127.0.0.1:9182" {
		t.Errorf("StreamAddr = %q", a)
	}
	if _, err := d.HTTPAddr("rgit-9"); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("unknown node: %v", err)
	}
	if got := d.Nodes(); len(got) != 2 || got[0] != "rgit-0" {
		t.Errorf("Nodes = %v", got)
	}
	s, err := ServiceDirectory("rgit.ns.svc", 8081)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := s.StreamAddr("rgit-2"); a != "rgit-2.rgit.ns.svc:8082" {
		t.Errorf("service StreamAddr = %q", a)
	}
	if _, err := StaticDirectory(map[string]string{"rgit-0": "nohost"}); err == nil {
		t.Error("bad address accepted")
	}
}

func TestPeerHTTPAuthAndHops(t *testing.T) {
	var gotHops int
	h := PeerHTTP(secret, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHops = gitserve.Hops(r.Context())
	}))
	cases := []struct {
		name, secret, hop string
		want              int
	}{
		{"no secret", "", "1", 401},
		{"wrong secret", "0123456789abcdef-secreX", "1", 401},
		{"no hop", secret, "", 400},
		{"hop over limit", secret, fmt.Sprint(gitserve.MaxHops + 1), 400},
		{"ok", secret, "2", 200},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/a/b/info/refs", nil)
		if c.secret != "" {
			r.Header.Set(HeaderSecret, c.secret)
		}
		if c.hop != "" {
			r.Header.Set(HeaderHop, c.hop)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s: status %d, want %d", c.name, w.Code, c.want)
		}
	}
	if gotHops != 2 {
		t.Errorf("hops in context = %d, want 2", gotHops)
	}
	// An empty configured secret accepts nothing.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer ")
	RequireBearer("", nil, http.NotFoundHandler()).ServeHTTP(w, r)
	if w.Code != 401 {
		t.Errorf("empty secret: %d", w.Code)
	}
}

// fakeLeader records calls and answers fixed decisions.
type fakeLeader struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (f *fakeLeader) rec(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return f.err
}

func (f *fakeLeader) Claim(_ context.Context, m cluster.ClaimLease) (cluster.Decision, error) {
	if m.Node == "bad node" {
		return cluster.Decision{}, fmt.Errorf("claim: %w", cluster.ErrInvalidName)
	}
	return cluster.Decision{Outcome: cluster.Granted, Repo: m.Repo, Owner: m.Node,
		Entry: cluster.Entry{Node: m.Node, Epoch: 7}}, f.rec("claim " + m.Repo.String() + " " + m.Node)
}
func (f *fakeLeader) Renew(_ context.Context, m cluster.RenewLeases) (cluster.LeasesRenewed, error) {
	return cluster.LeasesRenewed{Renewed: m.Repos[:1], Declined: m.Repos[1:]}, f.rec("renew " + m.Node + " " + fmt.Sprint(m.Repos))
}
func (f *fakeLeader) Release(_ context.Context, m cluster.ReleaseLease) (cluster.Decision, error) {
	return cluster.Decision{Outcome: cluster.Released, Repo: m.Repo, Owner: m.Node}, f.rec("release " + m.Node + " " + m.Repo.String())
}
func (f *fakeLeader) ForceGrant(_ context.Context, m cluster.ForceGrantLease) (cluster.Decision, error) {
	return cluster.Decision{Outcome: cluster.Refused, Reason: cluster.ReasonQuiet, Repo: m.Repo, Owner: m.Dead},
		f.rec("force " + m.Repo.String() + " " + m.Requester + " " + m.Dead)
}

var errTestUnreachable = errors.New("test: leader unreachable")

func leaderServer(t *testing.T, l cluster.LeaderService) *httptest.Server {
	h := NewHandlers(nil)
	HandleLeader(h, func() cluster.LeaderService { return l })
	srv := httptest.NewServer(RequireBearer(secret, nil, h))
	t.Cleanup(srv.Close)
	return srv
}

func TestLeaderRoundTrip(t *testing.T) {
	fl := &fakeLeader{}
	srv := leaderServer(t, fl)
	c := NewLeaderClient(strings.TrimPrefix(srv.URL, "http://"), secret, errTestUnreachable)
	defer c.Close()
	ctx := context.Background()
	ab := names.MustParse("a/b")
	d, err := c.Claim(ctx, cluster.ClaimLease{Repo: ab, Node: "rgit-1"})
	if err != nil || d.Outcome != cluster.Granted || d.Owner != "rgit-1" || d.Entry.Epoch != 7 {
		t.Fatalf("Claim = %+v, %v", d, err)
	}
	r, err := c.Renew(ctx, cluster.RenewLeases{Node: "rgit-1", Repos: []names.Repo{ab, names.MustParse("a/c")}})
	if err != nil || len(r.Renewed) != 1 || r.Renewed[0] != ab || len(r.Declined) != 1 || r.Declined[0].String() != "a/c" {
		t.Fatalf("Renew = %+v %v", r, err)
	}
	if d, err := c.Release(ctx, cluster.ReleaseLease{Node: "rgit-1", Repo: names.MustParse("a/b")}); err != nil || d.Outcome != cluster.Released {
		t.Fatalf("Release = %+v %v", d, err)
	}
	if d, err := c.ForceGrant(ctx, cluster.ForceGrantLease{Repo: names.MustParse("a/b"), Requester: "rgit-2", Dead: "rgit-1"}); err != nil || d.Reason != cluster.ReasonQuiet {
		t.Fatalf("ForceGrant = %+v %v", d, err)
	}
	want := []string{"claim a/b rgit-1", "renew rgit-1 [a/b a/c]", "release rgit-1 a/b", "force a/b rgit-2 rgit-1"}
	if fmt.Sprint(fl.calls) != fmt.Sprint(want) {
		t.Errorf("calls = %v, want %v", fl.calls, want)
	}
}

func TestLeaderClientErrors(t *testing.T) {
	ctx := context.Background()
	// Nothing listening: unreachable.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := NewLeaderClient(addr, secret, errTestUnreachable).Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("a/b"), Node: "rgit-1"}); !errors.Is(err, errTestUnreachable) {
		t.Errorf("no listener: %v", err)
	}
	// The leader's own failure (it cannot persist): unreachable too.
	srv := leaderServer(t, &fakeLeader{err: errors.New("store down")})
	if _, err := NewLeaderClient(strings.TrimPrefix(srv.URL, "http://"), secret, errTestUnreachable).Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("a/b"), Node: "rgit-1"}); !errors.Is(err, errTestUnreachable) {
		t.Errorf("leader failing: %v", err)
	}
	// Not the leader: 503, unreachable.
	nl := leaderServer(t, nil)
	if _, err := NewLeaderClient(strings.TrimPrefix(nl.URL, "http://"), secret, errTestUnreachable).Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("a/b"), Node: "rgit-1"}); !errors.Is(err, errTestUnreachable) {
		t.Errorf("not the leader: %v", err)
	}
	// A wrong secret is a configuration error, not an outage.
	fl := &fakeLeader{}
	srv2 := leaderServer(t, fl)
	_, err := NewLeaderClient(strings.TrimPrefix(srv2.URL, "http://"), "wrong-secret-0123456", errTestUnreachable).Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("a/b"), Node: "rgit-1"})
	if err == nil || errors.Is(err, errTestUnreachable) || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong secret: %v", err)
	}
	if len(fl.calls) != 0 {
		t.Errorf("leader called without the secret: %v", fl.calls)
	}
	// A node name the leader rejects is refused, not an outage: retrying or
	// answering 503 would not help.
	var refused *RefusedError
	_, err = NewLeaderClient(strings.TrimPrefix(srv2.URL, "http://"), secret, errTestUnreachable).Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("a/b"), Node: "bad node"})
	if !errors.As(err, &refused) || errors.Is(err, errTestUnreachable) {
		t.Errorf("invalid name: %v", err)
	}
}

// TestEnvelopeRefusesBadMessages: the envelope endpoint refuses what it
// cannot route (malformed, unknown type, hop out of range) with 400 and a
// refused answer, without calling any handler.
func TestEnvelopeRefusesBadMessages(t *testing.T) {
	fl := &fakeLeader{}
	srv := leaderServer(t, fl)
	claim := `{"repo":"a/b","node":"rgit-1"}`
	for name, body := range map[string]string{
		"malformed":    `{"type":`,
		"unknown type": `{"type":"cluster.Nope","msg":{}}`,
		"hop too high": `{"type":"cluster.ClaimLease","hop":99,"msg":` + claim + `}`,
		"negative hop": `{"type":"cluster.ClaimLease","hop":-1,"msg":` + claim + `}`,
		"bad message":  `{"type":"cluster.ClaimLease","msg":[1,2]}`,
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+PathMsg, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var a answer
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || err != nil || !a.Refused || a.Error == "" {
			t.Errorf("%s: %s %+v %v, want 400 and a refused answer", name, resp.Status, a, err)
		}
	}
	if len(fl.calls) != 0 {
		t.Errorf("handler called for refused messages: %v", fl.calls)
	}
}

// payload is deterministic pseudo-random data.
func payload(n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(42)).Read(b)
	return b
}

func TestHTTPForwarderStreams(t *testing.T) {
	up := httptest.NewServer(PeerHTTP(secret, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Basic dXNlcjp0b2tlbg==" {
			t.Errorf("client credentials not forwarded: %q", r.Header.Get("Authorization"))
		}
		h := sha256.New()
		n, _ := io.Copy(h, r.Body)
		w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
		fmt.Fprintf(w, "hops=%d n=%d sha=%x\n", gitserve.Hops(r.Context()), n, h.Sum(nil))
		w.Write(payload(3 << 20))
	})))
	defer up.Close()
	dir, _ := StaticDirectory(map[string]string{"rgit-1": strings.TrimPrefix(up.URL, "http://")})
	f := NewHTTPForwarder(dir, secret, nil)
	defer f.Close()

	body := payload(5 << 20)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := f.Forward(w, r, "rgit-1"); err != nil {
			t.Errorf("Forward: %v", err)
		}
	}))
	defer front.Close()
	req, _ := http.NewRequest("POST", front.URL+"/a/b/git-upload-pack", bytes.NewReader(body))
	req.SetBasicAuth("user", "token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	line, rest, _ := bytes.Cut(got, []byte("\n"))
	want := fmt.Sprintf("hops=1 n=%d sha=%x", len(body), sha256.Sum256(body))
	if string(line) != want {
		t.Errorf("upstream saw %q, want %q", line, want)
	}
	if !bytes.Equal(rest, payload(3<<20)) {
		t.Errorf("response body corrupted (%d bytes)", len(rest))
	}
}

func TestHTTPForwarderConnectFailureAndHopLimit(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	dir, _ := StaticDirectory(map[string]string{"rgit-1": dead})
	f := NewHTTPForwarder(dir, secret, nil)
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/a/b/info/refs", nil)
	err := f.Forward(w, r, "rgit-1")
	if !errors.Is(err, gitserve.ErrPeerConnect) {
		t.Fatalf("dead node: %v", err)
	}
	if w.Code != 200 || w.Body.Len() != 0 || len(w.Header()) != 0 {
		t.Errorf("connect failure wrote an answer: %d %q", w.Code, w.Body)
	}
	r = r.WithContext(gitserve.WithHops(r.Context(), gitserve.MaxHops))
	if err := f.Forward(w, r, "rgit-1"); !errors.Is(err, gitserve.ErrHopLimit) || gitserve.Classify(err) != gitserve.Unavailable {
		t.Errorf("hop limit: %v", err)
	}
}

// echoEngine answers every session with its input reversed, then a large
// block (several frames), or fails when the input says so.
type echoEngine struct{}

func (echoEngine) UploadPack(_ context.Context, _ gitproto.Backend, in io.Reader, out io.Writer, _ gitproto.Options) error {
	b, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	if string(b) == "fail" {
		return fmt.Errorf("bad input: %w", gitproto.ErrProtocol)
	}
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	if _, err := out.Write(b); err != nil {
		return err
	}
	_, err = out.Write(payload(200 << 10))
	return err
}

func (e echoEngine) ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	return e.UploadPack(ctx, b, in, out, opt)
}

// oneRepo resolves a/private (owned by alice) and nothing else.
type oneRepo struct{}

func (oneRepo) Lookup(_ context.Context, r names.Repo) (auth.RepoInfo, error) {
	if r.String() != "a/private" {
		return auth.RepoInfo{}, auth.ErrRepoNotFound
	}
	return auth.RepoInfo{Repo: names.MustParse("a/private")}, nil
}

func (o oneRepo) Session(ctx context.Context, r names.Repo, _ bool) (gitserve.Resolved, error) {
	_, err := o.Lookup(ctx, r)
	return gitserve.Resolved{Backend: struct{ gitproto.Backend }{}}, err
}

func sessionServer(t *testing.T) *Directory {
	gate, err := gitserve.NewGate(oneRepo{}, echoEngine{}, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(RequireBearer(secret, nil, &SessionHandler{Gate: gate}))
	t.Cleanup(srv.Close)
	// The directory names the peer HTTP port; the stream port is +1, so
	// point the entry one below the test server.
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	var p int
	fmt.Sscan(port, &p)
	dir, err := StaticDirectory(map[string]string{"rgit-1": net.JoinHostPort(host, fmt.Sprint(p-1))})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestSessionForwarding(t *testing.T) {
	dir := sessionServer(t)
	c := NewSessionClient(dir, secret)
	ctx := context.Background()
	alice := auth.Identity{Owner: "a", Authenticated: true}
	var out bytes.Buffer
	st, err := c.ForwardSession(ctx, "rgit-1", gitserve.SessionRequest{Service: gitserve.UploadPack, Repo: names.MustParse("a/private.git"), Identity: alice, Protocol: 2},
		strings.NewReader("hello"), &out)
	if err != nil {
		t.Fatalf("ForwardSession: %v", err)
	}
	want := append([]byte("olleh"), payload(200<<10)...)
	if !bytes.Equal(out.Bytes(), want) || st.BytesIn != 5 || st.BytesOut != int64(len(want)) {
		t.Errorf("output %d bytes (stats %+v), want %d", out.Len(), st, len(want))
	}

	// The owner applies the access rules to the forwarded identity.
	out.Reset()
	_, err = c.ForwardSession(ctx, "rgit-1", gitserve.SessionRequest{Service: gitserve.UploadPack, Repo: names.MustParse("a/private")},
		strings.NewReader("x"), &out)
	if gitserve.Classify(err) != gitserve.Unauthorized || out.Len() != 0 {
		t.Errorf("anonymous on a private repo: class %v (%v), %d bytes", gitserve.Classify(err), err, out.Len())
	}
	// The whole identity travels, not just the owner: a read-only token
	// of the owner cannot push, a deploy key of another repository sees
	// nothing.
	for _, tc := range []struct {
		id   auth.Identity
		svc  gitserve.Service
		want gitserve.Class
	}{
		{auth.Identity{Owner: "a", Authenticated: true, ReadOnly: true}, gitserve.ReceivePack, gitserve.Forbidden},
		{auth.Identity{Owner: "a", Authenticated: true, ReadOnly: true}, gitserve.UploadPack, gitserve.OK},
		{auth.Identity{DeployKey: "SHA256:k", Authenticated: true, Repos: []string{"a/other"}}, gitserve.UploadPack, gitserve.NotFound},
		{auth.Identity{DeployKey: "SHA256:k", Authenticated: true, Repos: []string{"a/private"}}, gitserve.ReceivePack, gitserve.OK},
	} {
		out.Reset()
		_, err = c.ForwardSession(ctx, "rgit-1", gitserve.SessionRequest{Service: tc.svc, Repo: names.MustParse("a/private"), Identity: tc.id},
			strings.NewReader("x"), &out)
		if gitserve.Classify(err) != tc.want {
			t.Errorf("%+v %s: class %v (%v), want %v", tc.id, tc.svc, gitserve.Classify(err), err, tc.want)
		}
	}
	// Remote protocol errors keep their class.
	_, err = c.ForwardSession(ctx, "rgit-1", gitserve.SessionRequest{Service: gitserve.UploadPack, Repo: names.MustParse("a/private"), Identity: alice},
		strings.NewReader("fail"), &out)
	if gitserve.Classify(err) != gitserve.BadRequest {
		t.Errorf("remote protocol error: class %v (%v)", gitserve.Classify(err), err)
	}
	// Wrong secret: refused before any session runs.
	_, err = NewSessionClient(dir, "wrong-secret-0123456").ForwardSession(ctx, "rgit-1",
		gitserve.SessionRequest{Service: gitserve.UploadPack, Repo: names.MustParse("a/private"), Identity: alice}, strings.NewReader("x"), &out)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong secret: %v", err)
	}
}

func TestSessionConnectFailure(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	var p int
	fmt.Sscan(port, &p)
	dir, _ := StaticDirectory(map[string]string{"rgit-1": net.JoinHostPort(host, fmt.Sprint(p-1))})
	in := strings.NewReader("untouched")
	_, err := NewSessionClient(dir, secret).ForwardSession(context.Background(), "rgit-1",
		gitserve.SessionRequest{Service: gitserve.UploadPack, Repo: names.MustParse("a/b")}, in, io.Discard)
	if !errors.Is(err, gitserve.ErrPeerConnect) {
		t.Fatalf("dead node: %v", err)
	}
	if in.Len() != len("untouched") {
		t.Error("input consumed although nothing was connected")
	}
}

func TestFrameWriterSplits(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		fw := &frameWriter{conn: a}
		fw.Write(payload(maxFrame*2 + 17))
		fw.status(status{Class: "ok"})
	}()
	var out bytes.Buffer
	st, n, err := readFrames(bufio.NewReader(b), &out)
	if err != nil || st.Class != "ok" || n != maxFrame*2+17 || !bytes.Equal(out.Bytes(), payload(maxFrame*2+17)) {
		t.Fatalf("readFrames: %v %+v n=%d", err, st, n)
	}
	// A stream that ends without a status is an error, not success.
	c, d := net.Pipe()
	go func() {
		(&frameWriter{conn: c}).Write([]byte("partial"))
		c.Close()
	}()
	if _, _, err := readFrames(bufio.NewReader(d), io.Discard); !errors.Is(err, errNoStatus) {
		t.Errorf("truncated stream: %v", err)
	}
}

// TestPeerProtocolVersion: every peer port wrapper lets through requests
// in a protocol version this build speaks (no header: a release before
// versions were sent, which speaks 1) and refuses any other with 400, an
// answer and a log line that name the version; senders mark their
// requests with this build's version.
func TestPeerProtocolVersion(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core)
	var got []string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = append(got, r.Header.Get(HeaderVersion)) })
	wrappers := map[string]struct {
		h   http.Handler
		set func(*http.Request)
	}{
		"bearer": {RequireBearer(secret, log, next), func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+secret) }},
		"secret": {RequireSecret(secret, log, next), func(r *http.Request) { r.Header.Set(HeaderSecret, secret) }},
		"peer http": {PeerHTTP(secret, log, next), func(r *http.Request) {
			r.Header.Set(HeaderSecret, secret)
			r.Header.Set(HeaderHop, "1")
		}},
	}
	newer := fmt.Sprint(format.Peer.Newest + 1)
	for name, wr := range wrappers {
		for _, c := range []struct {
			version string
			want    int
			body    string
		}{
			{"", 200, ""},
			{"1", 200, ""},
			{newer, 400, "peer protocol version " + newer + " "},
			{"0", 400, "peer protocol version 0 "},
			{"x", 400, "bad " + HeaderVersion},
		} {
			r := httptest.NewRequest("POST", "/peer/v1/msg", nil)
			wr.set(r)
			if c.version != "" {
				r.Header.Set(HeaderVersion, c.version)
			}
			w := httptest.NewRecorder()
			wr.h.ServeHTTP(w, r)
			if w.Code != c.want || !strings.Contains(w.Body.String(), c.body) {
				t.Errorf("%s, version %q: %d %q, want %d and %q", name, c.version, w.Code, w.Body.String(), c.want, c.body)
			}
		}
	}
	refusals := logs.FilterMessage("peer request refused: protocol version").All()
	if len(refusals) != 2*len(wrappers) {
		t.Errorf("%d refusals logged, want %d", len(refusals), 2*len(wrappers))
	}
	for _, e := range refusals {
		if v := e.ContextMap()["version"]; v != uint64(format.Peer.Newest+1) && v != uint64(0) {
			t.Errorf("refusal logged version %v", v)
		}
	}

	// A message sent by this build carries its version.
	got = nil
	srv := httptest.NewServer(RequireBearer(secret, log, next))
	defer srv.Close()
	var out struct{}
	_ = Send(context.Background(), srv.Client(), srv.URL, secret, 0, cluster.ClaimLease{Repo: names.MustParse("a/b"), Node: "n"}, &out)
	if want := fmt.Sprint(format.Peer.Write); len(got) != 1 || got[0] != want {
		t.Errorf("sent version %q, want %q", got, want)
	}
}
