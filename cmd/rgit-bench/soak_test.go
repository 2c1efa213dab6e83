package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPlanFaultRotation(t *testing.T) {
	nodes := []string{"rgit-0", "rgit-1", "rgit-2"}
	for _, tc := range []struct {
		i      int
		leader string
		want   string
	}{
		{0, "rgit-0", "kill9:rgit-1"},
		{1, "rgit-0", "term:rgit-2"},
		{2, "rgit-0", "hang:store"},
		{3, "rgit-0", "leader-restart:rgit-0"},
		// The next round swaps the followers: each meets both signals.
		{4, "rgit-0", "kill9:rgit-2"},
		{5, "rgit-0", "term:rgit-1"},
		{7, "rgit-0", "leader-restart:rgit-0"},
		{8, "rgit-0", "kill9:rgit-1"},
		// Whoever the cluster names as leader is the one restarted, and
		// never the target of the follower faults.
		{3, "rgit-1", "leader-restart:rgit-1"},
		{0, "rgit-1", "kill9:rgit-0"},
		{1, "rgit-1", "term:rgit-2"},
		{4, "rgit-1", "kill9:rgit-2"},
	} {
		if got := planFault(tc.i, nodes, tc.leader).String(); got != tc.want {
			t.Errorf("planFault(%d, leader %s) = %s, want %s", tc.i, tc.leader, got, tc.want)
		}
	}
	// A single node is its own follower.
	if got := planFault(1, []string{"rgit-0"}, "rgit-0").String(); got != "term:rgit-0" {
		t.Errorf("one node: %s", got)
	}
}

func TestTallySoakSplitsFaultErrors(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	windows := []faultWindow{{at(10), at(20)}}
	const grace = 5 * time.Second
	fail := errors.New("cut")
	for _, tc := range []struct {
		name                     string
		rec                      soakRecord
		ops, errors, faultErrors int
	}{
		{"ok", soakRecord{op: soakPush, start: at(1), end: at(2)}, 1, 0, 0},
		{"failed before the fault", soakRecord{start: at(1), end: at(9.9), err: fail}, 1, 1, 0},
		{"failed inside", soakRecord{start: at(12), end: at(13), err: fail}, 1, 0, 1},
		{"started before, cut by the fault", soakRecord{start: at(8), end: at(10.5), err: fail}, 1, 0, 1},
		{"failed in the grace", soakRecord{start: at(24), end: at(24.5), err: fail}, 1, 0, 1},
		{"grace's last instant", soakRecord{start: at(25), end: at(26), err: fail}, 1, 0, 1},
		{"failed after the grace", soakRecord{start: at(25.1), end: at(26), err: fail}, 1, 1, 0},
		{"spans the whole window", soakRecord{start: at(5), end: at(30), err: fail}, 1, 0, 1},
		{"ended outside the span", soakRecord{start: at(100), end: at(120), err: fail}, 0, 0, 0},
	} {
		got := tallySoak([]soakRecord{tc.rec}, windows, grace, at(0), at(60))
		if got.ops != tc.ops || got.errors != tc.errors || got.faultErrors != tc.faultErrors {
			t.Errorf("%s: ops=%d errors=%d fault_errors=%d, want %d %d %d", tc.name, got.ops, got.errors, got.faultErrors, tc.ops, tc.errors, tc.faultErrors)
		}
	}
	// p99 is per operation, of the successful ones only.
	recs := []soakRecord{
		{op: soakClone, start: at(1), end: at(3)},
		{op: soakClone, start: at(1), end: at(2)},
		{op: soakClone, start: at(1), end: at(50), err: fail},
		{op: soakAPI, start: at(1), end: at(1.5)},
	}
	got := tallySoak(recs, nil, grace, at(0), at(60))
	if got.p99[soakClone] != 2*time.Second || got.p99[soakAPI] != 500*time.Millisecond || got.p99[soakPush] != 0 {
		t.Errorf("p99 %v", got.p99)
	}
}

// life is samples of one process every 10 s from start, rss in MB and
// fds and goroutines as given, the same for each sample unless grow
// says how much the last ones add.
func life(node string, pid, repos int, start time.Time, n int, rssMB, fds, gr int, grow float64) []resSample {
	var ss []resSample
	for i := range n {
		f := 1.0
		if i >= n*3/4 {
			f = grow
		}
		ss = append(ss, resSample{node: node, pid: pid, repos: repos, at: start.Add(time.Duration(i) * 10 * time.Second),
			rssKB: int64(float64(rssMB*1024) * f), fds: int(float64(fds) * f), goroutines: int(float64(gr) * f)})
	}
	return ss
}

