package reqid

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
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

// TestEdge: a client's id is never the request id; a sane one is kept
// beside a new one, and both are logged.
func TestEdge(t *testing.T) {
	id, client := Edge("lb-1")
	if id == "lb-1" || !Valid(id) || client != "lb-1" {
		t.Fatalf("Edge(lb-1) = %q, %q", id, client)
	}
	if _, client := Edge("a\nlevel=error"); client != "" {
		t.Fatalf("insane client id kept: %q", client)
	}
	core, logs := observer.New(zap.InfoLevel)
	ctx := WithClient(context.Background(), id, client)
	zap.New(core).Info("x", Field(ctx))
	got := logs.All()[0].ContextMap()
	if got["request_id"] != id || got["client_request_id"] != "lb-1" {
		t.Fatalf("logged %v", got)
	}
	zap.New(core).Info("y", Field(With(context.Background(), "r2")))
	if got := logs.All()[1].ContextMap(); got["request_id"] != "r2" || got["client_request_id"] != nil {
		t.Fatalf("logged %v", got)
	}
}
