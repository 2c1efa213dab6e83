package admin_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/frontend/httpgit"
	"github.com/rgit/rgit/transport/product/admin"
	"github.com/rgit/rgit/transport/service/engine"
)

// liveNode is one node over a fault-injecting store: the git front end
// (smart HTTP, driven by the real git client) and the admin endpoint.
type liveNode struct {
	store         *faultstore.Store
	node          *actors.Node
	gitURL, admin string
	token         string
}

const liveSecret = "0123456789abcdef0123"

func startLiveNode(t *testing.T) *liveNode {
	t.Helper()
	ctx := context.Background()
	st := faultstore.New(memstore.New(), 1)
	cache, err := packcache.Open(t.TempDir(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	d := repo.Deps{Store: st, Cache: cache}
	n, err := actors.NewNode(actors.Config{Deps: d, MaintenanceSlots: -1}) // no roll-ups: the tests count packs
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	creds := auth.NewStore(st)
	tok, err := creds.CreateToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bitmaps := repo.NewBitmapBuilds()
	t.Cleanup(bitmaps.Close)
	eng := &engine.NodeResolver{Node: n, Deps: d, IncomingDir: cache.TempDir(), Bitmaps: bitmaps, Log: zap.NewNop()}
	git, err := httpgit.New(httpgit.Config{Resolver: eng, Auth: creds})
	if err != nil {
		t.Fatal(err)
	}
	gitSrv := httptest.NewServer(git)
	t.Cleanup(gitSrv.Close)
	admSrv := httptest.NewServer(&admin.Server{Node: n, Deps: d, Auth: creds, Secret: liveSecret,
		Log: zap.NewNop(), GCMinAge: time.Hour})
	t.Cleanup(admSrv.Close)
	return &liveNode{store: st, node: n, token: tok,
		gitURL: strings.Replace(gitSrv.URL, "http://", "http://x:"+tok+"@", 1),
		admin:  strings.TrimPrefix(admSrv.URL, "http://")}
}

func (l *liveNode) url(repo string) string { return l.gitURL + "/" + repo + ".git" }

func (l *liveNode) call(m admin.Msg) (out, progress string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var o, p bytes.Buffer
	err = admin.Call(ctx, l.admin, liveSecret, m, &p, &o)
	return strings.TrimSpace(o.String()), p.String(), err
}

// fastImport adds n commits on main to the repository in dir, each
// rewriting one of 40 files with 2 KB of fresh text, in one git process.
func fastImport(t *testing.T, env *gitenv.Env, dir string, from, n int) {
	t.Helper()
	var b strings.Builder
	data := func(s string) { fmt.Fprintf(&b, "data %d\n%s\n", len(s), s) }
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "commit refs/heads/main\ncommitter t <t@rgit.invalid> %d +0000\n", 1700000000+i)
		data(fmt.Sprint("commit ", i))
		if i == from && from > 0 { // continue the existing branch; later commits follow on
			b.WriteString("from refs/heads/main^0\n")
		}
		fmt.Fprintf(&b, "M 644 inline f%d.txt\n", i%40)
		data(strings.Repeat(fmt.Sprintf("line %d of commit %d\n", i%7, i), 100))
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir, cmd.Env = dir, env.Environ()
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fast-import: %v\n%s", err, out)
	}
	env.Run(t, dir, "reset", "-q", "--hard", "main")
}

// within runs fn on its own goroutine and fails the test unless it ends
// within d (it must not wait for the held repack).
func within(t *testing.T, d time.Duration, what string, fn func() gitenv.Result) gitenv.Result {
	t.Helper()
	done := make(chan gitenv.Result, 1)
	go func() { done <- fn() }()
	select {
	case r := <-done:
		if !r.OK() {
			t.Fatalf("%s: %s", what, r)
		}
		return r
	case <-time.After(d):
		t.Fatalf("%s did not finish within %v while the repack was held", what, d)
	}
	panic("unreachable")
}

