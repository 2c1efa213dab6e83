package gitrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIsolatedFromUserConfig: neither the user's ~/.gitconfig nor a GIT_*
// variable of the test process reaches git.
func TestIsolatedFromUserConfig(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = leaked\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("GIT_CONFIG_PARAMETERS", "'user.email=leaked@x'")
	r := New(t, t.TempDir(), Env{})
	r.Run("init", "-q")
	for _, key := range []string{"user.name", "user.email"} {
		if res := r.Try(nil, "config", key); res.OK() {
			t.Errorf("%s = %q leaked into git", key, res.Out())
		}
	}
}

// TestHomeConfigIsRead: with Home set, its .gitconfig is the user
// configuration (what testkit/gitenv relies on).
func TestHomeConfigIsRead(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = home user\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := New(t, t.TempDir(), Env{Home: home})
	r.Run("init", "-q")
	if got := r.Run("config", "user.name"); got != "home user" {
		t.Fatalf("user.name = %q, want the one from Home", got)
	}
}

// TestFixedIdentRepeatsIDs: the same commit made twice with a fixed
// identity gets the same id, and Extra wins over the identity.
func TestFixedIdentRepeatsIDs(t *testing.T) {
	commit := func(extra ...string) string {
		r := New(t, t.TempDir(), Env{Ident: Fixed("t", "t@x", "1700000000 +0000"), Extra: extra})
		r.Run("init", "-q", "-b", "main")
		r.Run("commit", "-q", "--allow-empty", "-m", "m")
		return r.Run("rev-parse", "HEAD")
	}
	a, b := commit(), commit()
	if a != b {
		t.Fatalf("ids differ: %s, %s", a, b)
	}
	if c := commit("GIT_COMMITTER_DATE=1700000060 +0000"); c == a {
		t.Fatal("Extra did not override the identity's date")
	}
}

func TestTryReportsFailure(t *testing.T) {
	r := New(t, t.TempDir(), Env{})
	res := r.Try(nil, "rev-parse", "--verify", "no-such-rev")
	if res.OK() || !strings.Contains(res.String(), "git rev-parse --verify no-such-rev") {
		t.Fatalf("want a failure naming the command, got %s", res)
	}
}

// TestScratchAt: Scratch starts an empty repository on main, and At dates
// both sides of the next commit, keeping the names.
func TestScratchAt(t *testing.T) {
	r := Scratch(t, Env{Ident: Ident{Sig{"A", "a@x", ""}, Sig{"C", "c@x", ""}}})
	if got := r.Run("symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Fatalf("HEAD = %q, want refs/heads/main", got)
	}
	r.At(1700000060)
	r.Run("commit", "-q", "--allow-empty", "-m", "m")
	if got := r.Run("log", "-1", "--format=%an %at|%cn %ct"); got != "A 1700000060|C 1700000060" {
		t.Fatalf("commit = %q, want A and C at 1700000060", got)
	}
}
