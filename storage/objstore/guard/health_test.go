package guard

import (
	"testing"
	"time"
)

func TestObserve(t *testing.T) {
	p := Policy{DownAfter: 3, TrialEvery: time.Second}
	t0 := time.Unix(1000, 0)
	now := t0.Add(5 * time.Second)
	for _, tc := range []struct {
		name string
		h    Health
		ok   bool
		want Health
	}{
		{"healthy ok", Health{State: Healthy, Since: t0}, true, Health{State: Healthy, Since: t0}},
		{"healthy first fail", Health{State: Healthy, Since: t0}, false, Health{State: Degraded, Fails: 1, Since: now}},
		{"degraded second fail", Health{State: Degraded, Fails: 1, Since: t0}, false, Health{State: Degraded, Fails: 2, Since: t0}},
		{"degraded third fail: down", Health{State: Degraded, Fails: 2, Since: t0}, false,
			Health{State: Down, Fails: 3, Since: now, NextTrial: now.Add(time.Second)}},
		{"degraded ok", Health{State: Degraded, Fails: 2, Since: t0}, true, Health{State: Healthy, Since: now}},
		{"down fail keeps since and trial", Health{State: Down, Fails: 3, Since: t0, NextTrial: t0.Add(9 * time.Second)}, false,
			Health{State: Down, Fails: 4, Since: t0, NextTrial: t0.Add(9 * time.Second)}},
		{"down ok: healthy at once", Health{State: Down, Fails: 9, Since: t0, NextTrial: now}, true, Health{State: Healthy, Since: now}},
	} {
		if got := Observe(tc.h, tc.ok, now, p); got != tc.want {
			t.Errorf("%s: Observe(%+v, ok=%v) = %+v, want %+v", tc.name, tc.h, tc.ok, got, tc.want)
		}
	}
	// DownAfter 1: the first failure is down.
	if got := Observe(Health{}, false, now, Policy{DownAfter: 1, TrialEvery: time.Second}); got.State != Down {
		t.Errorf("DownAfter 1: %v after one failure", got.State)
	}
}

func TestAdmit(t *testing.T) {
	p := Policy{DownAfter: 3, TrialEvery: time.Second}
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name      string
		h         Health
		probe     bool
		wantOK    bool
		wantTrial time.Time
	}{
		{"healthy", Health{State: Healthy}, false, true, time.Time{}},
		{"healthy probe", Health{State: Healthy}, true, true, time.Time{}},
		{"degraded", Health{State: Degraded, Fails: 2}, false, true, time.Time{}},
		{"down request", Health{State: Down, NextTrial: now.Add(-time.Hour)}, false, false, now.Add(-time.Hour)},
		{"down probe before trial", Health{State: Down, NextTrial: now.Add(time.Millisecond)}, true, false, now.Add(time.Millisecond)},
		{"down probe at trial", Health{State: Down, NextTrial: now}, true, true, now.Add(time.Second)},
		{"down probe long after trial", Health{State: Down, NextTrial: now.Add(-time.Hour)}, true, true, now.Add(time.Second)},
	} {
		h, ok := Admit(tc.h, now, p, tc.probe)
		if ok != tc.wantOK || !h.NextTrial.Equal(tc.wantTrial) {
			t.Errorf("%s: Admit = %v, next trial %v; want %v, %v", tc.name, ok, h.NextTrial, tc.wantOK, tc.wantTrial)
		}
	}
}

// TestTrialsBounded: however many requests and probes a down store is
// asked for, it is sent at most one probe a TrialEvery.
func TestTrialsBounded(t *testing.T) {
	p := Policy{DownAfter: 3, TrialEvery: time.Second}
	now := time.Unix(1000, 0)
	h := Observe(Observe(Observe(Health{}, false, now, p), false, now, p), false, now, p)
	sent := 0
	for i := range 60_000 { // a request and a probe every millisecond for a minute
		var ok bool
		at := now.Add(time.Duration(i) * time.Millisecond)
		if h, ok = Admit(h, at, p, false); ok {
			t.Fatalf("a request sent to a down store at %v", at)
		}
		if h, ok = Admit(h, at, p, true); ok {
			sent++
			h = Observe(h, false, now, p)
		}
	}
	// The first trial is a second after the store went down.
	if sent != 59 {
		t.Errorf("%d requests sent to a down store in 60 s, want 59", sent)
	}
}
