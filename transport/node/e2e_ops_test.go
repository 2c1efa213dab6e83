package node_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

// Messages git prints for each HTTP answer when prompting is disabled.
var (
	msg401 = []string{"could not read Username", "Authentication failed"}
	msg403 = []string{"403"}
	msg404 = []string{"not found"}
)

// authHTTP runs the access matrix anonymous/other-user/owner ×
// public/private/missing × clone/push over smart HTTP.
func authHTTP(t *testing.T, f *fixture) {
	http := f.transports()[0]
	pub, wt := f.seeded(t, http, "auth-pub", 1)
	f.srv.Admin(t, "set-visibility", pub, "public")
	priv, _ := f.seeded(t, http, "auth-priv", 1)
	missing := "alice/auth-missing-never-created"

	type want struct {
		clone, push []string // nil: succeeds
	}
	callers := []struct {
		name, token string
		public      want
		private     want
		missing     want
	}{
		{"anonymous", "", want{nil, msg401}, want{msg401, msg401}, want{msg401, msg401}},
		{"other-user", f.bobToken, want{nil, msg403}, want{msg404, msg404}, want{msg404, msg404}},
		{"owner", f.aliceToken, want{nil, nil}, want{nil, nil}, want{msg404, msg404}},
	}
	for _, c := range callers {
		for _, target := range []struct {
			name, repo string
			want       want
		}{{"public", pub, c.public}, {"private", priv, c.private}, {"missing", missing, c.missing}} {
			t.Run(c.name+"/"+target.name, func(t *testing.T) {
				url := f.srv.HTTPURL(c.token, target.repo)
				dst := filepath.Join(f.dir(t), "c")
				r := f.env.Try("", "clone", "-q", url, dst)
				check(t, "clone", r, target.want.clone)
				// Push a new branch so owners' successful pushes never
				// collide with each other.
				next := f.env.Commit(t, wt, "push by "+c.name+" to "+target.name, nil)
				r = f.env.Try(wt, "push", url, "HEAD:refs/heads/"+c.name)
				check(t, "push", r, target.want.push)
				if target.want.push == nil {
					if got := f.remoteRef(t, http, target.repo, "refs/heads/"+c.name); got != next {
						t.Fatalf("pushed %s, server has %q", next, got)
					}
				} else if target.repo != missing {
					if got := f.remoteRef(t, http, target.repo, "refs/heads/"+c.name); got != "" {
						t.Fatalf("refused push still created the branch at %s", got)
					}
				}
			})
		}
	}
	// git sends URL credentials only when challenged, so a bad token shows
	// on a repository that anonymous callers may not read.
	t.Run("bad-token", func(t *testing.T) {
		r := f.env.Try("", "ls-remote", f.srv.HTTPURL("not-a-token", priv))
		check(t, "ls-remote", r, msg401)
	})
}

func check(t *testing.T, op string, r gitenv.Result, want []string) {
	t.Helper()
	if want == nil {
		if !r.OK() {
			t.Fatalf("%s failed: %s", op, r)
		}
		return
	}
	if r.OK() {
		t.Fatalf("%s succeeded, want failure with %q: %s", op, want, r)
	}
	contains(t, r, want...)
}

// authSSH runs the access matrix unknown-key/other-user/owner ×
// public/private/missing × clone/push over SSH. An unknown key is
// anonymous: it may read public repositories only.
func authSSH(t *testing.T, f *fixture) {
	http := f.transports()[0]
	pub, wt := f.seeded(t, http, "sshauth-pub", 1)
	f.srv.Admin(t, "set-visibility", pub, "public")
	priv, _ := f.seeded(t, http, "sshauth-priv", 1)
	missing := "alice/sshauth-missing-never-created"
	notFound := []string{"repository not found"}
	denied := []string{"permission denied", "not found"}

	type want struct{ clone, push []string }
	callers := []struct {
		name                     string
		key                      gitenv.Key
		public, private, missing want
	}{
		{"unknown-key", f.stKey, want{nil, denied}, want{notFound, notFound}, want{notFound, notFound}},
		{"other-user", f.bobKey, want{nil, []string{"permission denied"}}, want{notFound, notFound}, want{notFound, notFound}},
		{"owner", f.aliceKey, want{nil, nil}, want{nil, nil}, want{notFound, notFound}},
	}
	for _, c := range callers {
		for _, target := range []struct {
			name, repo string
			want       want
		}{{"public", pub, c.public}, {"private", priv, c.private}, {"missing", missing, c.missing}} {
			t.Run(c.name+"/"+target.name, func(t *testing.T) {
				env := gitenv.SSHEnv(c.key)
				url := f.srv.SSHURL(target.repo)
				r := f.env.TryEnv("", env, "clone", "-q", url, filepath.Join(f.dir(t), "c"))
				check(t, "clone", r, target.want.clone)
				next := f.env.Commit(t, wt, "ssh push by "+c.name+" to "+target.name, nil)
				r = f.env.TryEnv(wt, env, "push", url, "HEAD:refs/heads/ssh-"+c.name)
				check(t, "push", r, target.want.push)
				if target.repo == missing {
					return
				}
				got := f.remoteRef(t, http, target.repo, "refs/heads/ssh-"+c.name)
				if target.want.push == nil && got != next {
					t.Fatalf("pushed %s, server has %q", next, got)
				}
				if target.want.push != nil && got != "" {
					t.Fatalf("refused push still created the branch at %s", got)
				}
			})
		}
	}
}

