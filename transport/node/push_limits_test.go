package node_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/wire/pktline"
)

// tagRefs creates n tags t0..t(n-1) on commit in repository dir with one
// `git update-ref --stdin` (a ref per git process would take minutes).
func tagRefs(t *testing.T, env *gitenv.Env, dir, commit string, n int) {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "create refs/tags/t%d %s\n", i, commit)
	}
	in := filepath.Join(t.TempDir(), "refs")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := env.Command(dir, nil, "sh", "-c", `git update-ref --stdin < "$1"`, "sh", in); !r.OK() {
		t.Fatal(r)
	}
}

// TestMirrorPushManyRefs: a mirror push of 20,001 refs (one branch, 20,000
// tags) is accepted in one push; ls-remote lists every ref and a mirror
// clone matches the source ref for ref. Over SSH: git's HTTP transport
// helper spends minutes matching that many refspecs on the client side.
func TestMirrorPushManyRefs(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 20,001 refs")
	}
	const tags = 20_000
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := gitenv.New(t)
	key := env.NewSSHKey(t, "alice")
	srv.AddKey(t, "alice", key)
	srv.CreateRepo(t, "alice/mirror")
	src := env.Scratch(t)
	head := env.Commit(t, src, "c", map[string]string{"a": "b"})
	tagRefs(t, env, src, head, tags)

	ssh := gitenv.SSHEnv(key)
	start := time.Now()
	env.RunEnv(t, src, ssh, "push", "-q", "--mirror", srv.SSHURL("alice/mirror"))
	t.Logf("mirror push of %d refs: %s", tags+1, time.Since(start))

	refs := env.RunEnv(t, "", ssh, "ls-remote", "--refs", srv.SSHURL("alice/mirror"))
	if n := strings.Count(refs, "\n") + 1; n != tags+1 {
		t.Fatalf("ls-remote lists %d refs, want %d", n, tags+1)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	env.RunEnv(t, "", ssh, "clone", "-q", "--mirror", srv.SSHURL("alice/mirror"), clone)
	want := env.Run(t, src, "for-each-ref", "--format=%(objectname) %(refname)")
	if got := env.Run(t, clone, "for-each-ref", "--format=%(objectname) %(refname)"); got != want {
		t.Fatalf("mirror clone refs differ from the source (%d vs %d lines)", strings.Count(got, "\n"), strings.Count(want, "\n"))
	}
}

// TestPushLimitsSpeakGit: every push limit reaches git's user as a message
// naming the limit and its setting, over HTTP and SSH, and changes
// nothing.
func TestPushLimitsSpeakGit(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t),
		"RGIT_MAX_PUSH_REFS=10", "RGIT_MAX_PUSH_OPTIONS=1", "RGIT_MAX_OBJECT_SIZE=100000", "RGIT_MAX_DELTA_DEPTH=2", "RGIT_MAX_PACK_SIZE=150000")
	env := gitenv.New(t)
	tok := srv.AddToken(t, "alice")
	key := env.NewSSHKey(t, "alice")
	srv.AddKey(t, "alice", key)
	ssh := gitenv.SSHEnv(key)

	work := env.Scratch(t)
	head := env.Commit(t, work, "c", map[string]string{"a": "b"})
	tagRefs(t, env, work, head, 20)
	// Ten revisions of one file, each changing another line: each is
	// closest to the one before, so pack-objects chains their deltas
	// (6 deep with git 2.39).
	deep := env.Scratch(t)
	lines := make([]string, 500)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d of a file that changes a little each commit\n", i)
	}
	for i := 0; i < 10; i++ {
		lines[i*40] = fmt.Sprintf("changed in revision %d\n", i)
		env.Commit(t, deep, fmt.Sprint(i), map[string]string{"f": strings.Join(lines, "")})
	}
	big := env.Scratch(t)
	env.Commit(t, big, "big", map[string]string{"big": strings.Repeat("x", 200_000)})

	// Four incompressible files, each under the object limit, make a pack
	// over the pack limit.
	wide := env.Scratch(t)
	files := map[string]string{}
	for i := range 4 {
		files[fmt.Sprint("r", i)] = incompressible(60_000, byte(i))
	}
	env.Commit(t, wide, "wide", files)

	cases := []struct {
		name string
		dir  string
		args []string
		want string
	}{
		{"push refs", work, []string{"push", "--mirror"}, "too many ref updates in one push (limit 10, set RGIT_MAX_PUSH_REFS)"},
		{"push options", work, []string{"push", "-o", "a", "-o", "b"}, "too many push options (limit 1, set RGIT_MAX_PUSH_OPTIONS)"},
		{"object size", big, []string{"push"}, "remote unpack failed: object too large (limit 100000 bytes, set RGIT_MAX_OBJECT_SIZE)"},
		{"pack size", wide, []string{"push"}, "remote unpack failed: pack too large (limit 150000 bytes, set RGIT_MAX_PACK_SIZE)"},
		{"delta depth", deep, []string{"-c", "pack.depth=50", "push"}, "remote unpack failed: delta chain too deep (limit 2, set RGIT_MAX_DELTA_DEPTH)"},
	}
	for i, c := range cases {
		for _, tr := range []string{"http", "ssh"} {
			t.Run(c.name+"/"+tr, func(t *testing.T) {
				repo := fmt.Sprintf("alice/r%d%s", i, tr)
				srv.CreateRepo(t, repo)
				url, extra := srv.HTTPURL(tok, repo), []string(nil)
				if tr == "ssh" {
					url, extra = srv.SSHURL(repo), ssh
				}
				args := append(append([]string(nil), c.args...), url)
				if c.name != "push refs" {
					args = append(args, "main")
				}
				r := env.TryEnv(c.dir, extra, args...)
				if r.OK() || !strings.Contains(r.Stderr, c.want) {
					t.Fatalf("%s\nwant the client to print %q", r, c.want)
				}
				if refs := env.RunEnv(t, "", extra, "ls-remote", url); refs != "" {
					t.Errorf("refused push changed refs:\n%s", refs)
				}
			})
		}
	}
}

