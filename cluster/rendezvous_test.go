package cluster

import (
	"fmt"
	"math"
	"testing"

	"github.com/rgit/rgit/storage/names"
)

func repoNames(n int) []names.Repo {
	out := make([]names.Repo, n)
	for i := range out {
		out[i] = rn(fmt.Sprintf("owner%d/repo%d", i%97, i))
	}
	return out
}

func equalNodes(n int) []NodeWeight {
	out := make([]NodeWeight, n)
	for i := range out {
		out[i] = NodeWeight{fmt.Sprintf("rgit-%d", i), 1}
	}
	return out
}

func TestRendezvousEdges(t *testing.T) {
	if got := Rendezvous(rn("a/b"), nil); got != "" {
		t.Fatalf("no nodes: %q", got)
	}
	if got := Rendezvous(rn("a/b"), []NodeWeight{{"rgit-0", 0}, {"rgit-1", math.NaN()}, {"rgit-2", -1}, {"rgit-3", math.Inf(1)}}); got != "" {
		t.Fatalf("no usable weights: %q", got)
	}
	nodes := equalNodes(5)
	rev := make([]NodeWeight, len(nodes))
	for i := range nodes {
		rev[i] = nodes[len(nodes)-1-i]
	}
	for _, r := range repoNames(200) {
		if Rendezvous(r, nodes) != Rendezvous(r, rev) {
			t.Fatalf("%s: result depends on node order", r)
		}
	}
}

func TestRendezvousBalanceAndStability(t *testing.T) {
	const N, R = 5, 20000
	repos := repoNames(R)
	nodes := equalNodes(N)
	before := map[names.Repo]string{}
	count := map[string]int{}
	for _, r := range repos {
		before[r] = Rendezvous(r, nodes)
		count[before[r]]++
	}
	for n, c := range count {
		if f := float64(c) / R; math.Abs(f-1.0/N) > 0.02 {
			t.Errorf("%s gets %.3f of repos, want ≈%.3f", n, f, 1.0/N)
		}
	}

	// Adding a node moves ≈1/(N+1) of repos, all of them to the new node.
	added := append(append([]NodeWeight{}, nodes...), NodeWeight{"rgit-new", 1})
	moved := 0
	for _, r := range repos {
		if w := Rendezvous(r, added); w != before[r] {
			moved++
			if w != "rgit-new" {
				t.Fatalf("%s moved %s → %s, not to the new node", r, before[r], w)
			}
		}
	}
	if f := float64(moved) / R; math.Abs(f-1.0/(N+1)) > 0.02 {
		t.Errorf("adding a node moved %.3f, want ≈%.3f", f, 1.0/(N+1))
	}

	// Removing a node moves exactly its repos.
	removed := nodes[1:]
	for _, r := range repos {
		w := Rendezvous(r, removed)
		if (w != before[r]) != (before[r] == nodes[0].Node) {
			t.Fatalf("%s: %s → %s after removing %s", r, before[r], w, nodes[0].Node)
		}
	}
}

func TestRendezvousWeights(t *testing.T) {
	const R = 20000
	nodes := []NodeWeight{{"rgit-0", 1}, {"rgit-1", 2}, {"rgit-2", 1}}
	count := map[string]int{}
	for _, r := range repoNames(R) {
		count[Rendezvous(r, nodes)]++
	}
	for _, nw := range nodes {
		want := nw.Weight / 4
		if f := float64(count[nw.Node]) / R; math.Abs(f-want) > 0.02 {
			t.Errorf("%s weight %v gets %.3f, want ≈%.3f", nw.Node, nw.Weight, f, want)
		}
	}
}

func TestLiveSetHas(t *testing.T) {
	l := LiveSet{{"rgit-0", 1}, {"rgit-1", 0}}
	if !l.Has("rgit-0") || l.Has("rgit-1") || l.Has("rgit-2") {
		t.Fatal("Has wrong")
	}
}

// TestHashPairFixed: the placement hash is FNV-1a over node, a zero byte
// and "owner/name", then splitmix64's mixer, whatever its implementation;
// the values were computed by the string form it had before (placement
// depends on them forever).
func TestHashPairFixed(t *testing.T) {
	for _, c := range []struct {
		node, repo string
		want       uint64
	}{
		{"rgit-0", "a/b", 0x66ef3fd7a7b7cd24},
		{"rgit-1", "owner-1/repo.name_2", 0xc0e873f79b9d3e6c},
		{"node", "A/B", 0x271ee4d032fa6dda},
	} {
		if got := hashPair(c.node, rn(c.repo)); got != c.want {
			t.Errorf("hashPair(%q, %q) = %#x, want %#x", c.node, c.repo, got, c.want)
		}
	}
}