// forkIsolation: a fork starts with the source's refs, pushes to either
// side do not leak to the other, and the fork outlives its source.
func forkIsolation(t *testing.T, f *fixture, tr transport) {
	src, wt := f.seeded(t, tr, "forksrc", 2)
	f.git(t, tr, wt, "tag", "-a", "v1", "-m", "v1")
	f.git(t, tr, wt, "push", "-q", "origin", "v1")
	srcMain := f.remoteRef(t, tr, src, "refs/heads/main")
	fork := "bob/" + strings.TrimPrefix(src, "alice/") + "-fork"
	f.srv.Admin(t, "fork", src, fork)

	bob := transport{name: "http", url: func(r string) string { return f.srv.HTTPURL(f.bobToken, r) }}
	c := f.clone(t, bob, fork)
	if got := f.git(t, bob, c, "rev-parse", "HEAD"); got != srcMain {
		t.Fatalf("fork HEAD %s, source main %s", got, srcMain)
	}
	if got := f.git(t, bob, c, "tag", "-l"); got != "v1" {
		t.Fatalf("fork tags %q", got)
	}
	forkHead := f.env.Commit(t, c, "fork only", map[string]string{"fork.txt": "fork\n"})
	f.git(t, bob, c, "push", "-q", "origin", "HEAD:main")
	if got := f.remoteRef(t, tr, src, "refs/heads/main"); got != srcMain {
		t.Fatalf("push to fork moved source main to %s", got)
	}
	f.env.Commit(t, wt, "source only", map[string]string{"src.txt": "src\n"})
	f.git(t, tr, wt, "push", "-q", "origin", "HEAD:main")
	if got := f.remoteRef(t, bob, fork, "refs/heads/main"); got != forkHead {
		t.Fatalf("push to source moved fork main to %s", got)
	}
	// Alice cannot push to bob's fork.
	r := f.env.Try(wt, "push", f.srv.HTTPURL(f.aliceToken, fork), "HEAD:refs/heads/alice")
	check(t, "push to someone else's fork", r, msg404)

	f.srv.Admin(t, "delete-repo", src)
	if r := f.env.Try("", "ls-remote", tr.url(src)); r.OK() {
		t.Fatalf("deleted source still answers: %s", r)
	}
	c2 := f.clone(t, bob, fork)
	if got := f.git(t, bob, c2, "rev-parse", "HEAD"); got != forkHead {
		t.Fatalf("fork HEAD after source deletion %s, want %s", got, forkHead)
	}
	f.env.Fsck(t, c2)
}

