package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
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

// successors sends each repository to the node the leader steers it to
// once self has left: the rendezvous winner among the others.
func TestSuccessors(t *testing.T) {
	nodes := []string{"rgit-0", "rgit-1", "rgit-2"}
	var repos []string
	for i := range 50 {
		repos = append(repos, fmt.Sprintf("alice/r%d", i))
	}
	got := successors(repos, "rgit-1", nodes)
	others := cluster.LiveSet{{Node: "rgit-0", Weight: 1}, {Node: "rgit-2", Weight: 1}}
	n := 0
	for node, rs := range got {
		if node == "rgit-1" {
			t.Fatalf("the leaving node is its own successor for %v", rs)
		}
		for _, r := range rs {
			n++
			if want := cluster.Rendezvous(names.MustParse(r), others); want != node {
				t.Errorf("%s goes to %s, the leader steers it to %s", r, node, want)
			}
		}
	}
	if n != len(repos) || len(got) != 2 {
		t.Fatalf("%d repositories over %d successors, want %d over 2", n, len(got), len(repos))
	}
	if got := successors(repos, "rgit-0", []string{"rgit-0"}); len(got) != 0 {
		t.Fatalf("a lone node has successors: %v", got)
	}
}

// startupTargets: the repositories placement steers to self, most
// recently written first; without a peer list the map's nodes count.
func TestStartupTargets(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	nodes := []string{"rgit-0", "rgit-1", "rgit-2"}
	live := cluster.LiveSet{{Node: "rgit-0", Weight: 1}, {Node: "rgit-1", Weight: 1}, {Node: "rgit-2", Weight: 1}}
	var entries []actors.MapEntry
	var want []names.Repo
	for i := range 30 {
		r := names.MustParse(fmt.Sprintf("alice/r%d", i))
		// Owned by anyone: placement, not the current owner, decides.
		entries = append(entries, actors.MapEntry{Repo: r, Entry: cluster.Entry{Node: nodes[i%3], Written: t0.Add(time.Duration(i) * time.Second)}})
		if cluster.Rendezvous(r, live) == "rgit-1" {
			want = append([]names.Repo{r}, want...) // newest first
		}
	}
	if len(want) == 0 {
		t.Fatal("no repository placed on rgit-1; pick other names")
	}
	if got := startupTargets(entries, nodes, "rgit-1"); !slices.Equal(got, want) {
		t.Errorf("static peers: %v, want %v", got, want)
	}
	// Service mode: the map names all three nodes, so the same answer.
	if got := startupTargets(entries, nil, "rgit-1"); !slices.Equal(got, want) {
		t.Errorf("service mode: %v, want %v", got, want)
	}
	if got := startupTargets(nil, nodes, "rgit-1"); len(got) != 0 {
		t.Errorf("empty map: %v", got)
	}
}
