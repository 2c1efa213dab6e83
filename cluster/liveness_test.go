package cluster

import (
	"reflect"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
)

func TestLiveness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := NewLiveness("rgit-0", TTL, map[string]float64{"rgit-2": 3, "rgit-3": 0}, t0)

	if got, want := l.Live(t0), (LiveSet{{"rgit-0", 1}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("fresh: Live = %v, want %v (the leader itself)", got, want)
	}
	l.Heard("rgit-2", t0.Add(time.Second))
	l.Heard("rgit-1", t0.Add(2*time.Second))
	l.Heard("rgit-3", t0.Add(2*time.Second))
	want := LiveSet{{"rgit-0", 1}, {"rgit-1", 1}, {"rgit-2", 3}, {"rgit-3", 0}}
	if got := l.Live(t0.Add(3 * time.Second)); !reflect.DeepEqual(got, want) {
		t.Fatalf("Live = %v, want %v", got, want)
	}
	if l.Live(t0).Has("rgit-3") {
		t.Errorf("weight 0 node usable for placement")
	}

	// Not heard for a TTL: out. An older message does not move the time back.
	l.Heard("rgit-2", t0)
	if got := l.Live(t0.Add(time.Second + TTL)); got.Has("rgit-2") || !got.Has("rgit-1") {
		t.Errorf("after rgit-2's TTL: Live = %v", got)
	}

	// Left (released, or unreachable) until heard again.
	l.Left("rgit-1")
	if l.Live(t0.Add(3 * time.Second)).Has("rgit-1") {
		t.Errorf("rgit-1 live after Left")
	}
	l.Heard("rgit-1", t0.Add(4*time.Second))
	if !l.Live(t0.Add(4 * time.Second)).Has("rgit-1") {
		t.Errorf("rgit-1 not live after Heard")
	}

	// The leader itself leaves when it releases (draining) and is back
	// when heard.
	l.Left("rgit-0")
	if l.Live(t0.Add(4 * time.Second)).Has("rgit-0") {
		t.Errorf("leader live after Left")
	}
	l.Heard("rgit-0", t0.Add(5*time.Second))
	if !l.Live(t0.Add(5 * time.Second)).Has("rgit-0") {
		t.Errorf("leader not live after Heard")
	}
}

func TestLivenessSettled(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := NewLiveness("rgit-0", TTL, nil, t0)
	if l.Settled(t0.Add(SettleTime-time.Millisecond)) || l.Options(true, t0).Steer {
		t.Errorf("settled before SettleTime")
	}
	if !l.Settled(t0.Add(SettleTime)) || !l.Options(true, t0.Add(SettleTime)).Steer {
		t.Errorf("not settled at SettleTime")
	}
	if l.Options(false, t0.Add(time.Hour)).Steer {
		t.Errorf("steers when steering is off")
	}
}

// TestLivenessSteersClaim: the leader's path — Claim with the live set
// steers a cold repo to its winner, and not to a node that left.
func TestLivenessSteersClaim(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0.Add(SettleTime)
	l := NewLiveness("rgit-0", TTL, nil, t0)
	for _, n := range []string{"rgit-1", "rgit-2"} {
		l.Heard(n, now)
	}
	all := l.Live(now)
	// Find a repo whose winner is rgit-1.
	var repo names.Repo
	for i := 0; repo.IsZero() && i < 26*26; i++ {
		if r := rn("alice/r" + string(rune('a'+i%26)) + string(rune('a'+i/26))); Rendezvous(r, all) == "rgit-1" {
			repo = r
		}
	}
	if repo.IsZero() {
		t.Fatal("no repo name won by rgit-1")
	}
	m := NewMap(DefaultTimings())
	d, err := m.Claim(repo, "rgit-2", now, l.Live(now), l.Options(true, now))
	if err != nil || d.Owner != "rgit-1" || !d.Steered || d.Outcome != Granted {
		t.Fatalf("claim via rgit-2: %+v, %v; want granted to rgit-1, steered", d, err)
	}
	l.Left("rgit-1")
	m2 := NewMap(DefaultTimings())
	d, err = m2.Claim(repo, "rgit-2", now, l.Live(now), l.Options(true, now))
	if err != nil || d.Owner == "rgit-1" {
		t.Fatalf("claim after rgit-1 left: %+v, %v; want not rgit-1", d, err)
	}
}
