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