// repack: several pushes make several packs; after repack every ref is
// still fetchable and a fresh clone is complete.
func repack(t *testing.T, f *fixture, tr transport) {
	repo, wt := f.seeded(t, tr, "repack", 1)
	for i := 0; i < 4; i++ {
		f.env.Commit(t, wt, fmt.Sprintf("push %d", i), map[string]string{fmt.Sprintf("r%d.txt", i): strings.Repeat("r", 1000*(i+1))})
		f.git(t, tr, wt, "push", "-q", "origin", "HEAD:main")
	}
	f.git(t, tr, wt, "branch", "side", "HEAD~2")
	f.git(t, tr, wt, "tag", "-a", "rel", "-m", "rel", "HEAD~1")
	f.git(t, tr, wt, "tag", "lw", "HEAD~3")
	f.git(t, tr, wt, "push", "-q", "origin", "side", "rel", "lw")
	before := f.git(t, tr, "", "ls-remote", tr.url(repo))

	out := f.srv.Admin(t, "repack", repo)
	if !strings.Contains(out, "repacked "+repo) {
		t.Fatalf("repack said %q", out)
	}
	if after := f.git(t, tr, "", "ls-remote", tr.url(repo)); after != before {
		t.Fatalf("refs changed by repack:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	c := f.clone(t, tr, repo, "--mirror")
	if got := f.git(t, tr, c, "for-each-ref", "--format=%(objectname)\t%(refname)"); !sameRefs(got, before) {
		t.Fatalf("mirror clone refs:\n%s\nserver:\n%s", got, before)
	}
	f.env.Fsck(t, c)
	// Every pack is now one: a full clone gets one pack whose object count
	// is what the repack reported.
	objs := countObjects(t, f.env, c)
	if !strings.Contains(out, fmt.Sprintf("(%d objects)", objs)) {
		t.Fatalf("repack reported %q; the full clone has %d objects", out, objs)
	}
	// The repacked repository still takes pushes and a second repack.
	f.env.Commit(t, wt, "after repack", nil)
	f.git(t, tr, wt, "push", "-q", "origin", "HEAD:main")
	f.srv.Admin(t, "repack", repo)
	f.srv.Admin(t, "gc", repo)
	f.env.Fsck(t, f.clone(t, tr, repo))
}

// gcLive: gc and repack on the serving node go through its repo actor,
// so they never fence it: every push around them is acknowledged.
func gcLive(t *testing.T, f *fixture, tr transport) {
	repo, wt := f.seeded(t, tr, "gclive", 1)
	pushOK := func(what string) {
		t.Helper()
		next := f.env.Commit(t, wt, what, map[string]string{what + ".txt": what + "\n"})
		if r := f.try(tr, wt, "push", "origin", "HEAD:main"); !r.OK() {
			t.Fatalf("push %s: %s\n%s", what, r, f.srv.LogTail(20))
		}
		if got := f.remoteRef(t, tr, repo, "refs/heads/main"); got != next {
			t.Fatalf("push %s: server has %q, pushed %s", what, got, next)
		}
	}
	f.srv.Admin(t, "gc", repo)
	pushOK("after-gc")
	f.srv.Admin(t, "repack", repo)
	pushOK("after-repack")
	f.srv.Admin(t, "gc", repo)
	pushOK("after-second-gc")
	f.env.Fsck(t, f.clone(t, tr, repo))
}

// sameRefs compares for-each-ref output with ls-remote output (which also
// lists HEAD and peeled tags).
func sameRefs(local, remote string) bool {
	var want []string
	for _, l := range strings.Split(remote, "\n") {
		if strings.HasSuffix(l, "^{}") || strings.HasSuffix(l, "\tHEAD") {
			continue
		}
		want = append(want, l)
	}
	return strings.Join(want, "\n") == local
}

func countObjects(t *testing.T, env *gitenv.Env, dir string) int {
	t.Helper()
	out := env.Run(t, dir, "count-objects", "-v")
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "in-pack: "); ok {
			fmt.Sscan(v, &n)
		}
	}
	return n
}

// deleteRecreate: a deleted repository is gone, and re-creating the name
// gives an empty repository.
func deleteRecreate(t *testing.T, f *fixture, tr transport) {
	repo, _ := f.seeded(t, tr, "recreate", 2)
	f.srv.Admin(t, "delete-repo", repo)
	r := f.env.Try("", "clone", tr.url(repo), filepath.Join(f.dir(t), "c"))
	check(t, "clone deleted", r, msg404)
	list := f.srv.Admin(t, "list-repos")
	for _, l := range strings.Split(list, "\n") {
		if strings.TrimSpace(l) == repo {
			t.Fatalf("list-repos still shows %s:\n%s", repo, list)
		}
	}
	f.srv.CreateRepo(t, repo)
	if out := f.git(t, tr, "", "ls-remote", tr.url(repo)); out != "" {
		t.Fatalf("re-created repository is not empty:\n%s", out)
	}
	c := f.clone(t, tr, repo)
	f.env.Commit(t, c, "fresh start", map[string]string{"a": "a\n"})
	f.git(t, tr, c, "push", "-q", "origin", "HEAD:main")
	if got := f.git(t, tr, c, "rev-list", "--count", "origin/main"); got != "1" {
		t.Fatalf("re-created repository history has %s commits", got)
	}
}

