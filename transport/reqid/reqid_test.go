package reqid

import (
	"context"
	"strings"
	"testing"
)

func TestAccept(t *testing.T) {
	for _, in := range []string{"abc", "0f8e-11:22.33_x", strings.Repeat("a", MaxLen)} {
		if got := Accept(in); got != in {
			t.Errorf("Accept(%q) = %q, want it kept", in, got)
		}
	}
	for _, in := range []string{"", strings.Repeat("a", MaxLen+1), "a b", "a\nlevel=error", `a"b`, "ü"} {
		if got := Accept(in); got == in || !Valid(got) {
			t.Errorf("Accept(%q) = %q, want a fresh valid id", in, got)
		}
	}
	if a, b := New(), New(); a == b || len(a) != 16 {
		t.Errorf("New: %q %q", a, b)
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if From(ctx) != "" {
		t.Fatal("empty context carries an id")
	}
	if got := From(With(ctx, "r1")); got != "r1" {
		t.Fatalf("From = %q", got)
	}
}
