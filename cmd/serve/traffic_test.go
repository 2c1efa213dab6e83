package serve

import (
	"testing"
	"time"
)

func TestTrafficState(t *testing.T) {
	ready := trafficIn{started: true, cluster: true, mapOK: true, mapAge: 100 * time.Millisecond, prewarmed: true}
	with := func(f func(*trafficIn)) trafficIn { in := ready; f(&in); return in }
	cases := []struct {
		name string
		in   trafficIn
		want TrafficState
	}{
		{"fresh map, prewarmed", ready, Serving},
		{"listeners not bound", with(func(in *trafficIn) { in.started = false }), Joining},
		{"no map view yet", with(func(in *trafficIn) { in.mapOK = false }), Joining},
		{"stale map view", with(func(in *trafficIn) { in.mapAge = 3 * time.Second }), Joining},
		{"map view just fresh enough", with(func(in *trafficIn) { in.mapAge = freshMap }), Serving},
		{"prewarm running", with(func(in *trafficIn) { in.prewarmed = false }), Joining},
		{"single node needs no map", trafficIn{started: true, prewarmed: true}, Serving},
		{"served, map now stale: stays serving", with(func(in *trafficIn) { in.served, in.mapAge = true, time.Hour }), Serving},
		{"draining while joining", with(func(in *trafficIn) { in.draining, in.mapOK = true, false }), Draining},
		{"draining after serving", with(func(in *trafficIn) { in.draining, in.served = true, true }), Draining},
	}
	for _, c := range cases {
		if got := trafficState(c.in); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
