// Package need is how a test states a prerequisite it cannot provide
// itself (a tool on PATH, a module, a source tree). Outside CI a missing
// prerequisite skips the test with a loud message; under CI=true (or
// RGIT_REQUIRE_ALL=1) it fails the test, so CI never passes by running
// nothing. It imports only the standard library.
package need

import (
	"os"
	"os/exec"
	"testing"
)

// Strict reports whether missing prerequisites fail instead of skipping.
func Strict() bool {
	return os.Getenv("CI") == "true" || os.Getenv("RGIT_REQUIRE_ALL") == "1"
}

// Missing stops the test because a prerequisite is missing: a failure
// under Strict, a loud skip otherwise. what names the prerequisite and
// why it is missing; how says how to provide it.
func Missing(t testing.TB, what, how string) {
	t.Helper()
	if Strict() {
		t.Fatalf("required for CI but missing: %s (%s)", what, how)
		return
	}
	t.Skipf("\n*** SKIPPING %s: %s missing (%s) ***\n*** This test did NOT run. ***", t.Name(), what, how)
}

// Tool makes sure each named program is on PATH (see Missing).
func Tool(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			Missing(t, n, "install it, or run `make deps`")
		}
	}
}
