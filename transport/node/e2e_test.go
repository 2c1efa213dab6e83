package node_test

// End-to-end tests: a node started in process (node.Start) on a file://
// store and on a real S3 server (versitygw), driven by the real git client
// over smart HTTP and SSH. One server per store is shared by all subtests;
// every subtest uses its own repository names.
//
// RGIT_E2E_BIG=0 skips the 110 MB pushes (about 10 s on each store).

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/gitenv"
)

// fixture is what every subtest of one store shares.
type fixture struct {
	srv *gitenv.Server
	env *gitenv.Env
	// Tokens and keys: alice owns the repositories, bob is another user,
	// stranger's key is registered to nobody.
	aliceToken, bobToken    string
	aliceKey, bobKey, stKey gitenv.Key
	seq                     int
	mu                      sync.Mutex
}

func newFixture(t *testing.T, store gitenv.Store) *fixture {
	srv := gitenv.StartServer(t, store)
	env := gitenv.New(t)
	f := &fixture{srv: srv, env: env}
	f.aliceToken = srv.AddToken(t, "alice")
	f.bobToken = srv.AddToken(t, "bob")
	f.aliceKey = env.NewSSHKey(t, "alice")
	f.bobKey = env.NewSSHKey(t, "bob")
	f.stKey = env.NewSSHKey(t, "stranger")
	srv.AddKey(t, "alice", f.aliceKey)
	srv.AddKey(t, "bob", f.bobKey)
	return f
}

// repo creates a fresh repository alice/<prefix>-<n> and returns its name.
func (f *fixture) repo(t *testing.T, prefix string) string {
	f.mu.Lock()
	f.seq++
	name := fmt.Sprintf("alice/%s-%d", prefix, f.seq)
	f.mu.Unlock()
	f.srv.CreateRepo(t, name)
	return name
}

// dir is a fresh empty directory for a client checkout.
func (f *fixture) dir(t *testing.T) string { return t.TempDir() }

// transport is how alice reaches a repository.
type transport struct {
	name string
	url  func(repo string) string
	env  []string
}

func (f *fixture) transports() []transport {
	return []transport{
		{name: "http", url: func(r string) string { return f.srv.HTTPURL(f.aliceToken, r) }},
		{name: "ssh", url: func(r string) string { return f.srv.SSHURL(r) }, env: gitenv.SSHEnv(f.aliceKey)},
	}
}

// git runs git as alice over tr and fails the test on error.
func (f *fixture) git(t *testing.T, tr transport, dir string, args ...string) string {
	t.Helper()
	return f.env.RunEnv(t, dir, tr.env, args...)
}

// try runs git as alice over tr and returns the result.
func (f *fixture) try(tr transport, dir string, args ...string) gitenv.Result {
	return f.env.TryEnv(dir, tr.env, args...)
}

// clone clones repo into a new directory and returns its path.
func (f *fixture) clone(t *testing.T, tr transport, repo string, args ...string) string {
	t.Helper()
	dst := filepath.Join(f.dir(t), "c")
	f.git(t, tr, "", append(append([]string{"clone", "-q"}, args...), tr.url(repo), dst)...)
	return dst
}

// seeded creates a repository with n commits on main and returns its name
// and a work tree cloned from it.
func (f *fixture) seeded(t *testing.T, tr transport, prefix string, n int) (string, string) {
	t.Helper()
	repo := f.repo(t, prefix)
	wt := f.clone(t, tr, repo)
	for i := 0; i < n; i++ {
		f.env.Commit(t, wt, fmt.Sprintf("commit %d", i), map[string]string{
			fmt.Sprintf("f%d.txt", i): strings.Repeat(fmt.Sprintf("line %d\n", i), 50+i),
			"common.txt":              fmt.Sprintf("version %d\n", i),
		})
	}
	f.git(t, tr, wt, "push", "-q", "origin", "HEAD:refs/heads/main")
	return repo, wt
}

