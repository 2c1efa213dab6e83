package need

import (
	"testing"
)

// recorder catches how Missing stops a test.
type recorder struct {
	testing.TB
	failed, skipped bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Name() string          { return "T" }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Skip(...any)           { r.skipped = true }
func (r *recorder) Skipf(string, ...any)  { r.skipped = true }

func TestMissingFailsUnderCI(t *testing.T) {
	for _, tc := range []struct {
		ci, all  string
		wantFail bool
	}{{"true", "", true}, {"", "1", true}, {"", "", false}, {"false", "", false}} {
		t.Setenv("CI", tc.ci)
		t.Setenv("RGIT_REQUIRE_ALL", tc.all)
		r := &recorder{TB: t}
		Tool(r, "rgit-no-such-tool-on-path")
		if r.failed != tc.wantFail || r.skipped == tc.wantFail {
			t.Errorf("CI=%q RGIT_REQUIRE_ALL=%q: failed=%v skipped=%v, want failed=%v", tc.ci, tc.all, r.failed, r.skipped, tc.wantFail)
		}
	}
}

func TestToolPresent(t *testing.T) {
	t.Setenv("CI", "true")
	r := &recorder{TB: t}
	Tool(r, "sh")
	if r.failed || r.skipped {
		t.Fatal("a present tool stopped the test")
	}
}
