package node_test

// The access model end to end (issue 13): roles, scoped tokens, deploy
// keys and protected branches, driven by the real git client over smart
// HTTP and SSH against one in-process node.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/product/admin"
)

// caller is one column of the matrix: how a user reaches the server.
type caller struct {
	name  string
	token string      // HTTP password; "" is anonymous
	key   *gitenv.Key // SSH key; an unregistered key is anonymous
}

type accessFixture struct {
	srv *gitenv.Server
	env *gitenv.Env
	// wt is a work tree with commits a and b (b's parent is a).
	wt, a, b string
	op       string // alice's token, for checking the server's state
}

func newAccessFixture(t *testing.T) (*accessFixture, []caller) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := gitenv.New(t)
	f := &accessFixture{srv: srv, env: env}
	var callers []caller
	for _, u := range []string{"alice", "ann", "wes", "rea", "bob"} {
		k := env.NewSSHKey(t, u)
		srv.AddKey(t, u, k)
		callers = append(callers, caller{name: u, token: srv.AddToken(t, u), key: &k})
	}
	anon := env.NewSSHKey(t, "anonymous") // registered to nobody
	callers = append(callers, caller{name: "anonymous", key: &anon})
	f.op = callers[0].token
	f.wt = env.Scratch(t)
	f.a = env.Commit(t, f.wt, "a", map[string]string{"a.txt": "a\n"})
	f.b = env.Commit(t, f.wt, "b", map[string]string{"b.txt": "b\n"})
	return f, callers
}

// url is repo's URL for c over tr ("http" or "ssh"), and the environment
// git needs.
func (f *accessFixture) url(c caller, tr, repo string) (string, []string) {
	if tr == "http" {
		return f.srv.HTTPURL(c.token, repo), nil
	}
	return f.srv.SSHURL(repo), gitenv.SSHEnv(*c.key)
}

// ref is the server's value of ref in repo, as the owner sees it.
func (f *accessFixture) ref(t *testing.T, repo, ref string) string {
	t.Helper()
	out := f.env.Run(t, "", "ls-remote", f.srv.HTTPURL(f.op, repo), ref)
	oid, _, _ := strings.Cut(strings.TrimSpace(out), "\t")
	return oid
}

// outcome is what a cell expects.
type outcome string

const (
	allow     outcome = "allow"
	unauth    outcome = "401"
	notFound  outcome = "404"
	forbidden outcome = "403"
)

// expect asserts r against want: success, or the failure git shows for
// that decision over tr. Over SSH 401 and 404 read the same (no prompt
// exists there), which is the non-disclosure rule.
func expect(t *testing.T, r gitenv.Result, tr string, want outcome) {
	t.Helper()
	if want == allow {
		if !r.OK() {
			t.Fatalf("want success, got\n%s", r)
		}
		return
	}
	if r.OK() {
		t.Fatalf("want %s, got success\n%s", want, r)
	}
	var marks []string
	switch {
	case tr == "ssh" && want == forbidden:
		marks = []string{"permission denied"}
	case tr == "ssh":
		marks = []string{"repository not found (or you are not authorized"}
	case want == unauth:
		marks = []string{"Authentication failed", "could not read Username", "terminal prompts disabled"}
	case want == notFound:
		marks = []string{"repository not found", "404"}
	case want == forbidden:
		marks = []string{"403"}
	}
	all := r.Stdout + r.Stderr
	for _, m := range marks {
		if strings.Contains(all, m) {
			return
		}
	}
	t.Fatalf("want %s (one of %q), got\n%s", want, marks, r)
}

