// Package gitservetest provides test doubles for the git front ends: a
// Resolver over bare repositories on disk, a Protocol that shells out to the
// real `git upload-pack` / `git receive-pack` (so front-end tests run the
// real git client end to end without transport/wire/gitproto), credential
// fakes, and helpers to run git in an isolated environment.
//
// Test code only: it may import anything, and only _test.go files import it.
package gitservetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/testkit/gitrun"
	"github.com/rgit/rgit/testkit/need"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// Backend is what Resolver hands out: the bare repository directory. The
// embedded (nil) gitproto.Backend only satisfies the interface; ExecProtocol
// never calls it.
type Backend struct {
	gitproto.Backend
	Dir string
}

// Resolver serves repositories registered with Add. It counts calls so tests
// can assert that a request was rejected before resolution.
type Resolver struct {
	mu       sync.Mutex
	repos    map[string]repo
	Lookups  atomic.Int64
	Sessions atomic.Int64
	// Open counts sessions not yet released.
	Open atomic.Int64
}

type repo struct {
	info auth.RepoInfo
	dir  string
}

// NewResolver returns an empty Resolver.
func NewResolver() *Resolver { return &Resolver{repos: map[string]repo{}} }

// Add registers a repository stored in the bare repository dir.
func (r *Resolver) Add(info auth.RepoInfo, dir string) {
	r.mu.Lock()
	r.repos[info.Repo.String()] = repo{info: info, dir: dir}
	r.mu.Unlock()
}

// Lookup implements gitserve.Resolver.
func (r *Resolver) Lookup(_ context.Context, n names.Repo) (auth.RepoInfo, error) {
	r.Lookups.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	rp, ok := r.repos[n.String()]
	if !ok {
		return auth.RepoInfo{}, fmt.Errorf("%s: %w", n, auth.ErrRepoNotFound)
	}
	return rp.info, nil
}

// Session implements gitserve.Resolver.
func (r *Resolver) Session(_ context.Context, n names.Repo, _ bool) (gitserve.Resolved, error) {
	r.Sessions.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	rp, ok := r.repos[n.String()]
	if !ok {
		return gitserve.Resolved{}, fmt.Errorf("%s: %w", n, auth.ErrRepoNotFound)
	}
	r.Open.Add(1)
	var once sync.Once
	return gitserve.Resolved{Backend: &Backend{Dir: rp.dir}, Release: func() { once.Do(func() { r.Open.Add(-1) }) }}, nil
}

// ExecProtocol runs git's own upload-pack/receive-pack on Backend.Dir, the
// way git-http-backend does (--stateless-rpc, --advertise-refs,
// GIT_PROTOCOL in the environment). It records the options of every call.
type ExecProtocol struct {
	mu   sync.Mutex
	opts []gitproto.Options
}

// Calls returns the options of every call so far.
func (e *ExecProtocol) Calls() []gitproto.Options {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]gitproto.Options(nil), e.opts...)
}

// UploadPack implements gitserve.Protocol.
func (e *ExecProtocol) UploadPack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	return e.run(ctx, "upload-pack", b, in, out, opt)
}

// ReceivePack implements gitserve.Protocol.
func (e *ExecProtocol) ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	return e.run(ctx, "receive-pack", b, in, out, opt)
}

