// Package gitenv drives the real git client (and other clients) against an
// rgit server in end-to-end tests: an isolated HOME with a git identity,
// helpers to run git and check its output, SSH key generation and
// GIT_SSH_COMMAND, and an in-process rgit node on a file:// or S3
// (versitygw, via testkit/s3local) store that can be restarted on the same
// data.
//
// It is testkit: it may import anything, and nothing outside tests imports
// it.
package gitenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitrun"
)

// Env is an isolated client environment: its own HOME (so no user or
// system git configuration leaks in) with a git identity configured.
type Env struct {
	Home string
	git  gitrun.Env
}

// New creates a client environment in a test temp directory. git must be
// installed; the test fails otherwise.
func New(t testing.TB) *Env {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git client is required: %v", err)
	}
	home := t.TempDir()
	e := &Env{Home: home, git: gitrun.Env{Home: home}}
	cfg := strings.Join([]string{
		"[user]", "\tname = rgit test", "\temail = test@rgit.invalid",
		"[init]", "\tdefaultBranch = main",
		"[advice]", "\tdetachedHead = false",
		"[protocol]", "\tversion = 2",
		"[gc]", "\tauto = 0",
		"",
	}, "\n")
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(cfg), 0o644); err != nil {
		t.Fatalf("write .gitconfig: %v", err)
	}
	return e
}

// Environ is the process environment for a client command: the test
// process's environment with HOME and the git settings replaced (see
// gitrun.Env), plus extra (KEY=value) last so it wins.
func (e *Env) Environ(extra ...string) []string {
	g := e.git
	g.Extra = extra
	return g.Environ()
}

// Result is a finished command.
type Result = gitrun.Result

// Command runs name with args in dir under this environment, with extra
// environment variables, and returns whatever happened.
func (e *Env) Command(dir string, extra []string, name string, args ...string) Result {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = e.Environ(extra...)
	return gitrun.Exec(cmd)
}

// Try runs git in dir and returns the result whether or not it failed.
func (e *Env) Try(dir string, args ...string) Result {
	return e.Command(dir, nil, "git", args...)
}

// TryEnv is Try with extra environment variables.
func (e *Env) TryEnv(dir string, extra []string, args ...string) Result {
	return e.Command(dir, extra, "git", args...)
}

// Run runs git in dir, fails the test if it fails, and returns stdout
// without the trailing newline.
func (e *Env) Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	r := e.Try(dir, args...)
	if !r.OK() {
		t.Fatalf("%s", r)
	}
	return r.Out()
}

// RunEnv is Run with extra environment variables.
func (e *Env) RunEnv(t testing.TB, dir string, extra []string, args ...string) string {
	t.Helper()
	r := e.TryEnv(dir, extra, args...)
	if !r.OK() {
		t.Fatalf("%s", r)
	}
	return r.Out()
}

// Fail runs git in dir, fails the test if it succeeds, and returns the
// result so the caller can check the message.
func (e *Env) Fail(t testing.TB, dir string, args ...string) Result {
	t.Helper()
	r := e.Try(dir, args...)
	if r.OK() {
		t.Fatalf("expected failure, got success: %s", r)
	}
	return r
}

// Scratch returns a new work tree on main in a temporary directory removed
// when the test ends: gitrun.Scratch in this client environment.
func (e *Env) Scratch(t testing.TB) string {
	t.Helper()
	return gitrun.Scratch(t, e.git).Dir
}

// Commit writes files (path → content) in the work tree dir, commits them
// with msg and returns the new commit id.
func (e *Env) Commit(t testing.TB, dir, msg string, files map[string]string) string {
	t.Helper()
	work := &gitrun.Repo{T: t, Dir: dir}
	for name, content := range files {
		work.Write(name, content)
	}
	e.Run(t, dir, "add", "-A")
	e.Run(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
	return e.Run(t, dir, "rev-parse", "HEAD")
}

// Fsck runs `git fsck` in the repository dir and fails the test if it
// reports anything.
func (e *Env) Fsck(t testing.TB, dir string) {
	t.Helper()
	r := e.Try(dir, "fsck", "--no-progress", "--no-dangling")
	if !r.OK() || strings.TrimSpace(r.Stdout+r.Stderr) != "" {
		t.Fatalf("git fsck not clean: %s", r)
	}
}

// Key is an SSH key pair on disk.
type Key struct {
	Private, Public string // paths
}

// NewSSHKey generates an ed25519 key pair named name in the environment's
// HOME with ssh-keygen. The test fails when ssh-keygen is missing.
func (e *Env) NewSSHKey(t testing.TB, name string) Key {
	t.Helper()
	dir := filepath.Join(e.Home, ".ssh")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	k := Key{Private: filepath.Join(dir, name), Public: filepath.Join(dir, name+".pub")}
	r := e.Command(dir, nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", k.Private)
	if !r.OK() {
		t.Fatalf("ssh-keygen: %s", r)
	}
	return k
}

// SSHCommand is a GIT_SSH_COMMAND that authenticates with key only and
// trusts any host key (the test server's key is new on every run).
func SSHCommand(key Key) string {
	return strings.Join([]string{
		"ssh", "-i", key.Private,
		"-F", "/dev/null",
		"-o", "IdentitiesOnly=yes",
		"-o", "IdentityAgent=none",
		"-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes",
		"-o", "LogLevel=ERROR",
	}, " ")
}

// SSHEnv is the extra environment that makes git use key.
func SSHEnv(key Key) []string {
	return []string{"GIT_SSH_COMMAND=" + SSHCommand(key), "GIT_SSH_VARIANT=ssh"}
}