// TestAccessMatrix: every role × visibility × operation over HTTP and SSH
// with real git; each cell checks git's answer and the server's refs.
func TestAccessMatrix(t *testing.T) {
	f, callers := newAccessFixture(t)
	srv := f.srv
	repos := map[string]string{"public": "alice/pub", "private": "alice/priv"}
	for vis, repo := range repos {
		srv.CreateRepo(t, repo)
		if vis == "public" {
			srv.Admin(t, "set-visibility", repo, "public")
		}
		srv.Admin(t, "grant", repo, "ann", "admin")
		srv.Admin(t, "grant", repo, "wes", "write")
		srv.Admin(t, "grant", repo, "rea", "read")
		// One branch per cell to force-push (at b) and to delete (at a).
		args := []string{"push", "-q", srv.HTTPURL(f.op, repo), f.b + ":refs/heads/main"}
		for _, c := range callers {
			for _, tr := range []string{"http", "ssh"} {
				args = append(args, f.b+":refs/heads/force-"+tr+"-"+c.name, f.a+":refs/heads/del-"+tr+"-"+c.name)
			}
		}
		f.env.Run(t, f.wt, args...)
	}
	// Expected per caller: read, write (push, force-push, delete), admin
	// (--as), for public then private.
	want := map[string][2][3]outcome{
		"alice":     {{allow, allow, allow}, {allow, allow, allow}},
		"ann":       {{allow, allow, allow}, {allow, allow, allow}},
		"wes":       {{allow, allow, forbidden}, {allow, allow, forbidden}},
		"rea":       {{allow, forbidden, forbidden}, {allow, forbidden, forbidden}},
		"bob":       {{allow, forbidden, forbidden}, {notFound, notFound, notFound}},
		"anonymous": {{allow, unauth, unauth}, {unauth, unauth, unauth}},
	}
	for vi, vis := range []string{"public", "private"} {
		repo := repos[vis]
		for _, c := range callers {
			w := want[c.name][vi]
			for _, tr := range []string{"http", "ssh"} {
				url, env := f.url(c, tr, repo)
				cell := tr + "-" + c.name
				t.Run(fmt.Sprintf("%s/%s/%s/read", vis, c.name, tr), func(t *testing.T) {
					r := f.env.TryEnv(f.wt, env, "ls-remote", url, "refs/heads/main")
					expect(t, r, tr, w[0])
					if w[0] == allow && !strings.HasPrefix(r.Stdout, f.b) {
						t.Fatalf("ls-remote shows %q, want main at %s", r.Stdout, f.b)
					}
				})
				t.Run(fmt.Sprintf("%s/%s/%s/push", vis, c.name, tr), func(t *testing.T) {
					ref := "refs/heads/push-" + cell
					expect(t, f.env.TryEnv(f.wt, env, "push", url, f.a+":"+ref), tr, w[1])
					if got, wantRef := f.ref(t, repo, ref), map[bool]string{true: f.a, false: ""}[w[1] == allow]; got != wantRef {
						t.Fatalf("%s = %q after the push, want %q", ref, got, wantRef)
					}
				})
				t.Run(fmt.Sprintf("%s/%s/%s/force-push", vis, c.name, tr), func(t *testing.T) {
					ref := "refs/heads/force-" + cell
					expect(t, f.env.TryEnv(f.wt, env, "push", url, "+"+f.a+":"+ref), tr, w[1])
					if got, wantRef := f.ref(t, repo, ref), map[bool]string{true: f.a, false: f.b}[w[1] == allow]; got != wantRef {
						t.Fatalf("%s = %q after the force-push, want %q", ref, got, wantRef)
					}
				})
				t.Run(fmt.Sprintf("%s/%s/%s/delete", vis, c.name, tr), func(t *testing.T) {
					ref := "refs/heads/del-" + cell
					expect(t, f.env.TryEnv(f.wt, env, "push", url, ":"+ref), tr, w[1])
					if got, wantRef := f.ref(t, repo, ref), map[bool]string{true: "", false: f.a}[w[1] == allow]; got != wantRef {
						t.Fatalf("%s = %q after the delete, want %q", ref, got, wantRef)
					}
				})
			}
			t.Run(fmt.Sprintf("%s/%s/api/read", vis, c.name), func(t *testing.T) {
				apiReadCell(t, srv, repo, c.token, f.b, w[0])
			})
			t.Run(fmt.Sprintf("%s/%s/admin", vis, c.name), func(t *testing.T) {
				adminCell(t, srv, repo, vis, c.name, w[2])
			})
		}
	}
}

