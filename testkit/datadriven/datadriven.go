// Package datadriven runs scenario files in the style of cockroachdb's
// datadriven (as used by etcd raft's interaction tests): each case is a
// command line, a "----" separator and the expected output, cases are
// separated by blank lines and '#' lines are comments kept with the next
// case. A changed behaviour shows up as a readable diff; run the tests
// with -rewrite (or RGIT_REWRITE=1) to regenerate the expectations.
// Rewriting makes every scenario pass, so it is refused under CI
// (CI=true), and RGIT_REWRITE must be a true value (1, true): 0, false
// or an empty value leave the files alone. It imports only the standard
// library.
package datadriven

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewriteFlag = flag.Bool("rewrite", false, "rewrite scenario expectations (also RGIT_REWRITE=1; refused under CI)")

// ErrRewriteRefused: rewrite was asked for where it must not run, or
// RGIT_REWRITE is not a boolean.
var ErrRewriteRefused = errors.New("datadriven: scenario rewrite refused")

// rewriteMode decides whether RunFile rewrites expectations, from the
// -rewrite flag and the RGIT_REWRITE and CI variables.
func rewriteMode(flagSet bool, env, ci string) (bool, error) {
	want := flagSet
	if env != "" {
		v, err := strconv.ParseBool(env)
		if err != nil {
			return false, fmt.Errorf("%w: RGIT_REWRITE=%q is not a boolean (want 1 or 0)", ErrRewriteRefused, env)
		}
		want = want || v
	}
	if want {
		if isCI, _ := strconv.ParseBool(ci); isCI {
			return false, fmt.Errorf("%w: under CI (CI=%s) scenarios are compared, never rewritten", ErrRewriteRefused, ci)
		}
	}
	return want, nil
}

// ErrSyntax reports a malformed scenario file.
var ErrSyntax = errors.New("datadriven: malformed scenario")

// Case is one command and its expected output.
type Case struct {
	Comments []string
	Cmd      string
	Want     string
	Line     int // 1-based line of Cmd
}

// Parse reads a scenario file's text.
func Parse(text string) ([]Case, error) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	var out []Case
	var cur Case
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
		case strings.HasPrefix(l, "#"):
			cur.Comments = append(cur.Comments, l)
		default:
			cur.Cmd, cur.Line = l, i+1
			if i+1 >= len(lines) || lines[i+1] != "----" {
				return nil, fmt.Errorf("line %d: command without ---- separator: %w", i+1, ErrSyntax)
			}
			i += 2
			var want []string
			for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
				want = append(want, lines[i])
			}
			cur.Want = strings.Join(want, "\n")
			out = append(out, cur)
			cur = Case{}
		}
	}
	return out, nil
}

// Format renders cases back into a scenario file.
func Format(cases []Case) string {
	var b strings.Builder
	for i, c := range cases {
		if i > 0 {
			b.WriteString("\n")
		}
		for _, cm := range c.Comments {
			b.WriteString(cm + "\n")
		}
		fmt.Fprintf(&b, "%s\n----\n%s\n", c.Cmd, c.Want)
	}
	return b.String()
}

// RunFile runs every case of the file at path through run, comparing (or,
// with -rewrite, replacing) the expected output. An error from run is
// printed as "error: ..." and compared like any output.
func RunFile(t testing.TB, path string, run func(cmd string) (string, error)) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := Parse(string(raw))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	rewrite, err := rewriteMode(*rewriteFlag, os.Getenv("RGIT_REWRITE"), os.Getenv("CI"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range cases {
		got, err := run(cases[i].Cmd)
		if err != nil {
			got = "error: " + err.Error()
		}
		if rewrite {
			cases[i].Want = got
		} else if got != cases[i].Want {
			t.Errorf("%s:%d: %s\n----\ngot:\n%s\nwant:\n%s", path, cases[i].Line, cases[i].Cmd, got, cases[i].Want)
		}
	}
	if rewrite {
		if err := os.WriteFile(path, []byte(Format(cases)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Walk runs fn as one subtest per scenario file in dir (*.txt), named by
// the file; a directory without scenarios fails the test.
func Walk(t *testing.T, dir string, fn func(t *testing.T, path string)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in %s: %v", dir, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { fn(t, f) })
	}
}

// Args is one command line split into words, the command's name first.
type Args []string

// At is word i (1 is the first argument), or "" past the end.
func (a Args) At(i int) string {
	if i < len(a) {
		return a[i]
	}
	return ""
}

// Keys reads the arguments (every word after the name) as key=value.
func (a Args) Keys() (map[string]string, error) {
	kv := make(map[string]string, len(a))
	for _, w := range a[1:] {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			return nil, fmt.Errorf("argument %q: want key=value", w)
		}
		kv[k] = v
	}
	return kv, nil
}

// Handler runs one command of a scenario language.
type Handler func(a Args) (string, error)

// Commands is a scenario language: one handler per command name.
type Commands map[string]Handler

// Run runs line through the handler its first word names; an empty line
// or an unknown command is an error. It is RunFile's run.
func (c Commands) Run(line string) (string, error) {
	a := Args(strings.Fields(line))
	if len(a) == 0 {
		return "", fmt.Errorf("empty command: %w", ErrSyntax)
	}
	h, ok := c[a[0]]
	if !ok {
		return "", fmt.Errorf("unknown command %q", a[0])
	}
	return h(a)
}
