package sshgit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/testkit/need"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/service/gitserve/gitservetest"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

type clientKey struct {
	path   string
	signer gossh.Signer
}

// newClientKey writes an ed25519 private key usable by ssh -i.
func newClientKey(t *testing.T) clientKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return clientKey{path: path, signer: signer}
}

type fixture struct {
	t                  *testing.T
	env                *gitservetest.Env
	res                *gitservetest.Resolver
	eng                *gitservetest.ExecProtocol
	srv                *Server
	addr               string
	pub, prv           string
	hostKey            string // the host key's path
	alice, bob, nobody clientKey
	serveErr           chan error
}

func newFixture(t *testing.T, engine gitserve.Protocol, configure ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, env: gitservetest.NewEnv(t), res: gitservetest.NewResolver(), eng: &gitservetest.ExecProtocol{}}
	need.Tool(t, "ssh")
	f.pub = f.env.BareRepo(2)
	f.prv = f.env.BareRepo(1)
	f.res.Add(auth.RepoInfo{Repo: names.MustParse("alice/pub"), Public: true}, f.pub)
	f.res.Add(auth.RepoInfo{Repo: names.MustParse("alice/priv")}, f.prv)
	f.alice, f.bob, f.nobody = newClientKey(t), newClientKey(t), newClientKey(t)
	keys := gitservetest.Keys{
		gossh.FingerprintSHA256(f.alice.signer.PublicKey()): "alice",
		gossh.FingerprintSHA256(f.bob.signer.PublicKey()):   "bob",
	}
	if engine == nil {
		engine = f.eng
	}
	cfg := Config{
		HostKeyPath: filepath.Join(t.TempDir(), "keys", "host_ed25519"),
		Resolver:    f.res, Keys: keys, Protocol: engine,
	}
	for _, c := range configure {
		c(&cfg)
	}
	f.hostKey = cfg.HostKeyPath
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.srv, f.addr = srv, ln.Addr().String()
	f.serveErr = make(chan error, 1)
	go func() { f.serveErr <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-f.serveErr; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
		if n := f.res.Open.Load(); n != 0 {
			t.Errorf("%d sessions not released", n)
		}
	})
	return f
}

// git runs git with GIT_SSH_COMMAND using key k.
func (f *fixture) git(k clientKey, dir string, args ...string) (string, error) {
	env := *f.env
	env.Extra = []string{"GIT_SSH_COMMAND=ssh -F /dev/null -i " + k.path +
		" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"}
	return env.TryGit(dir, args...)
}

func (f *fixture) url(path string) string { return "ssh://git@" + f.addr + path }

func TestGitOverSSH(t *testing.T) {
	f := newFixture(t, nil)
	for _, proto := range []string{"0", "2"} {
		t.Run("v"+proto, func(t *testing.T) {
			// Unknown key: anonymous, may clone a public repo.
			dir := filepath.Join(t.TempDir(), "pub")
			if out, err := f.git(f.nobody, "", "-c", "protocol.version="+proto, "clone", "-q", f.url("/alice/pub.git"), dir); err != nil {
				t.Fatalf("anonymous public clone: %v\n%s", err, out)
			}
			if got, want := f.env.RevParse(dir, "HEAD"), f.env.RevParse(f.pub, "main"); got != want {
				t.Fatalf("HEAD %s, want %s", got, want)
			}
			// Owner: clone private (scp-like path, no leading slash, no
			// .git), commit, push.
			dir2 := filepath.Join(t.TempDir(), "priv")
			scp := "ssh://git@" + f.addr + "/alice/priv"
			if out, err := f.git(f.alice, "", "-c", "protocol.version="+proto, "clone", "-q", scp, dir2); err != nil {
				t.Fatalf("owner private clone: %v\n%s", err, out)
			}
			f.env.Git(dir2, "commit", "-q", "--allow-empty", "-m", "ssh v"+proto)
			if out, err := f.git(f.alice, dir2, "-c", "protocol.version="+proto, "push", "-q", "origin", "main"); err != nil {
				t.Fatalf("owner push: %v\n%s", err, out)
			}
			if got, want := f.env.RevParse(f.prv, "main"), f.env.RevParse(dir2, "HEAD"); got != want {
				t.Fatalf("server main %s after push, want %s", got, want)
			}
		})
	}
	var saw2 bool
	for _, o := range f.eng.Calls() {
		if o.StatelessRPC || o.AdvertiseOnly {
			t.Errorf("SSH call in HTTP mode: %+v", o)
		}
		saw2 = saw2 || o.Protocol == 2
	}
	if !saw2 {
		t.Errorf("GIT_PROTOCOL=version=2 not passed through: %+v", f.eng.Calls())
	}
}