// apiReadCell reads repo's refs through the read API as the caller whose
// token is token ("" anonymous, Bearer otherwise) and checks the answer
// against want: the same decision as git's, 404 exactly like a missing
// repository.
func apiReadCell(t *testing.T, srv *gitenv.Server, repo, token, main string, want outcome) {
	t.Helper()
	get := func(repo string) (int, string) {
		resp, body := apiGet(t, srv.HTTPAddr, "/api/"+repo+"/refs", token)
		return resp.StatusCode, string(body)
	}
	code, body := get(repo)
	wantCode := map[outcome]int{allow: 200, unauth: 401, notFound: 404, forbidden: 403}[want]
	if code != wantCode {
		t.Fatalf("GET /api/%s/refs = %d %s, want %d", repo, code, body, wantCode)
	}
	if want == allow && !strings.Contains(body, main) {
		t.Fatalf("refs answer lacks main at %s: %s", main, body)
	}
	if want == notFound {
		if mcode, mbody := get("alice/no-such-repo"); mcode != code || mbody != body {
			t.Fatalf("private answered %d %q, missing %d %q: they must not differ", code, body, mcode, mbody)
		}
	}
}

// adminCell runs the access-changing admin commands acting as user and
// checks they are refused or applied. Anonymous has no --as: its cell is
// the admin channel without the peer secret.
func adminCell(t *testing.T, srv *gitenv.Server, repo, vis, user string, want outcome) {
	t.Helper()
	if user == "anonymous" {
		var out strings.Builder
		err := admin.Call(t.Context(), srv.AdminAddr, "wrong-secret", admin.ListAccess{Repo: repo}, &out, &out)
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("admin without the peer secret: %v", err)
		}
		return
	}
	pattern := "refs/heads/adm-" + user
	cmds := [][]string{
		{"protect", repo, pattern, "--no-delete", "--as", user},
		{"grant", repo, "carol", "read", "--new-user", "--as", user},
		{"revoke", repo, "carol", "--as", user},
		{"unprotect", repo, pattern, "--as", user},
		{"set-visibility", repo, vis, "--as", user}, // unchanged: only the decision matters
	}
	for _, args := range cmds {
		out, err := srv.AdminTry(args[0], args[1:]...)
		switch {
		case want == allow && err != nil:
			t.Fatalf("%v: %v", args, err)
		case want == forbidden && (err == nil || !strings.Contains(err.Error(), "needs the admin role")):
			t.Fatalf("%v: want refused, got %q, %v", args, out, err)
		case want == notFound && (err == nil || !strings.Contains(err.Error(), "repository not found")):
			t.Fatalf("%v: want not found, got %q, %v", args, out, err)
		}
	}
	if want != allow {
		// Refused: nothing changed.
		if out := srv.Admin(t, "list-access", repo); strings.Contains(out, pattern) || strings.Contains(out, "carol") {
			t.Fatalf("a refused command changed the settings:\n%s", out)
		}
	}
}