// remoteRef is the server's value of ref (empty when absent).
func (f *fixture) remoteRef(t *testing.T, tr transport, repo, ref string) string {
	t.Helper()
	out := f.git(t, tr, "", "ls-remote", tr.url(repo), ref)
	for _, line := range strings.Split(out, "\n") {
		if oid, name, ok := strings.Cut(line, "\t"); ok && name == ref {
			return oid
		}
	}
	return ""
}

func contains(t *testing.T, r gitenv.Result, wants ...string) {
	t.Helper()
	all := r.Stdout + r.Stderr
	for _, w := range wants {
		if strings.Contains(all, w) {
			return
		}
	}
	t.Fatalf("expected one of %q in the output of\n%s", wants, r)
}

func TestE2E(t *testing.T) {
	stores := []struct {
		name string
		open func(*testing.T) gitenv.Store
	}{
		{"file", func(t *testing.T) gitenv.Store { return gitenv.FileStore(t) }},
		{"s3", func(t *testing.T) gitenv.Store { return gitenv.S3Store(t, "e2e") }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			f := newFixture(t, st.open(t))
			for _, tr := range f.transports() {
				t.Run(tr.name, func(t *testing.T) { gitScenarios(t, f, tr) })
			}
			http := f.transports()[0]
			t.Run("auth-http", func(t *testing.T) { authHTTP(t, f) })
			t.Run("auth-ssh", func(t *testing.T) { authSSH(t, f) })
			t.Run("fork-isolation", func(t *testing.T) { forkIsolation(t, f, http) })
			t.Run("repack", func(t *testing.T) { repack(t, f, http) })
			t.Run("gc-live", func(t *testing.T) { gcLive(t, f, http) })
			t.Run("delete-recreate", func(t *testing.T) { deleteRecreate(t, f, http) })
			t.Run("hostile", func(t *testing.T) { hostile(t, f, http) })
			t.Run("names", func(t *testing.T) { names(t, f) })
			t.Run("interop", func(t *testing.T) { interop(t, f) })
			t.Run("big-push", func(t *testing.T) {
				if os.Getenv("RGIT_E2E_BIG") == "0" {
					t.Skip("RGIT_E2E_BIG=0")
				}
				bigPush(t, f, http)
			})
			t.Run("restart", func(t *testing.T) { restart(t, f) })
		})
	}
}

