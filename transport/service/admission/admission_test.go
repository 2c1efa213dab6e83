package admission

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDecide(t *testing.T) {
	const mib = 1 << 20
	clients, all, bg := []Kind{Fetch, Push}, []Kind{Fetch, Push, Maintenance}, []Kind{Maintenance}
	for _, r := range []struct {
		name  string
		kinds []Kind
		s     State
		est   int64
		want  Verdict
	}{
		{"no limits", all, State{Reserved: 1 << 40, Active: 1000}, mib, Admit},
		{"fits", clients, State{Work: 100 * mib, Reserved: 50 * mib, Active: 2}, 50 * mib, Admit},
		{"exactly spent", all, State{Work: 100 * mib, Reserved: 60 * mib, Active: 2}, 41 * mib, RefuseMemory},
		{"spent", all, State{Work: 100 * mib, Reserved: 100 * mib, Active: 4}, mib, RefuseMemory},
		{"idle node admits a big repository alone", all, State{Work: 100 * mib}, 500 * mib, Admit},
		{"big repository waits for others to finish", all, State{Work: 100 * mib, Reserved: mib, Active: 1}, 500 * mib, RefuseMemory},
		{"descriptors", all, State{MaxActive: 4, Active: 4}, 1, RefuseActive},
		{"descriptors before memory", all, State{Work: mib, Reserved: mib, MaxActive: 1, Active: 1}, mib, RefuseActive},
		{"below the descriptor cap", all, State{MaxActive: 4, Active: 3}, 1, Admit},
		// Maintenance keeps to half the work budget: it waits where a
		// client is still admitted.
		{"within half", all, State{Work: 100 * mib, Reserved: 20 * mib, Active: 1}, 30 * mib, Admit},
		{"past half: clients", clients, State{Work: 100 * mib, Reserved: 30 * mib, Active: 1}, 30 * mib, Admit},
		{"past half: maintenance", bg, State{Work: 100 * mib, Reserved: 30 * mib, Active: 1}, 30 * mib, RefuseMemory},
	} {
		for _, kind := range r.kinds {
			if got := Decide(r.s, kind, r.est); got != r.want {
				t.Errorf("%s: Decide(%+v, %s, %d) = %d, want %d", r.name, r.s, kind, r.est, got, r.want)
			}
		}
	}
}

func TestDerive(t *testing.T) {
	const gib = 1 << 30
	for _, r := range []struct {
		cgroup, configured int64
		wantMem            int64
	}{
		{0, 0, 0},
		{4 * gib, 0, 4 * gib},
		{0, 2 * gib, 2 * gib},
		{4 * gib, 2 * gib, 2 * gib},
		{2 * gib, 4 * gib, 2 * gib},
	} {
		l := Derive(r.cgroup, r.configured, 1024)
		if l.Memory != r.wantMem {
			t.Errorf("Derive(%d, %d): memory %d, want %d", r.cgroup, r.configured, l.Memory, r.wantMem)
		}
		if r.wantMem > 0 && (l.Work != r.wantMem/10*6 || l.GoMemLimit != r.wantMem/10*9) {
			t.Errorf("Derive(%d, %d): work %d gomemlimit %d", r.cgroup, r.configured, l.Work, l.GoMemLimit)
		}
		if r.wantMem == 0 && (l.Work != 0 || l.GoMemLimit != 0) {
			t.Errorf("no budget, yet work %d gomemlimit %d", l.Work, l.GoMemLimit)
		}
		// Without a budget the collector alone bounds the heap: tighter
		// than Go's default. With one, the soft limit paces it.
		if wantGC := map[bool]int{true: 100, false: UnboundedGCPercent}[r.wantMem > 0]; l.GCPercent != wantGC {
			t.Errorf("Derive(%d, %d): GCPercent %d, want %d", r.cgroup, r.configured, l.GCPercent, wantGC)
		}
	}
	for nofile, want := range map[uint64]int{1024: 234, 20000: 4978, 16: 4, 0: (1<<20*3/4 - 64) / 3} {
		if got := Derive(0, 0, nofile).MaxActive; got != want {
			t.Errorf("RLIMIT_NOFILE %d: MaxActive %d, want %d", nofile, got, want)
		}
	}
}

// TestOpenPacks: the pack cache keeps a quarter of the descriptors open,
// and with a memory budget at most a fifth of it at 2 MiB a pack, never
// fewer than 16.
func TestOpenPacks(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		nofile uint64
		mem    int64
		want   int
	}{
		{0, 0, 256},                // nothing known
		{1024, 0, 256},             // a quarter of the descriptors
		{1 << 20, 0, 1 << 18},      // a quarter of a million
		{1 << 20, 4096 * mib, 409}, // the budget bounds it: 4 GiB/10*2 / 2 MiB
		{1024, 64 * mib, 16},       // a small budget still keeps 16
		{40, 4096 * mib, 16},       // few descriptors: the floor
	} {
		if got := Derive(0, c.mem, c.nofile).OpenPacks; got != c.want {
			t.Errorf("nofile %d, memory %d MiB: OpenPacks %d, want %d", c.nofile, c.mem/mib, got, c.want)
		}
	}
}