// TestScopedTokensAndDeployKeys: a read token cannot push (403), a token
// limited to one repository sees nothing else, a revoked or expired token
// gets 401, and deploy keys work on their repository only, read-only
// unless --write.
func TestScopedTokensAndDeployKeys(t *testing.T) {
	f, callers := newAccessFixture(t)
	srv, alice := f.srv, callers[0]
	srv.CreateRepo(t, "alice/one")
	srv.CreateRepo(t, "alice/two")
	for _, r := range []string{"alice/one", "alice/two"} {
		f.env.Run(t, f.wt, "push", "-q", srv.HTTPURL(alice.token, r), f.b+":refs/heads/main")
	}
	readTok := lastLine(srv.Admin(t, "add-token", "alice", "--scope", "read", "--name", "ci"))
	oneTok := lastLine(srv.Admin(t, "add-token", "alice", "--repo", "alice/one"))
	url := func(tok, repo string) string { return srv.HTTPURL(tok, repo) }

	expect(t, f.env.Try(f.wt, "ls-remote", url(readTok, "alice/one")), "http", allow)
	expect(t, f.env.Try(f.wt, "push", url(readTok, "alice/one"), f.a+":refs/heads/x"), "http", forbidden)
	expect(t, f.env.Try(f.wt, "push", url(oneTok, "alice/one"), f.a+":refs/heads/x"), "http", allow)
	expect(t, f.env.Try(f.wt, "ls-remote", url(oneTok, "alice/two")), "http", notFound)
	// The read API applies the same token limits.
	apiReadCell(t, srv, "alice/two", oneTok, "", notFound)

	list := srv.Admin(t, "list-tokens", "alice")
	if !strings.Contains(list, " ci ") || !strings.Contains(list, " read ") || !strings.Contains(list, "alice/one") ||
		strings.Contains(list, readTok) {
		t.Fatalf("list-tokens:\n%s", list)
	}
	id := tokenID(t, list, "ci")
	srv.Admin(t, "revoke-token", "alice", id)
	// The node that revoked it forgets it at once (other nodes: within the
	// cache TTL, see storage/auth TestRevokeAndExpiryWhileCached).
	expect(t, f.env.Try(f.wt, "ls-remote", url(readTok, "alice/one")), "http", unauth)
	apiReadCell(t, srv, "alice/one", readTok, "", unauth)
	if _, err := srv.AdminTry("add-token", "alice", "--expires", "soon"); err == nil {
		t.Fatal("add-token accepted --expires soon")
	}

	// Deploy keys.
	ro := f.env.NewSSHKey(t, "deploy-ro")
	rw := f.env.NewSSHKey(t, "deploy-rw")
	for _, d := range []struct {
		key   gitenv.Key
		flags []string
	}{{ro, nil}, {rw, []string{"--write"}}} {
		pub, err := os.ReadFile(d.key.Public)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.AdminTry("add-deploy-key", append([]string{"alice/one", string(pub)}, d.flags...)...); err != nil {
			t.Fatal(err)
		}
	}
	ssh := func(k gitenv.Key, args ...string) gitenv.Result { return f.env.TryEnv(f.wt, gitenv.SSHEnv(k), args...) }
	expect(t, ssh(ro, "ls-remote", srv.SSHURL("alice/one")), "ssh", allow)
	expect(t, ssh(ro, "push", srv.SSHURL("alice/one"), f.a+":refs/heads/ro"), "ssh", forbidden)
	expect(t, ssh(rw, "push", srv.SSHURL("alice/one"), f.a+":refs/heads/rw"), "ssh", allow)
	expect(t, ssh(rw, "ls-remote", srv.SSHURL("alice/two")), "ssh", notFound)
	keys := srv.Admin(t, "list-keys", "alice")
	if !strings.Contains(keys, "deploy alice/one (write)") || !strings.Contains(keys, "deploy alice/one (read)") {
		t.Fatalf("list-keys:\n%s", keys)
	}
	out := f.env.Command("", nil, "ssh-keygen", "-l", "-E", "sha256", "-f", rw.Public)
	fp := strings.Fields(out.Stdout)[1]
	srv.Admin(t, "remove-key", "alice", fp)
	expect(t, ssh(rw, "ls-remote", srv.SSHURL("alice/one")), "ssh", notFound)
	// A repository deleted and created again starts without deploy keys.
	srv.Admin(t, "delete-repo", "alice/one")
	srv.CreateRepo(t, "alice/one")
	expect(t, ssh(ro, "ls-remote", srv.SSHURL("alice/one")), "ssh", notFound)
	if keys := srv.Admin(t, "list-keys", "alice"); strings.Contains(keys, "deploy") {
		t.Fatalf("deploy keys left after delete-repo:\n%s", keys)
	}
}

