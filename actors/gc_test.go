package actors

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
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
	garbage, garbageIdx := repo.PackKeys(names.MustParse("alice/gc"), "pack-"+strings.Repeat("ab", 20))
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
		key, _ := repo.PackKeys(names.MustParse("alice/gc"), pk.Name)
		if _, err := st.Head(ctx, key); err != nil {
			t.Errorf("listed pack %s was collected: %v", pk.Name, err)
		}
	}
	if got := packsOf(t, n, "alice", "gc"); len(got) != len(listed) {
		t.Errorf("packs after gc %d, before %d", len(got), len(listed))
	}
}

// purges records Purge calls; with fail set each one fails.
type purges struct {
	mu    sync.Mutex
	repos []string
	fail  error
}

func (p *purges) Purge(_ context.Context, r names.Repo) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.repos = append(p.repos, r.String())
	return p.fail
}

// TestGCPurgesCache: a collection that deletes packs (the ones a repack
// retired) purges the repository's cached read-API answers, which may
// show objects that are gone; one that deletes nothing does not; a purge
// that fails is the collection's error, the deletions done.
func TestGCPurgesCache(t *testing.T) {
	ctx := context.Background()
	d := testDeps(t, memstore.New())
	p := &purges{}
	n := startNode(t, Config{Deps: d, WarmTTL: time.Minute, MaintenanceSlots: -1, Cache: p})
	pu := newPusher(t, n, d, "alice", "gc")
	pu.quiet = true
	pu.push()
	pu.push()
	repack := func() {
		t.Helper()
		pu.push()
		if _, err := n.Repack(ctx, names.MustParse("alice/gc"), nil); err != nil {
			t.Fatal(err)
		}
	}
	repack()
	if st, err := n.CollectGarbage(ctx, names.MustParse("alice/gc"), 0); err != nil || st.DeletedPacks != 3 {
		t.Fatalf("gc after a repack of 3 packs: %+v, %v", st, err)
	}
	if st, err := n.CollectGarbage(ctx, names.MustParse("alice/gc"), 0); err != nil || st.DeletedKeys != 0 {
		t.Fatalf("second gc: %+v, %v", st, err)
	}
	if !slices.Equal(p.repos, []string{"alice/gc"}) {
		t.Fatalf("purges %v, want one of alice/gc", p.repos)
	}
	p.fail = errors.New("redis down (run rgit-admin purge-cache alice/gc to retry)")
	repack()
	st, err := n.CollectGarbage(ctx, names.MustParse("alice/gc"), 0)
	if err == nil || !strings.Contains(err.Error(), "purge-cache") || st.DeletedPacks == 0 {
		t.Fatalf("gc with a failing purge: %+v, %v", st, err)
	}
}
