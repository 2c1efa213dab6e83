// Package gitrun runs the real git CLI for tests and test commands, cut off
// from the machine it runs on: no system or user configuration, no
// inherited GIT_* variables, C locale, and never a prompt for a password.
// With an Ident, commits get a fixed author, committer and clock, so
// object ids are the same on every run.
//
// Env is the environment and command builder (for code that has no
// testing.TB, like the benchmark fixtures); Repo runs git in one directory
// for a test and fails it on errors. testkit/gitenv builds its client
// environment on Env.
//
// It imports only the standard library and testkit/need, so that any
// package's internal tests can use it without an import cycle.
package gitrun

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/need"
)

// Sig is one side of a commit's identity: a name, an email and a date in
// any format git accepts (e.g. "1700000000 +0000"; empty: now).
type Sig struct{ Name, Email, Date string }

// Ident is the author and committer git records.
type Ident struct{ Author, Committer Sig }

// Fixed is an Ident with one person as both author and committer at date.
func Fixed(name, email, date string) Ident {
	s := Sig{name, email, date}
	return Ident{s, s}
}

// vars returns the GIT_AUTHOR_* and GIT_COMMITTER_* variables of the
// fields that are set.
func (id Ident) vars() []string {
	var v []string
	add := func(k, val string) {
		if val != "" {
			v = append(v, k+"="+val)
		}
	}
	add("GIT_AUTHOR_NAME", id.Author.Name)
	add("GIT_AUTHOR_EMAIL", id.Author.Email)
	add("GIT_AUTHOR_DATE", id.Author.Date)
	add("GIT_COMMITTER_NAME", id.Committer.Name)
	add("GIT_COMMITTER_EMAIL", id.Committer.Email)
	add("GIT_COMMITTER_DATE", id.Committer.Date)
	return v
}

// Env is how git runs.
type Env struct {
	// Home is git's HOME, whose .gitconfig is the user configuration.
	// Empty: HOME is left alone and no user configuration is read.
	Home string
	// Ident, when set, fixes the commit identity and dates.
	Ident Ident
	// Extra variables (KEY=value) come last, so they win.
	Extra []string
}

// Environ is the process environment for a command: the test process's
// environment without any GIT_* variable, with the isolating settings,
// the identity and Extra on top.
func (e Env) Environ() []string {
	vars := []string{
		"GIT_CONFIG_NOSYSTEM=1",
		// Never wait for a password: a missing credential must fail.
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
		"LANG=C", "LC_ALL=C",
	}
	if e.Home != "" {
		vars = append(vars, "HOME="+e.Home, "XDG_CONFIG_HOME="+filepath.Join(e.Home, ".config"))
	} else {
		vars = append(vars, "GIT_CONFIG_GLOBAL="+os.DevNull)
	}
	vars = append(append(vars, e.Ident.vars()...), e.Extra...)
	drop := map[string]bool{}
	for _, kv := range vars {
		k, _, _ := strings.Cut(kv, "=")
		drop[k] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] || strings.HasPrefix(k, "GIT_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, vars...)
}

// Command prepares git args in dir under this environment.
func (e Env) Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = e.Environ()
	return cmd
}

// Output runs git args in dir with stdin (may be nil) and returns stdout;
// the error carries git's stderr.
func (e Env) Output(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := e.Command(ctx, dir, args...)
	cmd.Stdin = stdin
	r := Exec(cmd)
	if !r.OK() {
		return []byte(r.Stdout), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), r.Err, strings.TrimSpace(r.Stderr))
	}
	return []byte(r.Stdout), nil
}

// Result is a finished command.
type Result struct {
	Args           []string
	Stdout, Stderr string
	Err            error
}

// Exec runs cmd, collecting its stdout and stderr, and returns what
// happened.
func Exec(cmd *exec.Cmd) Result {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return Result{Args: cmd.Args, Stdout: out.String(), Stderr: errb.String(), Err: err}
}

// OK reports whether the command exited 0.
func (r Result) OK() bool { return r.Err == nil }

// Out is stdout without the trailing newline.
func (r Result) Out() string { return strings.TrimRight(r.Stdout, "\n") }

func (r Result) String() string {
	return fmt.Sprintf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(r.Args, " "), r.Err, r.Stdout, r.Stderr)
}

// Repo runs git in Dir for a test, failing the test when git fails. Env
// may be changed between calls (e.g. to move the clock).
type Repo struct {
	T   testing.TB
	Dir string
	Env Env
}

// New returns a Repo running git in dir (not created or initialised)
// with env. A missing git stops the test (see need.Tool).
func New(t testing.TB, dir string, env Env) *Repo {
	t.Helper()
	need.Tool(t, "git")
	return &Repo{T: t, Dir: dir, Env: env}
}

// Scratch returns a Repo over a new repository on branch main (git init)
// in a temporary directory removed when the test ends: the one scratch
// repository tests build histories in.
func Scratch(t testing.TB, env Env) *Repo {
	t.Helper()
	r := New(t, t.TempDir(), env)
	r.Run("init", "-q", "-b", "main")
	return r
}

// At dates the next commits (author and committer) at Unix time unix,
// UTC, keeping the names: tests that need commit times in order move it.
func (r *Repo) At(unix int64) {
	d := strconv.FormatInt(unix, 10) + " +0000"
	r.Env.Ident.Author.Date, r.Env.Ident.Committer.Date = d, d
}

// Try runs git with stdin (may be nil) and returns the result whether or
// not it failed.
func (r *Repo) Try(stdin []byte, args ...string) Result {
	cmd := r.Env.Command(context.Background(), r.Dir, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	return Exec(cmd)
}

// Output runs git with stdin (may be nil) and returns stdout as it is.
func (r *Repo) Output(stdin []byte, args ...string) []byte {
	r.T.Helper()
	res := r.Try(stdin, args...)
	if !res.OK() {
		r.T.Fatalf("%s", res)
	}
	return []byte(res.Stdout)
}

// Run runs git and returns stdout without the trailing newline.
func (r *Repo) Run(args ...string) string {
	r.T.Helper()
	res := r.Try(nil, args...)
	if !res.OK() {
		r.T.Fatalf("%s", res)
	}
	return res.Out()
}

// Write writes content to the file name (slash-separated, relative to
// Dir), creating its directories.
func (r *Repo) Write(name, content string) {
	r.T.Helper()
	p := filepath.Join(r.Dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.T.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.T.Fatal(err)
	}
}