func TestFlatness(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const settle = 20 * time.Second
	cat := func(parts ...[]resSample) []resSample {
		var out []resSample
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		samples []resSample
		flat    bool
		span    time.Duration
	}{
		{"steady", life("n", 1, 3, t0, 20, 50, 40, 60, 1), true, 170 * time.Second},
		{"grows 10%", life("n", 1, 3, t0, 20, 50, 40, 60, 1.1), true, 170 * time.Second},
		{"grows 30%", life("n", 1, 3, t0, 20, 50, 40, 60, 1.3), false, 170 * time.Second},
		// The restart's drop does not count, nor the new process's
		// lower figures: each process is measured from its start; the
		// longest life is the one judged.
		{"restarted", cat(life("n", 1, 3, t0, 20, 90, 80, 100, 1), life("n", 2, 3, t0.Add(200*time.Second), 8, 30, 20, 30, 1)), true, 170 * time.Second},
		{"leak in the longest life", cat(life("n", 1, 3, t0, 8, 50, 40, 60, 1), life("n", 2, 3, t0.Add(100*time.Second), 20, 50, 40, 60, 1.5)), false, 170 * time.Second},
		// More repositories open is a bigger working set, not a leak:
		// each working set is its own stretch.
		{"working set grows", cat(life("n", 1, 3, t0, 20, 50, 40, 60, 1), life("n", 1, 5, t0.Add(200*time.Second), 10, 70, 60, 80, 1)), true, 170 * time.Second},
		{"too short to judge", life("n", 1, 3, t0, 8, 50, 40, 60, 3), true, 50 * time.Second},
	} {
		got := flatness(tc.samples, settle, flatLimit)
		if len(got) != 1 {
			t.Fatalf("%s: %d nodes", tc.name, len(got))
		}
		if got[0].flat != tc.flat || got[0].span != tc.span || got[0].judged != (tc.span >= minStretch) {
			t.Errorf("%s: %+v, want flat=%t span=%s", tc.name, got[0], tc.flat, tc.span)
		}
	}
	// The settle is left out: a process's start (caches filling) is not
	// its baseline.
	warm := life("n", 1, 3, t0, 20, 50, 40, 60, 1)
	for i := range 2 {
		warm[i].rssKB, warm[i].fds, warm[i].goroutines = 1024, 5, 5
	}
	if got := flatness(warm, settle, flatLimit); !got[0].flat || got[0].rss != 1 {
		t.Errorf("warm-up counted: %+v", got[0])
	}
	// A burst of requests in flight at one sample of the last quarter is
	// no growth: the quarter's floor is compared.
	burst := life("n", 1, 3, t0, 20, 50, 40, 60, 1)
	burst[18].goroutines, burst[18].fds = 200, 200
	if got := flatness(burst, settle, flatLimit); !got[0].flat {
		t.Errorf("one busy sample judged a leak: %+v", got[0])
	}
	// Nodes keep their order of first appearance.
	two := flatness(cat(life("b", 1, 3, t0, 20, 50, 40, 60, 1), life("a", 2, 3, t0, 20, 50, 40, 60, 2)), settle, flatLimit)
	if len(two) != 2 || two[0].node != "b" || !two[0].flat || two[1].node != "a" || two[1].flat {
		t.Errorf("two nodes: %+v", two)
	}
}

func TestJudgeSoak(t *testing.T) {
	flat := []nodeFlat{{node: "rgit-0", flat: true}, {node: "rgit-1", flat: true}}
	leaky := []nodeFlat{{node: "rgit-0", flat: true}, {node: "rgit-1", flat: false}}
	for _, tc := range []struct {
		name               string
		all                soakTally
		acked, lost, fails int
		nodes              []nodeFlat
		pass               bool
	}{
		{"clean", soakTally{ops: 1000, faultErrors: 7}, 200, 0, 0, flat, true},
		{"an error outside the faults", soakTally{ops: 1000, errors: 1}, 200, 0, 0, flat, false},
		{"a lost push", soakTally{ops: 1000}, 200, 1, 0, flat, false},
		{"a node not flat", soakTally{ops: 1000}, 200, 0, 0, leaky, false},
		{"a fault that went wrong", soakTally{ops: 1000}, 200, 0, 1, flat, false},
		{"no load", soakTally{}, 0, 0, 0, flat, false},
		{"no push acknowledged", soakTally{ops: 1000}, 0, 0, 0, flat, false},
	} {
		v := judgeSoak(20, tc.all, tc.acked, tc.lost, tc.fails, tc.nodes)
		if v.pass != tc.pass {
			t.Errorf("%s: pass=%t, want %t (%s)", tc.name, v.pass, tc.pass, v.line())
		}
	}
	v := judgeSoak(20, soakTally{ops: 2000, errors: 0, faultErrors: 10}, 300, 0, 0, flat)
	want := "soak verdict=pass minutes=20 ops=2000 errors=0 fault_errors=10 error_rate=0.0000 fault_error_rate=0.0050 acked=300 lost=0 rgit-0=span_s:0,repos:0,rss:0.00,fds:0.00,goroutines:0.00,flat=short"
	if !strings.HasPrefix(v.line(), want) {
		t.Errorf("line:\n%s\nwant prefix:\n%s", v.line(), want)
	}
}
