package gitserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

func TestParsePathAndParseRepo(t *testing.T) {
	good := []struct{ in, owner, name string }{
		{"/alice/repo.git", "alice", "repo"},
		{"alice/repo", "alice", "repo"},
		{"/a-b_c.d/r.x.git", "a-b_c.d", "r.x"},
	}
	for _, c := range good {
		r, err := ParsePath(c.in)
		if err != nil || r.Owner() != c.owner || r.Name() != c.name {
			t.Errorf("ParsePath(%q) = %v %v, want %s/%s", c.in, r, err, c.owner, c.name)
		}
	}
	for _, in := range []string{"", "/", "alice", "/alice/", "alice/r/x", "//r", "/alice//r", "/api/r", "alice/r.git.git"} {
		if _, err := ParsePath(in); !errors.Is(err, ErrBadPath) {
			t.Errorf("ParsePath(%q) err = %v", in, err)
		}
	}
	for _, c := range [][2]string{{"api", "r"}, {"API", "r"}, {"alice", ".git"}, {"alice", ".."}, {"..", "r"}, {"alice", "a b"}, {"alice", "é"}, {"alice", "r.git.git"}} {
		_, err := ParseRepo(c[0], c[1])
		if !errors.Is(err, ErrBadPath) {
			t.Errorf("ParseRepo(%q, %q) err = %v", c[0], c[1], err)
		}
		// A bad path is answered like a missing repository.
		if got := Classify(BadPath(UploadPack, c[0]+"/"+c[1], auth.Anonymous, err)); got != NotFound {
			t.Errorf("BadPath(%q, %q) class %v, want %v", c[0], c[1], got, NotFound)
		}
	}
}

type stubBackend struct{ gitproto.Backend }

// stubResolver answers from fields; counts sessions.
type stubResolver struct {
	info       auth.RepoInfo
	mismatch   bool // info names another repository than the one asked for
	lookupErr  error
	sessionErr error
	node       string // another node serves it now
	sessions   int
	released   int
}

func (r *stubResolver) Lookup(_ context.Context, n names.Repo) (auth.RepoInfo, error) {
	if r.lookupErr != nil {
		return auth.RepoInfo{}, r.lookupErr
	}
	if n != r.info.Repo && !r.mismatch {
		return auth.RepoInfo{}, auth.ErrRepoNotFound
	}
	return r.info, nil
}

func (r *stubResolver) Session(context.Context, names.Repo, bool) (Resolved, error) {
	if r.sessionErr != nil {
		return Resolved{}, r.sessionErr
	}
	if r.node != "" {
		return Resolved{Node: r.node}, nil
	}
	r.sessions++
	return Resolved{Backend: stubBackend{}, Release: func() { r.released++ }}, nil
}

// echoEngine copies in to out, prefixed with the service and options.
type echoEngine struct{ err error }

func (e echoEngine) UploadPack(_ context.Context, _ gitproto.Backend, in io.Reader, out io.Writer, o gitproto.Options) error {
	return e.run("upload", in, out, o)
}
func (e echoEngine) ReceivePack(_ context.Context, _ gitproto.Backend, in io.Reader, out io.Writer, o gitproto.Options) error {
	return e.run("receive", in, out, o)
}
func (e echoEngine) run(svc string, in io.Reader, out io.Writer, o gitproto.Options) error {
	fmt.Fprintf(out, "%s v%d agent=%s:", svc, o.Protocol, o.Agent)
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	return e.err
}

