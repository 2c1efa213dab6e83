package node_test

import (
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

// TestColdNodeReusesSharedClonePack: a node with an empty cache serves a
// clone with the clone pack another node built and stored, instead of
// building it again (rgit_clone_packs_total by source).
func TestColdNodeReusesSharedClonePack(t *testing.T) {
	store := gitenv.FileStore(t)
	env := gitenv.New(t)
	a := gitenv.StartServer(t, store)
	token := a.AddToken(t, "alice")
	a.CreateRepo(t, "alice/shared")
	work := env.Scratch(t)
	var tip string
	for i := range 3 {
		tip = env.Commit(t, work, "c", map[string]string{"f.txt": string(rune('a' + i))})
	}
	env.Run(t, work, "push", "-q", a.HTTPURL(token, "alice/shared"), "main")
	env.Run(t, t.TempDir(), "clone", "-q", "--bare", a.HTTPURL(token, "alice/shared"), "a.git")
	if v := metricValue(t, a, `rgit_clone_packs_total{source="built"}`); v != 1 {
		t.Fatalf("first node built %v clone packs, want 1", v)
	}
	// Shutting down waits for the clone pack's upload.
	a.Restart(t)

	b := gitenv.StartServer(t, store)
	dir := t.TempDir()
	env.Run(t, dir, "clone", "-q", "--bare", b.HTTPURL(token, "alice/shared"), "b.git")
	if got := env.Run(t, dir+"/b.git", "rev-parse", "refs/heads/main"); got != tip {
		t.Fatalf("cold node's clone has main %s, want %s", got, tip)
	}
	env.Fsck(t, dir+"/b.git")
	if v := metricValue(t, b, `rgit_clone_packs_total{source="built"}`); v != 0 {
		t.Fatalf("cold node built %v clone packs, want 0 (another node stored it)", v)
	}
	if v := metricValue(t, b, `rgit_clone_packs_total{source="shared"}`); v != 1 {
		t.Fatalf("cold node took %v clone packs from the store, want 1", v)
	}
}
