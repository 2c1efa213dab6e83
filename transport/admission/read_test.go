package admission

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSlotsFree(t *testing.T) {
	for _, r := range []struct {
		active, max int
		want        bool
	}{
		{0, 0, true},
		{100, 0, true},
		{0, 1, true},
		{1, 1, false},
		{3, 4, true},
		{4, 4, false},
	} {
		if got := SlotsFree(r.active, r.max); got != r.want {
			t.Errorf("SlotsFree(%d, %d) = %v, want %v", r.active, r.max, got, r.want)
		}
	}
}

// TestReads: a read answer takes a slot and a reservation in the shared
// memory budget; it is refused when the slots are taken or when the
// budget is spent by other work, and a release gives both back.
func TestReads(t *testing.T) {
	const mib = 1 << 20
	reg := prometheus.NewRegistry()
	c := New(Limits{Memory: 100 * mib, Work: 60 * mib}, reg)
	r := NewReads(c, 2)

	rel1, ok1 := r.Reserve(10 * mib)
	rel2, ok2 := r.Reserve(10 * mib)
	if !ok1 || !ok2 {
		t.Fatal("two answers within two slots refused")
	}
	if _, ok := r.Reserve(mib); ok {
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
	if _, ok := r.Reserve(10 * mib); ok {
		t.Fatal("a read answer over the memory budget was admitted")
	}
	if got := testutil.ToFloat64(c.m.refused.WithLabelValues("read", "memory")); got != 1 {
		t.Errorf("memory refusals %v, want 1", got)
	}
	// The refused answer gave its slot back.
	rel3, ok := r.Reserve(mib)
	if !ok {
		t.Fatal("a small read answer refused with a slot and memory free")
	}
	rel2()
	rel3()
	relFetch()
	if c.state.Active != 0 || c.state.Reserved != 0 || r.active != 0 {
		t.Errorf("after releases: controller %+v, read slots %d", c.state, r.active)
	}
	var none *Reads
	if rel, ok := none.Reserve(1 << 40); !ok {
		t.Error("a nil Reads refused")
	} else {
		rel()
	}
}