// TestPushRefsServerTime: a receive-pack request of 20,000 new refs is
// answered, every ref ok, within the server's budget (from the end of the
// client's request to the report); one over the limit is refused naming
// RGIT_MAX_PUSH_REFS. git cannot send 100,001 commands in reasonable time,
// so the requests are made by hand.
func TestPushRefsServerTime(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 20,000 refs")
	}
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := gitenv.New(t)
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/many")
	work := env.Scratch(t)
	head := env.Commit(t, work, "c", map[string]string{"a": "b"})
	r := env.Command(work, nil, "sh", "-c", "git rev-list --objects main | git pack-objects --stdout")
	if !r.OK() {
		t.Fatal(r)
	}
	zero := strings.Repeat("0", 40)
	cmds := func(n int) []string {
		c := make([]string, n)
		for i := range c {
			c[i] = fmt.Sprintf("%s %s refs/tags/t%d", zero, head, i)
		}
		return c
	}
	caps := "report-status side-band-64k atomic"

	body := pushRequest(caps, cmds(100_001), []byte(r.Stdout))
	status, answer := postReceivePack(t, srv.HTTPAddr, tok, "alice/many", body, false)
	want := "too many ref updates in one push (limit 100000, set RGIT_MAX_PUSH_REFS)"
	if status != http.StatusOK || !strings.Contains(answer, want) {
		t.Fatalf("100,001 ref updates: status %d, answer %.300q; want %q", status, answer, want)
	}

	const n = 20_000
	body = pushRequest(caps, cmds(n), []byte(r.Stdout))
	start := time.Now()
	status, answer = postReceivePack(t, srv.HTTPAddr, tok, "alice/many", body, false)
	took := time.Since(start)
	t.Logf("server time for %d new refs: %s", n, took)
	report := sidebandData(t, answer)
	if status != http.StatusOK || strings.Count(report, "ok refs/tags/") != n || !strings.HasPrefix(report, "unpack ok\n") {
		t.Fatalf("push of %d refs: status %d, report %.300q", n, status, report)
	}
	// The budget is 2 s; the bound leaves room for a loaded CI
	// machine while still failing a quadratic ref transaction (minutes).
	if took > 20*time.Second {
		t.Errorf("push of %d refs took %s", n, took)
	}
}

// sidebandData is the band-1 data of a side-band response, read as
// pkt-lines: their payloads, concatenated.
func sidebandData(t *testing.T, answer string) string {
	t.Helper()
	var band1 strings.Builder
	r := pktline.NewReader(strings.NewReader(answer))
	for {
		k, p, err := r.ReadPacket()
		if err != nil {
			break
		}
		if k == pktline.Data && len(p) > 0 && p[0] == 1 {
			band1.Write(p[1:])
		}
	}
	var out strings.Builder
	r = pktline.NewReader(strings.NewReader(band1.String()))
	for {
		k, p, err := r.ReadPacket()
		if err != nil {
			break
		}
		if k == pktline.Data {
			out.Write(p)
		}
	}
	return out.String()
}

// incompressible returns n bytes that deflate cannot shrink, the same for
// the same seed.
func incompressible(n int, seed byte) string {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{seed}).Read(b)
	return string(b)
}