// tokenID finds the id of the token named name in list-tokens output.
func tokenID(t *testing.T, list, name string) string {
	t.Helper()
	for _, l := range strings.Split(list, "\n") {
		if fs := strings.Fields(l); len(fs) > 1 && fs[1] == name {
			return fs[0]
		}
	}
	t.Fatalf("no token %q in\n%s", name, list)
	return ""
}

// TestProtectedBranches: with --no-force-push and --no-delete, a forced
// update and a delete of a protected ref are refused with "protected
// branch" before anything is written (atomic: the whole push); fast
// forwards pass; concurrent forced pushes never rewrite the branch; every
// refusal leaves an audit line.
func TestProtectedBranches(t *testing.T) {
	f, callers := newAccessFixture(t)
	srv, alice := f.srv, callers[0]
	repo := "alice/prot"
	srv.CreateRepo(t, repo)
	url := srv.HTTPURL(alice.token, repo)
	f.env.Run(t, f.wt, "push", "-q", url, f.b+":refs/heads/main", f.a+":refs/heads/release/1", f.a+":refs/heads/free")
	srv.Admin(t, "protect", repo, "refs/heads/main", "--no-force-push", "--no-delete")
	srv.Admin(t, "protect", repo, "refs/heads/release/*", "--no-delete")

	for _, tr := range []string{"http", "ssh"} {
		u, env := f.url(alice, tr, repo)
		r := f.env.TryEnv(f.wt, env, "push", u, "+"+f.a+":refs/heads/main")
		if r.OK() || !strings.Contains(r.Stderr, "protected branch: force-push not allowed") {
			t.Fatalf("%s: forced update of main:\n%s", tr, r)
		}
		r = f.env.TryEnv(f.wt, env, "push", u, ":refs/heads/main")
		if r.OK() || !strings.Contains(r.Stderr, "protected branch: deletion not allowed") {
			t.Fatalf("%s: delete of main:\n%s", tr, r)
		}
		r = f.env.TryEnv(f.wt, env, "push", u, ":refs/heads/release/1")
		if r.OK() || !strings.Contains(r.Stderr, "protected branch") {
			t.Fatalf("%s: delete of release/1:\n%s", tr, r)
		}
		if got := f.ref(t, repo, "refs/heads/main"); got != f.b {
			t.Fatalf("main moved to %s", got)
		}
	}
	// Forcing release/1 is allowed (only --no-delete), and so is anything
	// on an unprotected branch.
	f.env.Run(t, f.wt, "push", "-q", url, f.b+":refs/heads/release/1")
	f.env.Run(t, f.wt, "push", "-q", url, "+"+f.b+":refs/heads/release/1")

	// Atomic: one protected refusal fails the whole push and writes no pack.
	c := f.env.Commit(t, f.wt, "c", map[string]string{"c.txt": "c\n"})
	packs := storedPacks(t, srv, repo)
	if packs == 0 {
		t.Fatal("no packs found in the store: storedPacks looks in the wrong place")
	}
	r := f.env.Try(f.wt, "push", "--atomic", url, c+":refs/heads/free", ":refs/heads/main")
	if r.OK() || !strings.Contains(r.Stderr, "protected branch") || !strings.Contains(r.Stderr, "atomic push failed") {
		t.Fatalf("atomic push:\n%s", r)
	}
	if got := f.ref(t, repo, "refs/heads/free"); got != f.a {
		t.Fatalf("free = %s after a refused atomic push, want %s", got, f.a)
	}
	// A refused forced update that brings a pack stores nothing either.
	f.env.Run(t, f.wt, "checkout", "-q", f.a)
	d := f.env.Commit(t, f.wt, "d", map[string]string{"d.txt": "d\n"})
	r = f.env.Try(f.wt, "push", url, "+"+d+":refs/heads/main")
	if r.OK() || !strings.Contains(r.Stderr, "protected branch") {
		t.Fatalf("forced update of main with new objects:\n%s", r)
	}
	if got := storedPacks(t, srv, repo); got != packs {
		t.Fatalf("refused pushes stored packs: %d before, %d after", packs, got)
	}
	// Fast-forward of main passes.
	f.env.Run(t, f.wt, "push", "-q", url, c+":refs/heads/main")

	// Concurrent forced pushes of diverging children of main: git checks
	// each against the value it saw, the writer's compare-and-set against
	// the current one, so main only ever moves forward.
	base := c
	const n = 4
	var kids []string
	for i := range n {
		f.env.Run(t, f.wt, "checkout", "-q", base)
		kids = append(kids, f.env.Commit(t, f.wt, fmt.Sprintf("kid %d", i), map[string]string{fmt.Sprintf("k%d", i): "x\n"}))
	}
	var wg sync.WaitGroup
	results := make([]gitenv.Result, n)
	for i := range n {
		wg.Go(func() { results[i] = f.env.Try(f.wt, "push", "--force", url, kids[i]+":refs/heads/main") })
	}
	wg.Wait()
	won := 0
	for i, r := range results {
		if r.OK() {
			won++
			if got := f.ref(t, repo, "refs/heads/main"); got != kids[i] {
				t.Fatalf("push %d succeeded but main is %s", i, got)
			}
		}
	}
	if won != 1 {
		for _, r := range results {
			t.Log(r)
		}
		t.Fatalf("%d concurrent pushes succeeded, want exactly 1 (the others would be forced)", won)
	}
	if !strings.Contains(srv.LogTail(400), "audit: push refused by branch protection") {
		t.Fatal("no audit line for a refused push")
	}
	// Unprotect: the delete goes through.
	srv.Admin(t, "unprotect", repo, "refs/heads/main")
	f.env.Run(t, f.wt, "push", "-q", url, ":refs/heads/main")
}

