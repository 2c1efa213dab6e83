// Package scale reads how big a randomized or measuring test runs (seeds,
// repositories) from an environment variable, so a developer can turn it
// up without editing the test. It imports only the standard library.
package scale

import (
	"os"
	"strconv"
	"testing"
)

// Count is the positive whole number in the environment variable name, or
// def when it is unset. Any other value fails the test, naming the
// variable.
func Count(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive whole number", name, s)
	}
	return n
}
