package admission

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestReads: a read answer takes a slot and a reservation in the shared
// memory budget; it is refused when the slots stay taken for the wait or
// when the budget is spent by other work, and a release gives both back.
func TestReads(t *testing.T) {
	const mib = 1 << 20
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	c := New(Limits{Memory: 100 * mib, Work: 60 * mib}, reg)
	r := NewReads(c, 2, 0)

	rel1, ok1 := r.Reserve(ctx, 10*mib)
	rel2, ok2 := r.Reserve(ctx, 10*mib)
	if !ok1 || !ok2 {
		t.Fatal("two answers within two slots refused")
	}
	if _, ok := r.Reserve(ctx, mib); ok {
		t.Fatal("a third answer took a slot of two")
	}
	if got := testutil.ToFloat64(c.m.refused.WithLabelValues("read", "slots")); got != 1 {
		t.Errorf("slot refusals %v, want 1", got)
	}
	rel1()
	rel1() // a second call changes nothing
	// The memory budget is the pack work's: a clone holding most of it
	// leaves no room for a big read answer.
	relFetch, ok := c.Reserve(Fetch, 45*mib)
	if !ok {
		t.Fatal("fetch refused")
	}
	if _, ok := r.Reserve(ctx, 10*mib); ok {
		t.Fatal("a read answer over the memory budget was admitted")
	}
	if got := testutil.ToFloat64(c.m.refused.WithLabelValues("read", "memory")); got != 1 {
		t.Errorf("memory refusals %v, want 1", got)
	}
	// The refused answer gave its slot back.
	rel3, ok := r.Reserve(ctx, mib)
	if !ok {
		t.Fatal("a small read answer refused with a slot and memory free")
	}
	rel2()
	rel3()
	relFetch()
	if c.state.Active != 0 || c.state.Reserved != 0 || len(r.slots) != 0 {
		t.Errorf("after releases: controller %+v, read slots %d", c.state, len(r.slots))
	}
	var none *Reads
	if rel, ok := none.Reserve(ctx, 1<<40); !ok {
		t.Error("a nil Reads refused")
	} else {
		rel()
	}
}

// TestReadsWait: an answer waits for a slot up to the wait: one freed
// within it is taken; none freed, or the client gone, is a refusal.
func TestReadsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		r := NewReads(nil, 1, 2*time.Second)
		hold, _ := r.Reserve(ctx, 0)
		go func() {
			time.Sleep(time.Second)
			hold()
		}()
		start := time.Now()
		rel, ok := r.Reserve(ctx, 0)
		if !ok || time.Since(start) != time.Second {
			t.Fatalf("waited %v for a slot freed after 1s: admitted %v", time.Since(start), ok)
		}
		start = time.Now()
		if _, ok := r.Reserve(ctx, 0); ok || time.Since(start) != 2*time.Second {
			t.Errorf("slot never freed: admitted %v after %v, want a refusal after the 2s wait", ok, time.Since(start))
		}
		gone, cancel := context.WithCancel(ctx)
		cancel()
		if _, ok := r.Reserve(gone, 0); ok {
			t.Error("a gone client's answer was admitted")
		}
		rel()
	})
}