// storedPacks counts repo's pack objects in the server's file store.
func storedPacks(t *testing.T, srv *gitenv.Server, repo string) int {
	t.Helper()
	dir, ok := strings.CutPrefix(srv.Store.URL, "file://")
	if !ok {
		t.Fatalf("store %s is not a file store", srv.Store.URL)
	}
	m, err := filepath.Glob(filepath.Join(dir, "objects", repo, "pack", "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestAccessSurvivesRestart: collaborators, protection and scoped tokens
// are in the object store, not in a node's memory.
func TestAccessSurvivesRestart(t *testing.T) {
	f, callers := newAccessFixture(t)
	srv, alice, bob := f.srv, callers[0], callers[4]
	srv.CreateRepo(t, "alice/keep")
	f.env.Run(t, f.wt, "push", "-q", srv.HTTPURL(alice.token, "alice/keep"), f.b+":refs/heads/main")
	srv.Admin(t, "grant", "alice/keep", "bob", "read")
	srv.Admin(t, "protect", "alice/keep", "refs/heads/main", "--no-delete")
	readTok := lastLine(srv.Admin(t, "add-token", "alice", "--scope", "read"))
	srv.Restart(t)
	expect(t, f.env.Try(f.wt, "ls-remote", srv.HTTPURL(bob.token, "alice/keep")), "http", allow)
	expect(t, f.env.Try(f.wt, "push", srv.HTTPURL(bob.token, "alice/keep"), f.a+":refs/heads/x"), "http", forbidden)
	expect(t, f.env.Try(f.wt, "push", srv.HTTPURL(readTok, "alice/keep"), f.a+":refs/heads/x"), "http", forbidden)
	if r := f.env.Try(f.wt, "push", srv.HTTPURL(alice.token, "alice/keep"), ":refs/heads/main"); r.OK() || !strings.Contains(r.Stderr, "protected branch") {
		t.Fatalf("delete of protected main after restart:\n%s", r)
	}
	out := srv.Admin(t, "list-access", "alice/keep")
	if !strings.Contains(out, "bob: read (granted by rgit-admin at ") || !strings.Contains(out, "protected refs/heads/main: no-delete (by rgit-admin at ") {
		t.Fatalf("list-access after restart:\n%s", out)
	}
}