func TestGitOverSSHDenials(t *testing.T) {
	f := newFixture(t, nil)
	cases := []struct {
		name string
		key  clientKey
		args []string
		want string
	}{
		{"unknown key, private", f.nobody, []string{"clone", f.url("/alice/priv.git")}, "repository not found"},
		{"other user, private", f.bob, []string{"clone", f.url("/alice/priv.git")}, "repository not found"},
		{"missing repo", f.alice, []string{"clone", f.url("/alice/nope.git")}, "repository not found"},
		{"reserved owner", f.alice, []string{"clone", f.url("/api/pub.git")}, "repository not found"},
		{"nested path", f.alice, []string{"clone", f.url("/alice/pub/x.git")}, "repository not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := f.git(c.key, "", append(c.args, filepath.Join(t.TempDir(), "c"))...)
			if err == nil || !strings.Contains(out, c.want) {
				t.Fatalf("err=%v out=%s", err, out)
			}
		})
	}
	// Pushes to a public repo by non-owners.
	dir := filepath.Join(t.TempDir(), "pub")
	if out, err := f.git(f.bob, "", "clone", "-q", f.url("/alice/pub.git"), dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	before := f.env.RevParse(f.pub, "main")
	f.env.Git(dir, "commit", "-q", "--allow-empty", "-m", "x")
	if out, err := f.git(f.bob, dir, "push", "origin", "main"); err == nil || !strings.Contains(out, "permission denied") {
		t.Errorf("bob push: err=%v out=%s", err, out)
	}
	if out, err := f.git(f.nobody, dir, "push", "origin", "main"); err == nil || !strings.Contains(out, "repository not found") {
		t.Errorf("anonymous push: err=%v out=%s", err, out)
	}
	if after := f.env.RevParse(f.pub, "main"); after != before {
		t.Errorf("denied pushes changed the repo")
	}
}