// gitScenarios is the everyday git workflow over one transport.
func gitScenarios(t *testing.T, f *fixture, tr transport) {
	t.Run("clone-empty", func(t *testing.T) {
		repo := f.repo(t, "empty")
		dst := filepath.Join(f.dir(t), "c")
		r := f.try(tr, "", "clone", tr.url(repo), dst)
		if !r.OK() {
			t.Fatalf("%s", r)
		}
		contains(t, r, "empty repository")
		if out := f.git(t, tr, dst, "ls-remote", "origin"); out != "" {
			t.Fatalf("empty repository advertises refs: %q", out)
		}
	})

	t.Run("push-clone-fetch", func(t *testing.T) {
		repo, wt := f.seeded(t, tr, "basic", 2)
		head := f.git(t, tr, wt, "rev-parse", "HEAD")
		c := f.clone(t, tr, repo)
		if got := f.git(t, tr, c, "rev-parse", "HEAD"); got != head {
			t.Fatalf("clone HEAD %s, pushed %s", got, head)
		}
		if got := f.git(t, tr, c, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
			t.Fatalf("clone checked out %s", got)
		}
		f.env.Fsck(t, c)
		next := f.env.Commit(t, wt, "third", map[string]string{"new.txt": "new\n"})
		f.git(t, tr, wt, "push", "-q", "origin", "HEAD:main")
		f.git(t, tr, c, "fetch", "-q")
		if got := f.git(t, tr, c, "rev-parse", "origin/main"); got != next {
			t.Fatalf("fetched origin/main %s, pushed %s", got, next)
		}
		f.git(t, tr, c, "merge", "-q", "--ff-only", "origin/main")
		if b, err := os.ReadFile(filepath.Join(c, "new.txt")); err != nil || string(b) != "new\n" {
			t.Fatalf("new.txt after fetch: %q, %v", b, err)
		}
		f.env.Fsck(t, c)
	})

	t.Run("branch-create-delete-prune", func(t *testing.T) {
		repo, wt := f.seeded(t, tr, "branch", 1)
		f.git(t, tr, wt, "checkout", "-q", "-b", "feature")
		feat := f.env.Commit(t, wt, "feature work", map[string]string{"feat.txt": "x\n"})
		f.git(t, tr, wt, "push", "-q", "origin", "feature")
		c := f.clone(t, tr, repo)
		if got := f.git(t, tr, c, "rev-parse", "origin/feature"); got != feat {
			t.Fatalf("clone origin/feature %s, pushed %s", got, feat)
		}
		f.git(t, tr, wt, "push", "-q", "origin", "--delete", "feature")
		if got := f.remoteRef(t, tr, repo, "refs/heads/feature"); got != "" {
			t.Fatalf("deleted branch still on server at %s", got)
		}
		f.git(t, tr, c, "fetch", "-q", "--prune")
		if r := f.try(tr, c, "rev-parse", "--verify", "-q", "origin/feature"); r.OK() {
			t.Fatalf("fetch --prune kept origin/feature: %s", r)
		}
		f.env.Fsck(t, c)
	})

	t.Run("force-push", func(t *testing.T) {
		repo, wt := f.seeded(t, tr, "force", 2)
		c := f.clone(t, tr, repo)
		f.git(t, tr, wt, "reset", "-q", "--hard", "HEAD~1")
		rewritten := f.env.Commit(t, wt, "rewritten history", map[string]string{"other.txt": "o\n"})
		r := f.try(tr, wt, "push", "origin", "HEAD:main")
		if r.OK() {
			t.Fatalf("non-fast-forward push accepted: %s", r)
		}
		contains(t, r, "rejected", "non-fast-forward")
		f.git(t, tr, wt, "push", "-q", "--force", "origin", "HEAD:main")
		if got := f.remoteRef(t, tr, repo, "refs/heads/main"); got != rewritten {
			t.Fatalf("server main %s after force push of %s", got, rewritten)
		}
		out := f.try(tr, c, "fetch", "origin")
		contains(t, out, "forced update")
		f.env.Fsck(t, c)
	})

	t.Run("tags", func(t *testing.T) {
		repo, wt := f.seeded(t, tr, "tags", 1)
		f.git(t, tr, wt, "tag", "-a", "v1.0", "-m", "release 1.0")
		f.env.Commit(t, wt, "after tag", map[string]string{"after.txt": "a\n"})
		f.git(t, tr, wt, "tag", "light")
		f.git(t, tr, wt, "push", "-q", "origin", "HEAD:main", "--tags")
		c := f.clone(t, tr, repo)
		tags := f.git(t, tr, c, "tag", "-l")
		if tags != "light\nv1.0" {
			t.Fatalf("clone tags %q", tags)
		}
		if got := f.git(t, tr, c, "cat-file", "-t", "v1.0"); got != "tag" {
			t.Fatalf("v1.0 is a %s, want an annotated tag", got)
		}
		if got := f.git(t, tr, c, "describe"); !strings.HasPrefix(got, "v1.0-1-g") {
			t.Fatalf("git describe = %q", got)
		}
		if got := f.git(t, tr, c, "describe", "--tags"); got != "light" {
			t.Fatalf("git describe --tags = %q", got)
		}
		f.env.Fsck(t, c)
	})

	t.Run("shallow-deepen-unshallow", func(t *testing.T) {
		repo, _ := f.seeded(t, tr, "shallow", 6)
		c := f.clone(t, tr, repo, "--depth", "1")
		count := func() string { return f.git(t, tr, c, "rev-list", "--count", "HEAD") }
		if got := count(); got != "1" {
			t.Fatalf("--depth 1 clone has %s commits", got)
		}
		if got := f.git(t, tr, c, "rev-parse", "--is-shallow-repository"); got != "true" {
			t.Fatalf("depth-1 clone is not shallow")
		}
		f.git(t, tr, c, "fetch", "-q", "--deepen", "2")
		if got := count(); got != "3" {
			t.Fatalf("after --deepen 2: %s commits, want 3", got)
		}
		f.git(t, tr, c, "fetch", "-q", "--unshallow")
		if got := count(); got != "6" {
			t.Fatalf("after --unshallow: %s commits, want 6", got)
		}
		if got := f.git(t, tr, c, "rev-parse", "--is-shallow-repository"); got != "false" {
			t.Fatalf("still shallow after --unshallow")
		}
		f.env.Fsck(t, c)
	})

	t.Run("partial-clone", func(t *testing.T) {
		repo, _ := f.seeded(t, tr, "partial", 3)
		c := f.clone(t, tr, repo, "--filter=blob:none", "--no-checkout")
		missing := func(rev string) int {
			out := f.git(t, tr, c, "rev-list", "--objects", "--missing=print", rev)
			n := 0
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "?") {
					n++
				}
			}
			return n
		}
		// Three commits add f0..f2 and rewrite common.txt each time.
		if n := missing("HEAD"); n != 6 {
			t.Fatalf("partial clone misses %d blobs, want 6", n)
		}
		f.git(t, tr, c, "checkout", "-q", "main")
		if n := missing("HEAD^{tree}"); n != 0 {
			t.Fatalf("checkout left %d blobs of HEAD missing", n)
		}
		if n := missing("HEAD"); n != 2 {
			t.Fatalf("after checkout %d blobs missing, want the 2 old versions of common.txt", n)
		}
		if b, err := os.ReadFile(filepath.Join(c, "common.txt")); err != nil || string(b) != "version 2\n" {
			t.Fatalf("common.txt = %q, %v", b, err)
		}
		// Reading history fetches the rest on demand.
		if got := f.git(t, tr, c, "show", "HEAD~2:common.txt"); got != "version 0" {
			t.Fatalf("old common.txt = %q", got)
		}
		f.env.Fsck(t, c)
	})

	t.Run("protocol-versions", func(t *testing.T) {
		repo, wt := f.seeded(t, tr, "proto", 1)
		head := f.git(t, tr, wt, "rev-parse", "HEAD")
		for _, v := range []string{"0", "1", "2"} {
			trace := filepath.Join(f.dir(t), "trace")
			dst := filepath.Join(f.dir(t), "c")
			env := append(append([]string{}, tr.env...), "GIT_TRACE_PACKET="+trace)
			f.env.RunEnv(t, "", env, "-c", "protocol.version="+v, "clone", "-q", tr.url(repo), dst)
			b, err := os.ReadFile(trace)
			if err != nil {
				t.Fatal(err)
			}
			got := serverVersion(string(b))
			if got != v {
				t.Fatalf("protocol.version=%s: server answered version %s\n%s", v, got, b)
			}
			if h := f.git(t, tr, dst, "rev-parse", "HEAD"); h != head {
				t.Fatalf("protocol %s clone HEAD %s, want %s", v, h, head)
			}
			f.env.Fsck(t, dst)
		}
	})

	t.Run("atomic-push-rejected", func(t *testing.T) {
		repo, wt := f.seeded(t, tr, "atomic", 1)
		other := f.clone(t, tr, repo)
		won := f.env.Commit(t, other, "moves main on", map[string]string{"x.txt": "x\n"})
		f.git(t, tr, other, "push", "-q", "origin", "HEAD:main")
		// wt's main is now stale; the new branch alone would be fine.
		f.env.Commit(t, wt, "stale", map[string]string{"y.txt": "y\n"})
		f.git(t, tr, wt, "branch", "fresh")
		r := f.try(tr, wt, "push", "--atomic", "origin", "main", "fresh")
		if r.OK() {
			t.Fatalf("atomic push with a stale ref succeeded: %s", r)
		}
		contains(t, r, "rejected")
		if got := f.remoteRef(t, tr, repo, "refs/heads/fresh"); got != "" {
			t.Fatalf("atomic push created fresh at %s although main was rejected", got)
		}
		if got := f.remoteRef(t, tr, repo, "refs/heads/main"); got != won {
			t.Fatalf("main = %s, want %s", got, won)
		}
	})

	t.Run("push-options", func(t *testing.T) {
		repo, wt := f.seeded(t, tr, "pushopt", 1)
		next := f.env.Commit(t, wt, "with options", nil)
		f.git(t, tr, wt, "push", "-q", "-o", "foo", "-o", "ci.skip=1", "origin", "HEAD:main")
		if got := f.remoteRef(t, tr, repo, "refs/heads/main"); got != next {
			t.Fatalf("main = %s after push with options, want %s", got, next)
		}
	})

	t.Run("concurrent-push", func(t *testing.T) {
		repo, _ := f.seeded(t, tr, "race", 1)
		url := tr.url
		if tr.name == "http" {
			// Over HTTP both pushes go through a proxy that holds each
			// receive-pack POST until both have arrived: both clients have
			// read the old ref, and the server decides between two
			// in-flight pushes.
			url = barrierProxy(t, f.srv.HTTPAddr, f.aliceToken)
		}
		// Over SSH the race is left to the scheduler, several rounds.
		for round := 0; round < 3; round++ {
			a, b := f.clone(t, tr, repo), f.clone(t, tr, repo)
			ca := f.env.Commit(t, a, fmt.Sprintf("a%d", round), map[string]string{"a.txt": "a\n"})
			cb := f.env.Commit(t, b, fmt.Sprintf("b%d", round), map[string]string{"b.txt": "b\n"})
			results := make([]gitenv.Result, 2)
			var start, done sync.WaitGroup
			start.Add(1)
			for i, dir := range []string{a, b} {
				done.Add(1)
				go func() {
					defer done.Done()
					start.Wait()
					results[i] = f.try(tr, dir, "push", url(repo), "HEAD:main")
				}()
			}
			start.Done()
			done.Wait()
			ok := 0
			winner := ""
			for i, r := range results {
				if r.OK() {
					ok++
					winner = []string{ca, cb}[i]
					continue
				}
				// Over HTTP both clients sent their update against the old
				// ref, so this is the server's verdict ("ng main fetch
				// first", which git's HTTP helper shows as "[rejected]").
				contains(t, r, "fetch first", "remote rejected", "failed to update", "stale")
				t.Logf("round %d: loser: %q", round, refLine(r.Stderr))
			}
			if ok != 1 {
				t.Fatalf("round %d: %d pushes succeeded, want exactly 1:\n%s\n%s", round, ok, results[0], results[1])
			}
			if got := f.remoteRef(t, tr, repo, "refs/heads/main"); got != winner {
				t.Fatalf("round %d: main = %s, winner pushed %s", round, got, winner)
			}
		}
	})
}

