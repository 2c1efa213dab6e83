package actors

import (
	"testing"
	"time"
)

// TestInPhase: a wait for a shared deadline ends at the caller's offset
// within the millisecond, never before the deadline and under a
// millisecond after it.
func TestInPhase(t *testing.T) {
	base := time.Date(2000, 1, 1, 0, 0, 10, 0, time.UTC)
	us := time.Microsecond
	for _, c := range []struct {
		name    string
		at, now time.Duration // after base
		want    time.Duration
	}{
		{"deadline on a whole ms, caller at phase 17µs", 9 * time.Second, 17 * us, 9*time.Second + 17*us},
		{"deadline past the caller's phase in its ms", 9*time.Second + 500*us, 17 * us, 9*time.Second + time.Millisecond + 17*us},
		{"deadline exactly at the caller's phase", 9*time.Second + 17*us, 3*time.Millisecond + 17*us, 9*time.Second + 17*us},
		{"caller on a whole ms", 9*time.Second + 1*us, 0, 9*time.Second + time.Millisecond},
		{"deadline already passed", -time.Second, 5 * us, -time.Second + 5*us},
	} {
		got := inPhase(base.Add(c.at), base.Add(c.now)).Sub(base)
		if got != c.want {
			t.Errorf("%s: woke at %s, want %s", c.name, got, c.want)
		}
		if got < c.at || got-c.at >= time.Millisecond {
			t.Errorf("%s: woke %s after the deadline", c.name, got-c.at)
		}
	}
}
