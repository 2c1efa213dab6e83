package actors

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
)

// TestAutomaticGC: with RGIT_GC_INTERVAL_SECS set, the node collects the
// repositories it owns by itself: an unreferenced pack (a rejected push's
// leftover) disappears without any admin command, and the listed pack
// stays.
func TestAutomaticGC(t *testing.T) {
	st := memstore.New()
	d := testDeps(t, st)
	// The push happens on a node without automatic gc: with no minimum
	// age, a collection could otherwise take the pack it is staging.
	pushNode := startNode(t, Config{Deps: d, WarmTTL: time.Minute})
	newPusher(t, pushNode, d, "alice", "gc").push()
	if err := pushNode.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, Config{Deps: d, WarmTTL: time.Minute, GCInterval: 20 * time.Millisecond, GCMinAge: 0})
	listed := packsOf(t, n, "alice", "gc")
	ctx := context.Background()
	garbage, garbageIdx := repo.PackKeys("alice", "gc", "pack-"+strings.Repeat("ab", 20))
	for _, k := range []string{garbage, garbageIdx} {
		if err := st.Put(ctx, k, strings.NewReader("leftover"), 8); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := st.Head(ctx, garbage)
		if err != nil {
			break // collected
		}
		if time.Now().After(deadline) {
			t.Fatal("the unreferenced pack was not collected within 30 s at a 20 ms interval")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := st.Head(ctx, garbageIdx); err == nil {
		t.Error("the unreferenced index survived")
	}
	for _, pk := range listed {
		key, _ := repo.PackKeys("alice", "gc", pk.Name)
		if _, err := st.Head(ctx, key); err != nil {
			t.Errorf("listed pack %s was collected: %v", pk.Name, err)
		}
	}
	if got := packsOf(t, n, "alice", "gc"); len(got) != len(listed) {
		t.Errorf("packs after gc %d, before %d", len(got), len(listed))
	}
}