// refLine is the first per-ref status line ("! [rejected] HEAD -> main
// (...)") of git push's output, or all of it.
func refLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, " -> ") {
			return strings.TrimSpace(l)
		}
	}
	return stderr
}

// barrierProxy starts an HTTP proxy to the rgit server at addr that holds
// every receive-pack POST until a second one arrives (or 20 s pass), and
// returns a URL function for it with token as the credential.
func barrierProxy(t *testing.T, addr, token string) func(string) string {
	target := &url.URL{Scheme: "http", Host: addr}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	waiting := make(chan struct{})
	arrived := 0
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			mu.Lock()
			arrived++
			gate := waiting
			if arrived%2 == 0 {
				close(waiting)
				waiting = make(chan struct{})
			}
			mu.Unlock()
			select {
			case <-gate:
			case <-time.After(20 * time.Second):
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ps.Close)
	return func(repo string) string {
		return "http://x:" + token + "@" + strings.TrimPrefix(ps.URL, "http://") + "/" + repo + ".git"
	}
}

// serverVersion reads a GIT_TRACE_PACKET log and returns the protocol
// version the server answered with ("0" when it announced none).
func serverVersion(trace string) string {
	for _, line := range strings.Split(trace, "\n") {
		_, after, ok := strings.Cut(line, "< ")
		if !ok || !strings.Contains(line, "packet:") {
			continue
		}
		after = strings.TrimSpace(after)
		if v, ok := strings.CutPrefix(after, "version "); ok {
			return v
		}
	}
	return "0"
}
