package node_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/objstore/storeurl"
	"github.com/rgit/rgit/testkit/gitenv"
)

// TestDenialMessagesAsGitPrintsThem: what real git prints when rgit
// refuses a credential. A token that expired or was revoked is told so
// (over HTTP git then says "Authentication failed"), not that the
// repository is missing; a push with a read-scoped token names the scope,
// and one with a read-only deploy key names the key (over SSH).
func TestDenialMessagesAsGitPrintsThem(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := gitenv.New(t)
	srv.CreateRepo(t, "alice/web")
	owner := srv.AddToken(t, "alice")
	wt := env.Scratch(t)
	env.Commit(t, wt, "one", map[string]string{"a.txt": "a\n"})
	env.Run(t, wt, "push", "-q", srv.HTTPURL(owner, "alice/web"), "main")

	// An expired token, written straight into the store: expiry is checked
	// on use, so its time can be in the past.
	st, err := storeurl.Open(t.Context(), srv.Store.URL, storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	expiredAt := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	expired, _, err := auth.NewStore(st).IssueToken(t.Context(), "alice", auth.TokenOptions{Expires: expiredAt})
	if err != nil {
		t.Fatal(err)
	}
	r := env.Try(wt, "ls-remote", srv.HTTPURL(expired, "alice/web"))
	wantLines(t, "expired token", r, "remote: authentication failed: the token expired at 2025-06-01T12:00:00Z",
		"fatal: Authentication failed for")
	notIn(t, "expired token", r, "repository not found")

	revoked := srv.AddToken(t, "alice")
	sum := sha256.Sum256([]byte(revoked))
	srv.Admin(t, "revoke-token", "alice", hex.EncodeToString(sum[:])[:12])
	r = env.Try(wt, "clone", "-q", srv.HTTPURL(revoked, "alice/web"), filepath.Join(t.TempDir(), "c"))
	wantLines(t, "revoked token", r, "remote: authentication failed: the token was revoked at ", "fatal: Authentication failed for")
	notIn(t, "revoked token", r, "repository not found")

	readOnly := lastLine(srv.Admin(t, "add-token", "alice", "--scope", "read"))
	r = env.Try(wt, "push", srv.HTTPURL(readOnly, "alice/web"), "main:refs/heads/x")
	wantLines(t, "read-scoped token push", r,
		"remote: permission denied: this token has scope read, which cannot push (a token with scope write can)",
		"fatal: unable to access 'http://"+srv.HTTPAddr+"/alice/web.git/': The requested URL returned error: 403")

	key := env.NewSSHKey(t, "deploy")
	pub, err := os.ReadFile(key.Public)
	if err != nil {
		t.Fatal(err)
	}
	srv.Admin(t, "add-deploy-key", "alice/web", string(pub))
	lf := env.Command("", nil, "ssh-keygen", "-lf", key.Public)
	if !lf.OK() {
		t.Fatal(lf)
	}
	fp := strings.Fields(lf.Stdout)[1]
	r = env.TryEnv(wt, gitenv.SSHEnv(key), "push", srv.SSHURL("alice/web"), "main:refs/heads/x")
	wantLines(t, "read-only deploy key push", r,
		"ERROR: permission denied: deploy key "+fp+" is read-only (it was added without --write)",
		"fatal: Could not read from remote repository.")
	// It still reads.
	if r := env.TryEnv(wt, gitenv.SSHEnv(key), "ls-remote", srv.SSHURL("alice/web")); !r.OK() {
		t.Fatalf("read-only deploy key cannot read:\n%s", r)
	}

	// The same key again, as alice's user key: it is her deploy key
	// already, and the refusal says so.
	_, err = srv.AdminTry("add-key", "alice", string(pub))
	if err == nil || !strings.Contains(err.Error(), "already registered as a read-only deploy key of alice/web") ||
		strings.Contains(err.Error(), "another owner") {
		t.Fatalf("add-key of alice's deploy key for alice: %v", err)
	}
}

// wantLines fails unless git failed and printed each line (a prefix of a
// line of its output).
func wantLines(t *testing.T, what string, r gitenv.Result, lines ...string) {
	t.Helper()
	if r.OK() {
		t.Fatalf("%s: git succeeded:\n%s", what, r)
	}
	out := "\n" + r.Stdout + r.Stderr
	for _, l := range lines {
		if !strings.Contains(out, "\n"+l) {
			t.Errorf("%s: git did not print %q:\n%s", what, l, r)
		}
	}
}

func notIn(t *testing.T, what string, r gitenv.Result, s string) {
	t.Helper()
	if strings.Contains(r.Stdout+r.Stderr, s) {
		t.Errorf("%s: git printed %q:\n%s", what, s, r)
	}
}