func (e *ExecProtocol) run(ctx context.Context, svc string, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	e.mu.Lock()
	e.opts = append(e.opts, opt)
	e.mu.Unlock()
	be, ok := b.(*Backend)
	if !ok {
		return fmt.Errorf("exec engine: backend %T is not *gitservetest.Backend", b)
	}
	args := []string{svc}
	if opt.StatelessRPC {
		args = append(args, "--stateless-rpc")
	}
	if opt.AdvertiseOnly {
		args = append(args, "--advertise-refs")
	}
	args = append(args, be.Dir)
	var env gitrun.Env
	if opt.Protocol > 0 {
		env.Extra = []string{fmt.Sprintf("GIT_PROTOCOL=version=%d", opt.Protocol)}
	}
	cmd := env.Command(ctx, "", args...)
	var stderr bytes.Buffer
	cmd.Stdout = out
	cmd.Stderr = &stderr
	var copyErr chan error
	if !opt.AdvertiseOnly {
		// A pipe instead of cmd.Stdin, so Wait does not wait for the copy:
		// over SSH the client keeps its side open until git exits.
		w, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		copyErr = make(chan error, 1)
		defer func() { _ = w.Close() }()
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() {
			_, err := io.Copy(w, in)
			w.Close()
			copyErr <- err
		}()
	} else if err := cmd.Start(); err != nil {
		return err
	}
	err := cmd.Wait()
	if copyErr != nil {
		// Over HTTP the body is finite, so wait for the copy and report a
		// body that failed to arrive (too large, bad gzip): it is the real
		// cause of whatever git said. Over SSH the client keeps its side
		// open until git exits, so do not wait.
		var cerr error
		if opt.StatelessRPC {
			cerr = <-copyErr
		} else {
			select {
			case cerr = <-copyErr:
			default:
			}
		}
		if cerr != nil && !isPipeClosed(cerr) {
			return fmt.Errorf("git %s: reading request: %w", svc, cerr)
		}
	}
	if err != nil {
		return fmt.Errorf("git %s: %w: %s", svc, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// isPipeClosed reports the errors of writing to a git that already exited.
func isPipeClosed(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed)
}

// Tokens is an in-memory token table (token → owner).
type Tokens map[string]string

// TokenIdentity implements the HTTP front end's token lookup.
func (t Tokens) TokenIdentity(_ context.Context, token string) (auth.Identity, error) {
	if o, ok := t[token]; ok {
		return auth.Identity{Owner: o, Authenticated: true}, nil
	}
	return auth.Anonymous, auth.ErrUnknownCredential
}

// Keys is an in-memory SSH key table (SHA256 fingerprint → owner).
type Keys map[string]string

// KeyIdentity implements the SSH front end's key lookup.
func (k Keys) KeyIdentity(_ context.Context, pub ssh.PublicKey) (auth.Identity, error) {
	if o, ok := k[ssh.FingerprintSHA256(pub)]; ok {
		return auth.Identity{Owner: o, Authenticated: true}, nil
	}
	return auth.Anonymous, auth.ErrUnknownCredential
}

// Env is an isolated git client environment (see gitrun.Env) with its own
// HOME and a fixed identity.
type Env struct {
	T    testing.TB
	Home string
	// Extra is appended to every git invocation's environment.
	Extra []string
}

// NewEnv returns an Env with a fresh HOME; it skips the test if git is
// missing.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	need.Tool(t, "git")
	home := t.TempDir()
	return &Env{T: t, Home: home}
}

func (e *Env) environ() []string {
	return gitrun.Env{Home: e.Home, Ident: gitrun.Fixed("T", "t@example.com", "2020-01-01T00:00:00Z"), Extra: e.Extra}.Environ()
}

// Git runs git in dir and returns combined output; it fails the test on error.
func (e *Env) Git(dir string, args ...string) string {
	e.T.Helper()
	out, err := e.TryGit(dir, args...)
	if err != nil {
		e.T.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TryGit runs git in dir and returns combined output and the error.
func (e *Env) TryGit(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = e.environ()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// BareRepo creates a bare repository under a temp dir, seeded with
// `commits` commits on main (0 = empty), and returns its path.
func (e *Env) BareRepo(commits int) string {
	e.T.Helper()
	root := e.T.TempDir()
	bare := filepath.Join(root, "bare.git")
	e.Git(root, "init", "-q", "--bare", "-b", "main", bare)
	if commits == 0 {
		return bare
	}
	work := filepath.Join(root, "work")
	e.Git(root, "init", "-q", "-b", "main", work)
	for i := range commits {
		if err := os.WriteFile(filepath.Join(work, "f.txt"), []byte(fmt.Sprintf("content %d\n", i)), 0o644); err != nil {
			e.T.Fatal(err)
		}
		e.Git(work, "add", "f.txt")
		e.Git(work, "commit", "-q", "-m", fmt.Sprintf("commit %d", i))
	}
	e.Git(work, "push", "-q", bare, "main")
	return bare
}

// RevParse returns the object id of rev in repo dir.
func (e *Env) RevParse(dir, rev string) string {
	e.T.Helper()
	return strings.TrimSpace(e.Git(dir, "rev-parse", rev))
}
