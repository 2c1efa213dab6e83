package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/rgit/rgit/testkit/fixture"
)

// gitHTTP serves repositories under root with `git http-backend`, the C git
// reference for the HTTP measurements.
type gitHTTP struct {
	srv  *http.Server
	addr string
	root string
	tmp  string
}

// startGitHTTP serves work/git-root (created here) with git http-backend,
// spooling request bodies under work.
func startGitHTTP(work string) (*gitHTTP, error) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("git http-backend: %w", err)
	}
	root, tmp := filepath.Join(work, "git-root"), work
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	cg := &cgi.Handler{
		Path: gitBin,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
	}
	g := &gitHTTP{root: root, tmp: tmp}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g.addr = ln.Addr().String()
	g.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.spool(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		cg.ServeHTTP(w, r)
	})}
	go g.srv.Serve(ln)
	return g, nil
}

// spool replaces a chunked request body with a temp file of known length:
// http-backend needs CONTENT_LENGTH, which Go's CGI handler only sets from
// a known ContentLength.
func (g *gitHTTP) spool(r *http.Request) error {
	if r.ContentLength >= 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	f, err := os.CreateTemp(g.tmp, "body-")
	if err != nil {
		return fmt.Errorf("spool request body: %w", err)
	}
	// Unlinked at once: the open handle keeps the data for this request.
	os.Remove(f.Name())
	n, err := io.Copy(f, r.Body)
	if err != nil {
		f.Close()
		return fmt.Errorf("spool request body: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("spool request body: %w", err)
	}
	r.Body.Close()
	r.Body, r.ContentLength = f, n
	r.TransferEncoding = nil
	return nil
}

func (g *gitHTTP) url(repo string) string { return "http://" + g.addr + "/" + repo }

// serveFixture exposes fixture f (a bare repository) as f.Name.git and
// returns its URL.
func (g *gitHTTP) serveFixture(f *fixture.Fixture) (string, error) {
	name := f.Name + ".git"
	if err := os.Symlink(f.Dir, filepath.Join(g.root, name)); err != nil {
		return "", err
	}
	return g.url(name), nil
}

// gitBench is what the benches against git http-backend share: the
// fixtures, a work directory and the C git server.
type gitBench struct {
	fxs  []*fixture.Fixture
	work string
	gs   *gitHTTP
}

// startGitBench builds the fixtures and starts git http-backend in a new
// work directory named by prefix; close stops it and removes the directory.
func (c *commonFlags) startGitBench(ctx context.Context, prefix string) (*gitBench, error) {
	fxs, err := c.build(ctx)
	if err != nil {
		return nil, err
	}
	work, err := c.workDir(prefix)
	if err != nil {
		return nil, err
	}
	gs, err := startGitHTTP(work)
	if err != nil {
		os.RemoveAll(work)
		return nil, err
	}
	return &gitBench{fxs: fxs, work: work, gs: gs}, nil
}

func (b *gitBench) close() {
	b.gs.Close()
	os.RemoveAll(b.work)
}

func (g *gitHTTP) Close() error { return g.srv.Close() }
