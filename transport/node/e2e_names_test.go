package node_test

import (
	"strings"
	"testing"
)

// names: identity is case-insensitive (README "Names"). Any spelling of a
// repository in a URL or SSH path reaches it; a case variant cannot be
// created or forked to; the reserved owner is refused in any case; an
// owner's credentials added under another spelling are the same owner's.
func names(t *testing.T, f *fixture) {
	repo, _ := f.seeded(t, f.transports()[0], "Names", 1)
	owner, name, _ := strings.Cut(repo, "/")
	upper := strings.ToUpper(owner) + "/" + strings.ToUpper(name)
	want := f.remoteRef(t, f.transports()[0], repo, "refs/heads/main")
	for _, tr := range f.transports() {
		t.Run("clone-"+tr.name, func(t *testing.T) {
			wt := f.clone(t, tr, upper)
			if got := strings.TrimSpace(f.git(t, tr, wt, "rev-parse", "HEAD")); got != want {
				t.Fatalf("clone of %s: HEAD %s, want %s", upper, got, want)
			}
		})
	}
	t.Run("stranger-spelling-404", func(t *testing.T) {
		r := f.env.Try("", "ls-remote", f.srv.HTTPURL(f.bobToken, upper))
		if r.Err == nil {
			t.Fatalf("bob read alice's private repository as %s:\n%s", upper, r)
		}
		contains(t, r, "not found", "404")
	})
	t.Run("create-variant-refused", func(t *testing.T) {
		for _, variant := range []string{strings.ToUpper(repo), "Alice/" + name} {
			if out, err := f.srv.AdminTry("create-repo", variant); err == nil ||
				!strings.Contains(err.Error(), "already exists") {
				t.Errorf("create-repo %s: %q, %v; want already exists", variant, out, err)
			}
		}
		if _, err := f.srv.AdminTry("fork", repo, strings.ToUpper(repo)); err == nil ||
			!strings.Contains(err.Error(), "already exists") {
			t.Errorf("fork onto a case variant: %v; want already exists", err)
		}
	})
	t.Run("reserved-owner", func(t *testing.T) {
		for _, r := range []string{"api/x", "API/x", "Api/x"} {
			if _, err := f.srv.AdminTry("create-repo", r); err == nil ||
				!strings.Contains(err.Error(), "reserved") {
				t.Errorf("create-repo %s: %v; want reserved", r, err)
			}
		}
	})
	t.Run("owner-spelling-token", func(t *testing.T) {
		// A token added for "ALICE" is alice's.
		tok := f.srv.AddToken(t, "ALICE")
		f.env.Run(t, "", "ls-remote", f.srv.HTTPURL(tok, repo))
	})
}