func TestGateServe(t *testing.T) {
	ctx := context.Background()
	alice := auth.Identity{Owner: "alice", Authenticated: true}
	res := &stubResolver{info: auth.RepoInfo{Repo: names.MustParse("alice/r")}}
	g, err := NewGate(res, echoEngine{}, "test/1")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	st, err := g.Serve(ctx, ReceivePack, names.MustParse("alice/r.git"), alice, strings.NewReader("body"), &out, gitproto.Options{Protocol: 1})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "receive v1 agent=test/1:body" {
		t.Errorf("output %q", out.String())
	}
	if st.BytesIn != 4 || st.BytesOut != int64(out.Len()) {
		t.Errorf("stats %+v, out %d", st, out.Len())
	}
	if res.sessions != 1 || res.released != 1 {
		t.Errorf("sessions %d released %d", res.sessions, res.released)
	}
	// A nil input reads as empty.
	out.Reset()
	if _, err := g.Serve(ctx, UploadPack, names.MustParse("alice/r"), alice, nil, &out, gitproto.Options{}); err != nil || out.String() != "upload v0 agent=test/1:" {
		t.Errorf("nil input: %q %v", out.String(), err)
	}
}

func TestGateOpenErrors(t *testing.T) {
	ctx := context.Background()
	bob := auth.Identity{Owner: "bob", Authenticated: true}
	alice := auth.Identity{Owner: "alice", Authenticated: true}
	storeDown := errors.New("store down")
	cases := []struct {
		name  string
		res   *stubResolver
		id    auth.Identity
		svc   Service
		owner string
		want  Class
	}{
		{"missing anon", &stubResolver{info: auth.RepoInfo{Repo: names.MustParse("alice/x")}}, auth.Anonymous, UploadPack, "alice", Unauthorized},
		{"private other", &stubResolver{info: auth.RepoInfo{Repo: names.MustParse("alice/r")}}, bob, UploadPack, "alice", NotFound},
		{"public other push", &stubResolver{info: auth.RepoInfo{Repo: names.MustParse("alice/r"), Public: true}}, bob, ReceivePack, "alice", Forbidden},
		{"lookup failure", &stubResolver{lookupErr: storeDown}, alice, UploadPack, "alice", Internal},
		{"lookup unavailable", &stubResolver{lookupErr: fmt.Errorf("claim: %w", ErrUnavailable)}, alice, UploadPack, "alice", Unavailable},
		{"vanished", &stubResolver{info: auth.RepoInfo{Repo: names.MustParse("alice/r")}, sessionErr: auth.ErrRepoNotFound}, alice, UploadPack, "alice", NotFound},
		{"vanished anon", &stubResolver{info: auth.RepoInfo{Repo: names.MustParse("alice/r"), Public: true}, sessionErr: auth.ErrRepoNotFound}, auth.Anonymous, UploadPack, "alice", Unauthorized},
		{"session unavailable", &stubResolver{info: auth.RepoInfo{Repo: names.MustParse("alice/r")}, sessionErr: ErrUnavailable}, alice, UploadPack, "alice", Unavailable},
		{"resolver mismatch", &stubResolver{info: auth.RepoInfo{Repo: names.MustParse("bob/other"), Public: true}, mismatch: true}, alice, UploadPack, "alice", Internal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, _ := NewGate(c.res, echoEngine{}, "")
			_, err := g.Open(ctx, c.svc, names.MustParse(c.owner+"/r"), c.id)
			if got := Classify(err); got != c.want {
				t.Fatalf("class %v (%v), want %v", got, err, c.want)
			}
			if c.res.sessions != 0 && c.want != OK {
				t.Errorf("session opened on a denied request")
			}
		})
	}
	if _, err := NewGate(nil, nil, ""); err == nil {
		t.Error("nil resolver accepted")
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Class
	}{
		{nil, OK},
		{fmt.Errorf("x: %w", gitproto.ErrProtocol), BadRequest},
		{fmt.Errorf("x: %w", &http.MaxBytesError{Limit: 1}), TooLarge},
		{fmt.Errorf("x: %w", context.Canceled), Canceled},
		{errors.New("disk on fire"), Internal},
		{&DeniedError{Decision: auth.Forbidden}, Forbidden},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	// Not-found and unauthorized read the same to the client.
	if Unauthorized.Message() != NotFound.Message() {
		t.Error("401 and 404 messages differ")
	}
	for c := OK; c <= Internal; c++ {
		if c.String() == "unknown" || c.Message() == "" {
			t.Errorf("class %d has no name or message", c)
		}
	}
}

func TestPromMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewPromMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.For("http").Observe("upload-pack", "200", 10*time.Millisecond, 100, 2000)
	m.For("ssh").Observe("upload-pack", "ok", time.Millisecond, 5, 7)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			var lbl []string
			for _, l := range mt.GetLabel() {
				lbl = append(lbl, l.GetValue())
			}
			v := mt.GetCounter().GetValue()
			if mt.GetHistogram() != nil {
				v = float64(mt.GetHistogram().GetSampleCount())
			}
			got[mf.GetName()+"{"+strings.Join(lbl, ",")+"}"] = v
		}
	}
	want := map[string]float64{
		"rgit_git_requests_total{upload-pack,200,http}":      1,
		"rgit_git_bytes_out_total{upload-pack,http}":         2000,
		"rgit_git_bytes_in_total{upload-pack,ssh}":           5,
		"rgit_git_request_duration_seconds{upload-pack,ssh}": 1,
		"rgit_git_requests_total{upload-pack,ok,ssh}":        1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if _, err := NewPromMetrics(reg); err == nil {
		t.Error("double registration accepted")
	}
}

// TestClientMessage: a denial tells the caller about their own credential
// (a token that expired or was revoked, the scope of a token or the
// rights of a deploy key that cannot push) and nothing more: a missing or
// hidden repository reads the same for everyone.
func TestClientMessage(t *testing.T) {
	r := &stubResolver{info: auth.RepoInfo{Repo: names.MustParse("alice/web"), Public: true,
		Grants: []auth.Grant{{User: "rea", Role: auth.RoleRead}}}}
	g, err := NewGate(r, echoEngine{}, "")
	if err != nil {
		t.Fatal(err)
	}
	readToken := auth.Identity{Owner: "alice", Authenticated: true, ReadOnly: true}
	deployKey := auth.Identity{DeployKey: "SHA256:abc", Authenticated: true, ReadOnly: true, Repos: []string{"alice/web"}}
	reader := auth.Identity{Owner: "rea", Authenticated: true}
	stranger := auth.Identity{Owner: "bob", Authenticated: true}
	const notFound = "repository not found (or you are not authorized to access it)"
	open := []struct {
		name string
		id   auth.Identity
		repo string
		want string
	}{
		{"read-scoped token pushes", readToken, "web", "permission denied: this token has scope read, which cannot push (a token with scope write can)"},
		{"read-only deploy key pushes", deployKey, "web", "permission denied: deploy key SHA256:abc is read-only (it was added without --write)"},
		{"read collaborator pushes", reader, "web", "permission denied: you may read this repository but not change it"},
		{"read-scoped token, missing repository", readToken, "nope", notFound},
		{"stranger, missing repository", stranger, "nope", notFound},
		{"anonymous pushes", auth.Anonymous, "web", notFound},
	}
	for _, c := range open {
		_, err := g.Open(context.Background(), ReceivePack, names.MustParse("alice/"+c.repo), c.id)
		if got := ClientMessage(err); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	creds := []struct {
		name  string
		cause error
		want  string
	}{
		{"expired", &auth.TokenError{At: at}, "authentication failed: the token expired at 2026-01-02T03:04:05Z"},
		{"revoked", &auth.TokenError{Revoked: true, At: at}, "authentication failed: the token was revoked at 2026-01-02T03:04:05Z"},
		{"unknown", auth.ErrUnknownCredential, "authentication failed: the password is not a valid rgit token (tokens start with rgit_)"},
	}
	for _, c := range creds {
		err := &DeniedError{Decision: auth.Unauthorized, Service: UploadPack, Owner: "alice", Name: "web",
			Err: fmt.Errorf("%w: %w", auth.ErrBadCredentials, c.cause)}
		if got := ClientMessage(fmt.Errorf("open: %w", err)); got != c.want {
			t.Errorf("%s token: %q, want %q", c.name, got, c.want)
		}
	}
	if got := ClientMessage(&DeniedError{Decision: auth.Unauthorized, Service: UploadPack}); got != notFound {
		t.Errorf("anonymous: %q", got)
	}
}
