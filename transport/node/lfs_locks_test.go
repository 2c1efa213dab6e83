package node_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

// TestLFSLocksTwoUsers: git lfs lock, locks and unlock with two users, over
// HTTP and over SSH (git-lfs-transfer): a path has one holder; the other
// user sees the lock, cannot take it or remove it, and cannot push the
// locked file; the repository's owner (an administrator) can force it
// open; the holder unlocks their own.
func TestLFSLocksTwoUsers(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := lfsEnv(t)
	aliceTok, bobTok := srv.AddToken(t, "alice"), srv.AddToken(t, "bob")
	aliceKey, bobKey := env.NewSSHKey(t, "alice"), env.NewSSHKey(t, "bob")
	srv.AddKey(t, "alice", aliceKey)
	srv.AddKey(t, "bob", bobKey)
	work := lfsWork(t, env, map[string][]byte{"a.bin": randomBytes(1000), "b.bin": randomBytes(1000)})
	for _, tr := range []string{"http", "ssh"} {
		t.Run(tr, func(t *testing.T) {
			repo := "alice/game-" + tr
			srv.CreateRepo(t, repo)
			srv.Admin(t, "grant", repo, "bob", "write", "--new-user")
			env.Run(t, work, "push", "-q", srv.HTTPURL(aliceTok, repo), "main")
			clone := func(who, tok string, key gitenv.Key) (string, []string) {
				dir := filepath.Join(t.TempDir(), who)
				url, extra := srv.HTTPURL(tok, repo), []string(nil)
				if tr == "ssh" {
					url, extra = srv.SSHURL(repo), gitenv.SSHEnv(key)
				}
				env.RunEnv(t, "", extra, "clone", "-q", url, dir)
				// Refuse to push files someone else locked.
				env.Run(t, dir, "config", "lfs.locksverify", "true")
				return dir, extra
			}
			alice, aliceEnv := clone("alice", aliceTok, aliceKey)
			bob, bobEnv := clone("bob", bobTok, bobKey)
			lfs := func(dir string, extra []string, args ...string) gitenv.Result {
				return env.TryEnv(dir, extra, append([]string{"lfs"}, args...)...)
			}
			if r := lfs(bob, bobEnv, "lock", "a.bin"); !r.OK() || !strings.Contains(r.Stdout, "Locked a.bin") {
				t.Fatalf("bob locks a.bin: %s", r)
			}
			if r := lfs(alice, aliceEnv, "lock", "a.bin"); r.OK() || !strings.Contains(r.Stderr, "already created lock") && !strings.Contains(r.Stderr, "locked by bob") {
				t.Fatalf("alice locks bob's a.bin: %s", r)
			}
			if r := lfs(alice, aliceEnv, "locks"); !r.OK() || !strings.Contains(r.Stdout, "a.bin") || !strings.Contains(r.Stdout, "bob") {
				t.Fatalf("alice lists the locks: %s", r)
			}
			if r := lfs(alice, aliceEnv, "locks", "--verify"); !r.OK() || !strings.Contains(r.Stdout, "a.bin") {
				t.Fatalf("alice verifies the locks: %s", r)
			}
			// Pushing a file someone else locked is refused by git-lfs,
			// which asks the server whose locks they are.
			lfsCommit(t, env, alice, "edit a", map[string][]byte{"a.bin": randomBytes(1000)})
			if r := env.TryEnv(alice, aliceEnv, "push", "origin", "main"); r.OK() || !strings.Contains(r.Stdout, "Unable to push locked files:\n* a.bin - bob") {
				t.Fatalf("alice pushes bob's locked a.bin: %s", r)
			}
			env.Run(t, alice, "reset", "-q", "--hard", "origin/main")
			if r := lfs(alice, aliceEnv, "unlock", "a.bin"); r.OK() {
				t.Fatalf("alice unlocks bob's lock without --force: %s", r)
			}
			if r := lfs(bob, bobEnv, "lock", "b.bin"); !r.OK() {
				t.Fatalf("bob locks b.bin: %s", r)
			}
			if r := lfs(bob, bobEnv, "unlock", "b.bin"); !r.OK() {
				t.Fatalf("bob unlocks his b.bin: %s", r)
			}
			if tr == "http" {
				// git-lfs 3.3 does not send force over SSH; over HTTP the
				// owner, an administrator, forces bob's lock open.
				if r := lfs(alice, aliceEnv, "unlock", "--force", "a.bin"); !r.OK() {
					t.Fatalf("alice forces bob's lock open: %s", r)
				}
			} else if r := lfs(bob, bobEnv, "unlock", "a.bin"); !r.OK() {
				t.Fatalf("bob unlocks a.bin: %s", r)
			}
			if r := lfs(bob, bobEnv, "locks"); !r.OK() || strings.TrimSpace(r.Stdout) != "" {
				t.Fatalf("locks left: %s", r)
			}
		})
	}
}