// A repack builds and uploads its pack outside the repo actor: while it is
// held just before its switch (at the bitmap upload), ls-remote and a push
// complete. The push lands first, so the switch is refused and the repack
// builds again from a fresh snapshot: the final pack holds the push.
func TestRepackDoesNotBlockTheRepository(t *testing.T) {
	l := startLiveNode(t)
	env := gitenv.New(t)
	const name = "alice/big"
	if _, _, err := l.call(admin.CreateRepo{Repo: name}); err != nil {
		t.Fatal(err)
	}
	work := env.Scratch(t)
	fastImport(t, env, work, 0, 300)
	env.Run(t, work, "push", "-q", l.url(name), "main")
	// The first push builds its pack's bitmap in the background; that
	// upload must be over before the gate goes up.
	prefix := "objects/" + name + "/pack/"
	waitKey(t, l.store, prefix, ".bitmap")
	fastImport(t, env, work, 300, 100)
	env.Run(t, work, "push", "-q", l.url(name), "main")

	gate := l.store.HoldKeys(faultstore.OpPut, prefix, ".bitmap")
	defer gate.Release()
	type result struct {
		out, progress string
		err           error
	}
	repacked := make(chan result, 1)
	go func() {
		out, progress, err := l.call(admin.Repack{Repo: name})
		repacked <- result{out, progress, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := gate.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	within(t, 20*time.Second, "ls-remote", func() gitenv.Result { return env.Try("", "ls-remote", l.url(name)) })
	fastImport(t, env, work, 400, 1)
	pushed := env.Run(t, work, "rev-parse", "HEAD")
	within(t, 20*time.Second, "push", func() gitenv.Result { return env.Try(work, "push", l.url(name), "main") })
	gate.Release()

	r := <-repacked
	if r.err != nil {
		t.Fatalf("repack: %v\n%s", r.err, r.progress)
	}
	if !strings.Contains(r.progress, "Repository changed during the repack; attempt: 2") {
		t.Fatalf("repack did not start again after the push:\n%s", r.progress)
	}
	if got := env.Run(t, "", "ls-remote", l.url(name), "refs/heads/main"); !strings.HasPrefix(got, pushed) {
		t.Fatalf("push lost: server has %q, pushed %s", got, pushed)
	}
	mirror := filepath.Join(t.TempDir(), "m")
	env.Run(t, "", "clone", "-q", "--mirror", l.url(name), mirror)
	env.Fsck(t, mirror)
	var objs int
	for _, line := range strings.Split(env.Run(t, mirror, "count-objects", "-v"), "\n") {
		if v, ok := strings.CutPrefix(line, "in-pack: "); ok {
			fmt.Sscan(v, &objs)
		}
	}
	if !strings.Contains(r.out, fmt.Sprintf("(%d objects)", objs)) {
		t.Fatalf("repack said %q; the repository has %d objects", r.out, objs)
	}
	s, err := l.node.Session(context.Background(), names.MustParse("alice/big"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if len(s.Snapshot.Packs) != 1 || !strings.Contains(r.out, s.Snapshot.Packs[0].Name) {
		t.Fatalf("packs after repack: %+v; repack said %q", s.Snapshot.Packs, r.out)
	}
}

// waitKey waits until a key under prefix ending in suffix exists.
func waitKey(t *testing.T, st *faultstore.Store, prefix, suffix string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for info, err := range st.List(context.Background(), prefix, "") {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(info.Key, suffix) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s under %s", suffix, prefix)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A repository pushed to during every attempt is not repacked: the repack
// gives up after its last attempt with a clear error, every push is kept,
// and the pack list is as the pushes left it.
func TestRepackGivesUpUnderConstantPushes(t *testing.T) {
	l := startLiveNode(t)
	env := gitenv.New(t)
	const name = "alice/busy"
	if _, _, err := l.call(admin.CreateRepo{Repo: name}); err != nil {
		t.Fatal(err)
	}
	work := env.Scratch(t)
	fastImport(t, env, work, 0, 20)
	env.Run(t, work, "push", "-q", l.url(name), "main")
	prefix := "objects/" + name + "/pack/"
	waitKey(t, l.store, prefix, ".bitmap")

	gate := l.store.HoldKeys(faultstore.OpPut, prefix, ".bitmap")
	repacked := make(chan error, 1)
	go func() {
		_, _, err := l.call(admin.Repack{Repo: name})
		repacked <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const attempts = 3 // actors.repackAttempts
	for i := range attempts {
		if err := gate.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		fastImport(t, env, work, 20+i, 1)
		within(t, 20*time.Second, "push", func() gitenv.Result { return env.Try(work, "push", l.url(name), "main") })
		held := gate
		if i < attempts-1 {
			gate = l.store.HoldKeys(faultstore.OpPut, prefix, ".bitmap") // catches the next attempt
		}
		held.Release()
	}
	err := <-repacked
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") ||
		!strings.Contains(err.Error(), repo.ErrConcurrentUpdate.Error()) {
		t.Fatalf("repack under constant pushes: %v", err)
	}
	head := env.Run(t, work, "rev-parse", "HEAD")
	if got := env.Run(t, "", "ls-remote", l.url(name), "refs/heads/main"); !strings.HasPrefix(got, head) {
		t.Fatalf("push lost: server has %q, pushed %s", got, head)
	}
	s, err := l.node.Session(context.Background(), names.MustParse("alice/busy"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if len(s.Snapshot.Packs) != 1+attempts {
		t.Fatalf("pack list after a refused repack: %+v", s.Snapshot.Packs)
	}
}
