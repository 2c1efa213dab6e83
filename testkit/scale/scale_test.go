package scale

import "testing"

// recorder catches a Fatalf instead of stopping the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		val      string
		want     int
		wantFail bool
	}{{"", 20, false}, {"3", 3, false}, {"0", 0, true}, {"-1", 0, true}, {"x", 0, true}} {
		t.Setenv("RGIT_TEST_SCALE", tc.val)
		r := &recorder{TB: t}
		got := Count(r, "RGIT_TEST_SCALE", 20)
		if r.failed != tc.wantFail || !tc.wantFail && got != tc.want {
			t.Errorf("%q: got %d failed=%v, want %d failed=%v", tc.val, got, r.failed, tc.want, tc.wantFail)
		}
	}
}