// hostile: the server's checks on what is pushed.
func hostile(t *testing.T, f *fixture, tr transport) {
	t.Run("dotgit-tree-entry", func(t *testing.T) {
		repo, wt := f.seeded(t, tr, "dotgit", 1)
		before := f.remoteRef(t, tr, repo, "refs/heads/main")
		for _, name := range []string{".GIT", ".git", "git~1"} {
			blob := f.env.Command(wt, nil, "sh", "-c", "echo evil | git hash-object -w --stdin")
			if !blob.OK() {
				t.Fatal(blob)
			}
			hooks := f.env.Command(wt, nil, "sh", "-c", fmt.Sprintf("printf '100755 blob %s\\tpost-checkout\\n' | git mktree", blob.Out()))
			if !hooks.OK() {
				t.Fatal(hooks)
			}
			tree := f.env.Command(wt, nil, "sh", "-c", fmt.Sprintf("printf '040000 tree %s\\t%s\\n' | git mktree", hooks.Out(), name))
			if !tree.OK() {
				t.Fatal(tree)
			}
			commit := f.git(t, tr, wt, "commit-tree", tree.Out(), "-p", "HEAD", "-m", "evil "+name)
			r := f.try(tr, wt, "push", "origin", commit+":refs/heads/main")
			if r.OK() {
				t.Fatalf("push of a tree entry %q accepted: %s", name, r)
			}
			contains(t, r, "dotgit", ".git", ".GIT")
			if got := f.remoteRef(t, tr, repo, "refs/heads/main"); got != before {
				t.Fatalf("main moved to %s after a rejected push", got)
			}
		}
	})
	t.Run("bad-ref-names", func(t *testing.T) {
		repo, wt := f.seeded(t, tr, "badref", 1)
		head := f.git(t, tr, wt, "rev-parse", "HEAD")
		for _, ref := range []string{
			"refs/heads/bad..name", "refs/heads/x.lock", "refs/heads/a b", "refs/heads/trail/",
			"refs/heads/at@{x}", "refs/heads/ctl\x01", "refs/heads/star*", "refs/heads/.hidden",
			"refs/heads/q?", "refs/heads/col:on", "refs/heads/back\\slash", "main", "HEAD",
		} {
			t.Run(fmt.Sprintf("%q", ref), func(t *testing.T) {
				status, body := rawPush(t, f, repo, head, ref)
				if status == 200 && !strings.Contains(body, "ng "+ref) && !strings.Contains(body, "unpack ") {
					t.Fatalf("push to %q: status %d, no ng in report:\n%q", ref, status, body)
				}
				t.Logf("status %d: %q", status, body)
				if status == 200 && strings.Contains(body, "ok "+ref) {
					t.Fatalf("push to %q reported ok:\n%q", ref, body)
				}
			})
		}
		refs := f.git(t, tr, "", "ls-remote", tr.url(repo))
		for _, l := range strings.Split(refs, "\n") {
			if _, name, _ := strings.Cut(l, "\t"); name != "HEAD" && name != "refs/heads/main" {
				t.Fatalf("bad ref created: %q\n%s", name, refs)
			}
		}
	})
}

// rawPush sends one receive-pack command creating ref at oid (an object
// the server already has) straight over smart HTTP, bypassing the git
// client's own ref-name checks, and returns the HTTP status and body.
func rawPush(t *testing.T, f *fixture, repo, oid, ref string) (int, string) {
	t.Helper()
	body := pushRequest("report-status", []string{strings.Repeat("0", 40) + " " + oid + " " + ref}, nil)
	return postReceivePack(t, f.srv.HTTPAddr, f.aliceToken, repo, body, false)
}

// restart: everything written before a restart is there after it.
func restart(t *testing.T, f *fixture) {
	http := f.transports()[0]
	repo, wt := f.seeded(t, http, "restart", 3)
	f.git(t, http, wt, "tag", "-a", "v1", "-m", "v1")
	f.git(t, http, wt, "push", "-q", "origin", "v1")
	pub, _ := f.seeded(t, http, "restart-pub", 1)
	f.srv.Admin(t, "set-visibility", pub, "public")
	before := f.git(t, http, "", "ls-remote", http.url(repo))
	list := f.srv.Admin(t, "list-repos")

	f.srv.Restart(t)

	if got := f.git(t, http, "", "ls-remote", http.url(repo)); got != before {
		t.Fatalf("refs after restart:\n%s\nbefore:\n%s", got, before)
	}
	if got := f.srv.Admin(t, "list-repos"); got != list {
		t.Fatalf("list-repos after restart:\n%s\nbefore:\n%s", got, list)
	}
	// Tokens, keys and visibility survived too.
	if r := f.env.Try("", "ls-remote", f.srv.HTTPURL("", pub)); !r.OK() {
		t.Fatalf("public repository not public after restart: %s", r)
	}
	ssh := f.transports()[1]
	c := f.clone(t, ssh, repo)
	f.env.Fsck(t, c)
	next := f.env.Commit(t, c, "after restart", nil)
	f.git(t, ssh, c, "push", "-q", "origin", "HEAD:main")
	if got := f.remoteRef(t, http, repo, "refs/heads/main"); got != next {
		t.Fatalf("push after restart: main %s, want %s", got, next)
	}
}
