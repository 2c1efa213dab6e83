package gitenv_test

import (
	"os"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

func TestEnvIsolatedAndUsable(t *testing.T) {
	t.Setenv("GIT_DIR", "/nonexistent") // must not leak into client commands
	e := gitenv.New(t)
	dir := e.Scratch(t)
	if got := e.Run(t, dir, "config", "user.email"); got != "test@rgit.invalid" {
		t.Fatalf("user.email = %q", got)
	}
	id := e.Commit(t, dir, "first", map[string]string{"a/b.txt": "b\n"})
	if len(id) != 40 {
		t.Fatalf("commit id %q", id)
	}
	if got := e.Run(t, dir, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Fatalf("default branch %q", got)
	}
	e.Fsck(t, dir)
	r := e.Fail(t, dir, "rev-parse", "--verify", "-q", "nope")
	if r.OK() {
		t.Fatal("Fail returned a successful result")
	}
}

func TestSSHKey(t *testing.T) {
	e := gitenv.New(t)
	k := e.NewSSHKey(t, "k")
	pub, err := os.ReadFile(k.Public)
	if err != nil || !strings.HasPrefix(string(pub), "ssh-ed25519 ") {
		t.Fatalf("public key %q, %v", pub, err)
	}
	if cmd := gitenv.SSHCommand(k); !strings.Contains(cmd, "-i "+k.Private) || !strings.Contains(cmd, "IdentitiesOnly=yes") {
		t.Fatalf("SSHCommand = %q", cmd)
	}
}
