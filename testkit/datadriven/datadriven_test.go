package datadriven

import (
	"errors"
	"testing"
)

// Only a true RGIT_REWRITE (or -rewrite) rewrites, and never under CI.
func TestRewriteMode(t *testing.T) {
	for _, tc := range []struct {
		flag    bool
		env, ci string
		want    bool
		refused bool
	}{
		{env: "", want: false},
		{env: "0", want: false},
		{env: "false", want: false},
		{env: "1", want: true},
		{env: "true", want: true},
		{flag: true, want: true},
		{flag: true, env: "0", want: true},
		{env: "yes please", refused: true},
		{env: "1", ci: "true", refused: true},
		{flag: true, ci: "1", refused: true},
		{env: "0", ci: "true", want: false},
		{env: "1", ci: "false", want: true},
	} {
		got, err := rewriteMode(tc.flag, tc.env, tc.ci)
		if refused := errors.Is(err, ErrRewriteRefused); refused != tc.refused || got != tc.want {
			t.Errorf("rewriteMode(%v, %q, CI=%q) = %v, %v; want %v, refused=%v", tc.flag, tc.env, tc.ci, got, err, tc.want, tc.refused)
		}
	}
}

// Commands.Run hands each line to the handler its first word names, with
// every word; empty lines and unknown commands are errors.
func TestCommandsRun(t *testing.T) {
	cmds := Commands{
		"echo": func(a Args) (string, error) { return a.At(1) + "|" + a.At(2), nil },
		"kv": func(a Args) (string, error) {
			kv, err := a.Keys()
			return kv["x"], err
		},
	}
	for _, tc := range []struct{ line, want, err string }{
		{line: "echo a", want: "a|"},
		{line: "  echo a  b ", want: "a|b"},
		{line: "kv x=1 y=2", want: "1"},
		{line: "kv x", err: `argument "x": want key=value`},
		{line: "nope", err: `unknown command "nope"`},
		{line: " ", err: "empty command: datadriven: malformed scenario"},
	} {
		got, err := cmds.Run(tc.line)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("Run(%q) = %q, %v; want error %q", tc.line, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Run(%q) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
}