// session connects with the Go client as signer's owner and opens a
// session; done closes both.
func (f *fixture) session(t *testing.T, signer gossh.Signer) (s *gossh.Session, done func()) {
	t.Helper()
	c, err := gossh.Dial("tcp", f.addr, &gossh.ClientConfig{
		User: "git", Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err = c.NewSession()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	return s, func() { s.Close(); c.Close() }
}

// run executes cmd ("" = shell) with the Go client and returns stderr and
// the exit status.
func (f *fixture) run(t *testing.T, k clientKey, cmd string, pty bool) (string, int) {
	t.Helper()
	s, closeSession := f.session(t, k.signer)
	defer closeSession()
	var err error
	if pty {
		if err := s.RequestPty("xterm", 24, 80, gossh.TerminalModes{}); err != nil {
			t.Errorf("pty request refused: %v", err)
		}
	}
	var stderr bytes.Buffer
	s.Stderr = &stderr
	s.Stdin = strings.NewReader("")
	if cmd == "" {
		err = s.Shell()
		if err == nil {
			err = s.Wait()
		}
	} else {
		err = s.Run(cmd)
	}
	var ee *gossh.ExitError
	switch {
	case err == nil:
		return stderr.String(), 0
	case errors.As(err, &ee):
		return stderr.String(), ee.ExitStatus()
	}
	t.Fatalf("run %q: %v", cmd, err)
	return "", 0
}

func TestRefusedCommands(t *testing.T) {
	f := newFixture(t, nil)
	cases := []struct {
		name, cmd string
		pty       bool
		want      string
	}{
		{"ls", "ls -la", false, "unsupported command"},
		{"upload-archive", "git-upload-archive 'alice/pub.git'", false, "unsupported command"},
		{"git with space", "git upload-pack 'alice/pub.git'", false, "unsupported command"},
		{"no path", "git-upload-pack", false, "missing repository path"},
		{"injection", "git-upload-pack 'alice/pub.git'; rm -rf /", false, "invalid repository path"},
		{"tilde", "git-upload-pack '~alice/pub.git'", false, "invalid repository path"},
		{"dotdot", "git-upload-pack '../alice/pub.git'", false, "repository not found"},
		{"missing", "git-upload-pack 'alice/missing.git'", false, "repository not found"},
		{"private as other", "git-upload-pack 'alice/priv.git'", false, "repository not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stderr, status := f.run(t, f.bob, c.cmd, c.pty)
			if status != 1 || !strings.HasPrefix(stderr, "ERROR: ") || !strings.Contains(stderr, c.want) {
				t.Fatalf("status %d stderr %q, want 1 and %q", status, stderr, c.want)
			}
		})
	}
	if n := f.res.Sessions.Load(); n != 0 {
		t.Errorf("refused commands opened %d sessions", n)
	}
}

func TestParseCommand(t *testing.T) {
	ok := []struct {
		raw  string
		svc  gitserve.Service
		path string
	}{
		{"git-upload-pack '/alice/repo.git'", gitserve.UploadPack, "/alice/repo.git"},
		{"git-upload-pack 'alice/repo'", gitserve.UploadPack, "alice/repo"},
		{"git-receive-pack /alice/repo.git", gitserve.ReceivePack, "/alice/repo.git"},
		{"git-receive-pack alice/repo", gitserve.ReceivePack, "alice/repo"},
	}
	for _, c := range ok {
		svc, path, err := ParseCommand(c.raw)
		if err != nil || svc != c.svc || path != c.path {
			t.Errorf("ParseCommand(%q) = %v %q %v", c.raw, svc, path, err)
		}
	}
	for _, raw := range []string{"", "git-upload-pack", "git-upload-pack ", "git-upload-pack ''", "git-upload-pack 'a/b",
		"git-upload-pack a/b c", "git-upload-pack \"a/b\"", "git-upload-pack 'a'/'b'", "git-upload-archive a/b",
		"sh -c 'git-upload-pack a/b'", "git-upload-pack '~/a'", "git-upload-pack a/$(id)"} {
		if _, _, err := ParseCommand(raw); err == nil {
			t.Errorf("ParseCommand(%q) accepted", raw)
		} else if !errors.Is(err, gitproto.ErrProtocol) {
			t.Errorf("ParseCommand(%q) error %v does not classify as a protocol error", raw, err)
		}
	}
}

func TestHostKeyPersisted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "host")
	s1, created, err := loadOrCreateHostKey(path)
	if err != nil || !created {
		t.Fatalf("create: %v created=%v", err, created)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if !bytes.HasPrefix(data, []byte("-----BEGIN OPENSSH PRIVATE KEY-----")) {
		t.Errorf("not OpenSSH PEM: %.40q", data)
	}
	s2, created, err := loadOrCreateHostKey(path)
	if err != nil || created {
		t.Fatalf("reload: %v created=%v", err, created)
	}
	if !bytes.Equal(s1.PublicKey().Marshal(), s2.PublicKey().Marshal()) || s1.PublicKey().Type() != gossh.KeyAlgoED25519 {
		t.Error("reloaded a different key")
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadOrCreateHostKey(path); err == nil {
		t.Error("garbage host key accepted")
	}
}

func TestConfigValidation(t *testing.T) {
	dir := t.TempDir()
	res := gitservetest.NewResolver()
	for name, cfg := range map[string]Config{
		"no keys":     {HostKeyPath: filepath.Join(dir, "k"), Resolver: res},
		"no host key": {Resolver: res, Keys: gitservetest.Keys{}},
		"no resolver": {HostKeyPath: filepath.Join(dir, "k"), Keys: gitservetest.Keys{}},
	} {
		if _, err := NewServer(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// blockingEngine holds every session open until release is closed.
type blockingEngine struct {
	started chan struct{}
	release chan struct{}
}

func (e *blockingEngine) UploadPack(ctx context.Context, _ gitproto.Backend, _ io.Reader, out io.Writer, _ gitproto.Options) error {
	e.started <- struct{}{}
	select {
	case <-e.release:
		_, err := io.WriteString(out, "done")
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *blockingEngine) ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, o gitproto.Options) error {
	return e.UploadPack(ctx, b, in, out, o)
}

func TestShutdown(t *testing.T) {
	eng := &blockingEngine{started: make(chan struct{}, 1), release: make(chan struct{})}
	f := newFixture(t, eng)
	type res struct {
		out    string
		status int
	}
	done := make(chan res, 1)
	go func() {
		c, err := gossh.Dial("tcp", f.addr, &gossh.ClientConfig{User: "git",
			Auth: []gossh.AuthMethod{gossh.PublicKeys(f.alice.signer)}, HostKeyCallback: gossh.InsecureIgnoreHostKey()})
		if err != nil {
			done <- res{err.Error(), -1}
			return
		}
		defer c.Close()
		s, err := c.NewSession()
		if err != nil {
			done <- res{err.Error(), -1}
			return
		}
		out, err := s.Output("git-upload-pack 'alice/pub.git'")
		st := 0
		var ee *gossh.ExitError
		if errors.As(err, &ee) {
			st = ee.ExitStatus()
		} else if err != nil {
			st = -1
		}
		done <- res{string(out), st}
	}()
	<-eng.started

	// A session is running: Shutdown waits for it until its deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	shutdownErr := make(chan error, 1)
	go func() { shutdownErr <- f.srv.Shutdown(ctx) }()
	// New connections are refused once Serve has returned.
	if err := <-f.serveErr; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	f.serveErr <- ErrServerClosed // for the cleanup check
	if c, err := net.DialTimeout("tcp", f.addr, time.Second); err == nil {
		c.Close()
		t.Error("listener still accepting after Shutdown")
	}
	if err := <-shutdownErr; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a running session = %v, want deadline exceeded", err)
	}
	// Past the deadline the connection was closed under the session.
	if r := <-done; r.status == 0 {
		t.Errorf("session finished normally after forced close: %+v", r)
	}
	close(eng.release)
}

func TestShutdownWaitsForSession(t *testing.T) {
	eng := &blockingEngine{started: make(chan struct{}, 1), release: make(chan struct{})}
	f := newFixture(t, eng)
	done := make(chan string, 1)
	go func() {
		c, err := gossh.Dial("tcp", f.addr, &gossh.ClientConfig{User: "git",
			Auth: []gossh.AuthMethod{gossh.PublicKeys(f.alice.signer)}, HostKeyCallback: gossh.InsecureIgnoreHostKey()})
		if err != nil {
			done <- err.Error()
			return
		}
		defer c.Close()
		s, err := c.NewSession()
		if err != nil {
			done <- err.Error()
			return
		}
		out, err := s.Output("git-upload-pack 'alice/pub.git'")
		done <- fmt.Sprintf("%s|%v", out, err)
	}()
	<-eng.started
	shutdownErr := make(chan error, 1)
	go func() { shutdownErr <- f.srv.Shutdown(context.Background()) }()
	if err := <-f.serveErr; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	f.serveErr <- ErrServerClosed
	close(eng.release)
	if got := <-done; got != "done|<nil>" {
		t.Errorf("session during graceful shutdown: %q", got)
	}
	if err := <-shutdownErr; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

// The credential store is the production KeyLookup.
var _ KeyLookup = (*auth.Store)(nil)

// TestStallTimeout: a session whose client stops sending while the server
// waits for its input (here: upload-pack after its advertisement) is
// closed after the stall time.
func TestStallTimeout(t *testing.T) {
	const stall = time.Second
	f := newFixture(t, nil, func(c *Config) { c.StallTimeout = stall })
	s, closeSession := f.session(t, f.alice.signer)
	defer closeSession()
	stdin, _ := io.Pipe() // never written: the client stalls
	s.Stdin = stdin
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("git-upload-pack '/alice/pub.git'"); err != nil {
		t.Fatal(err)
	}
	// The advertisement ends with a flush packet; then the server waits.
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(stdout, hdr[:]); err != nil {
			t.Fatalf("advertisement: %v", err)
		}
		n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
		if err != nil || n == 0 {
			break
		}
		if _, err := io.CopyN(io.Discard, stdout, int64(n)-4); err != nil {
			t.Fatalf("advertisement: %v", err)
		}
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("stalled session ended successfully")
		}
		// The server's clock started when it had sent the advertisement,
		// a little before the client had read it.
		if d := time.Since(start); d < stall*8/10 {
			t.Fatalf("closed after %s, before the stall time", d)
		}
	case <-time.After(10 * time.Second): // a bound for a broken server
		t.Fatal("stalled session still open after 10s")
	}
}
