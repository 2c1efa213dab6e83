package node_test

import (
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

// TestProtectedRecreate: --no-force-push without --no-delete cannot be
// bypassed by deleting the branch and pushing it again elsewhere, with
// the real git client: the deletion is allowed, a re-creation that does
// not contain the deleted value is refused as a force-push, and one that
// fast-forwards it passes. Without the rule, nothing is kept.
func TestProtectedRecreate(t *testing.T) {
	env := gitenv.New(t)
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	const repo = "alice/guard"
	srv.CreateRepo(t, repo)
	url := srv.HTTPURL(srv.AddToken(t, "alice"), repo)
	wt := env.Scratch(t)
	a := env.Commit(t, wt, "a", map[string]string{"a.txt": "a\n"})
	b := env.Commit(t, wt, "b", map[string]string{"b.txt": "b\n"})
	env.Run(t, wt, "checkout", "-q", "--orphan", "other")
	x := env.Commit(t, wt, "x", map[string]string{"x.txt": "unrelated\n"})
	env.Run(t, wt, "push", "-q", url, b+":refs/heads/main")
	srv.Admin(t, "protect", repo, "refs/heads/main", "--no-force-push")

	remote := func() string {
		out := env.Run(t, "", "ls-remote", url, "refs/heads/main")
		oid, _, _ := strings.Cut(out, "\t")
		return oid
	}
	if r := env.Try(wt, "push", url, "+"+x+":refs/heads/main"); r.OK() || !strings.Contains(r.Stderr, "protected branch: force-push not allowed") {
		t.Fatalf("forced update of main:\n%s", r)
	}
	env.Run(t, wt, "push", "-q", url, ":refs/heads/main") // deleting is allowed
	for name, oid := range map[string]string{"an unrelated commit": x, "an older commit": a} {
		r := env.Try(wt, "push", url, oid+":refs/heads/main")
		if r.OK() || !strings.Contains(r.Stderr, "protected branch: force-push not allowed, re-creating a deleted branch must fast-forward its last value") {
			t.Fatalf("re-creating main at %s after its delete:\n%s", name, r)
		}
		if got := remote(); got != "" {
			t.Fatalf("main re-created at %s", got)
		}
	}
	// Back where it was, then forward: both fast-forward the deleted value.
	env.Run(t, wt, "push", "-q", url, b+":refs/heads/main")
	env.Run(t, wt, "push", "-q", url, ":refs/heads/main")
	env.Run(t, wt, "checkout", "-q", b)
	c := env.Commit(t, wt, "c", map[string]string{"c.txt": "c\n"})
	env.Run(t, wt, "push", "-q", url, c+":refs/heads/main")
	if got := remote(); got != c {
		t.Fatalf("main = %q after a fast-forward re-creation, want %s", got, c)
	}
	// Once re-created, the kept value is gone: deleting again keeps c.
	env.Run(t, wt, "push", "-q", url, ":refs/heads/main")
	if r := env.Try(wt, "push", url, b+":refs/heads/main"); r.OK() {
		t.Fatalf("re-creating main at b, behind the last deleted value c, was accepted:\n%s", r)
	}
	// Without the rule (unprotect), deleting and re-creating anywhere is
	// the owner's business again.
	srv.Admin(t, "unprotect", repo, "refs/heads/main")
	env.Run(t, wt, "push", "-q", url, x+":refs/heads/main")
	if got := remote(); got != x {
		t.Fatalf("main = %q after re-creation without protection, want %s", got, x)
	}
}