func TestParseCgroupLimit(t *testing.T) {
	for in, want := range map[string]int64{"max\n": 0, "4294967296\n": 4 << 30, "9223372036854771712\n": 0} {
		if got, ok := ParseCgroupLimit(in); !ok || got != want {
			t.Errorf("ParseCgroupLimit(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "lots", "-1"} {
		if _, ok := ParseCgroupLimit(bad); ok {
			t.Errorf("ParseCgroupLimit(%q) accepted", bad)
		}
	}
}

func TestEstimate(t *testing.T) {
	if Estimate(Fetch, 0) != FetchBase || Estimate(Push, 0) != PushBase || Estimate(Fetch, 1000) != FetchBase+1000*BytesPerObject {
		t.Fatal("estimate is base + objects × BytesPerObject")
	}
}

// TestControllerReleases: reservations add up to the budget, a refusal
// reserves nothing, and releasing (once, however often it is called)
// frees room for new work.
func TestControllerReleases(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := New(Limits{Memory: 100, Work: 60, MaxActive: 10}, reg)
	r1, ok1 := c.Reserve(Fetch, 30)
	r2, ok2 := c.Reserve(Push, 30)
	if !ok1 || !ok2 {
		t.Fatal("two reservations within the budget refused")
	}
	if _, ok := c.Reserve(Fetch, 1); ok {
		t.Fatal("reservation past the budget admitted")
	}
	if got := testutil.ToFloat64(c.m.refused.WithLabelValues("fetch", "memory")); got != 1 {
		t.Errorf("refusals counted %v, want 1", got)
	}
	r1()
	r1()
	if got := testutil.ToFloat64(c.m.reserved); got != 30 {
		t.Errorf("reserved %v after one release (called twice), want 30", got)
	}
	r3, ok := c.Reserve(Fetch, 30)
	if !ok {
		t.Fatal("refused after a release made room")
	}
	r2()
	r3()
	if c.state.Reserved != 0 || c.state.Active != 0 {
		t.Fatalf("state after every release: %+v", c.state)
	}
	var nilc *Controller
	if release, ok := nilc.Reserve(Push, 1<<40); !ok {
		t.Fatal("a nil controller refused")
	} else {
		release()
	}
}

// TestDecideGrow: admitted work that declares more memory than its
// estimate grows within the budget while other work runs, alone past it,
// and never fails on descriptors it already holds.
func TestDecideGrow(t *testing.T) {
	const mib = 1 << 20
	for _, r := range []struct {
		name  string
		kind  Kind
		s     State
		extra int64
		want  Verdict
	}{
		{"no limits", Push, State{Reserved: 1 << 40, Active: 4}, 1 << 40, Admit},
		{"fits", Push, State{Work: 100 * mib, Reserved: 40 * mib, Active: 2}, 60 * mib, Admit},
		{"past the budget with others running", Push, State{Work: 100 * mib, Reserved: 40 * mib, Active: 2}, 61 * mib, RefuseMemory},
		{"four bombs at once", Push, State{Work: 600 * mib, Reserved: 32 * mib, Active: 4}, 1 << 30, RefuseMemory},
		{"alone past the budget", Push, State{Work: 100 * mib, Reserved: 8 * mib, Active: 1}, 500 * mib, Admit},
		{"descriptors already held", Push, State{Work: 100 * mib, Reserved: 8 * mib, Active: 4, MaxActive: 4}, mib, Admit},
		{"maintenance keeps to half", Maintenance, State{Work: 100 * mib, Reserved: 30 * mib, Active: 2}, 30 * mib, RefuseMemory},
	} {
		if got := DecideGrow(r.s, r.kind, r.extra); got != r.want {
			t.Errorf("%s: DecideGrow(%+v, %s, %d) = %d, want %d", r.name, r.s, r.kind, r.extra, got, r.want)
		}
	}
}

// TestControllerGrow: growth counts against the budget like a
// reservation, is refused past it while other work runs, and is
// released on its own.
func TestControllerGrow(t *testing.T) {
	c := New(Limits{Memory: 100, Work: 60, MaxActive: 10}, prometheus.NewRegistry())
	r1, _ := c.Reserve(Push, 10)
	r2, _ := c.Reserve(Push, 10)
	g1, ok := c.Grow(Push, 30)
	if !ok {
		t.Fatal("growth within the budget refused")
	}
	if _, ok := c.Grow(Push, 11); ok {
		t.Fatal("growth past the budget admitted while other work runs")
	}
	if _, ok := c.Reserve(Fetch, 11); ok {
		t.Fatal("growth not counted: new work admitted past the budget")
	}
	g1()
	g1()
	if c.state.Reserved != 20 || c.state.Active != 2 {
		t.Fatalf("after releasing the growth: %+v, want 20 reserved by 2", c.state)
	}
	r2()
	g2, ok := c.Grow(Push, 500)
	if !ok {
		t.Fatal("work running alone refused growth")
	}
	g2()
	r1()
	if c.state.Reserved != 0 || c.state.Active != 0 {
		t.Fatalf("state after every release: %+v", c.state)
	}
	var nilc *Controller
	if release, ok := nilc.Grow(Push, 1<<40); !ok {
		t.Fatal("a nil controller refused growth")
	} else {
		release()
	}
}
