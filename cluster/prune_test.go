package cluster

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
)

func TestPrune(t *testing.T) {
	g := PruneGrace
	e := func(exp time.Duration, ep uint64) Entry {
		return Entry{Node: "rgit-1", Expires: at(exp), Written: at(exp - TTL), Epoch: ep}
	}
	cases := []struct {
		name    string
		entries map[names.Repo]Entry
		floor   uint64
		now     time.Duration
		gone    []names.Repo
		pruned  []names.Repo
		wantFlr uint64
	}{
		{"live kept", map[names.Repo]Entry{rn("a/b"): e(10*time.Second, 3)}, 0, 5 * time.Second, nil, nil, 0},
		{"live kept even if gone", map[names.Repo]Entry{rn("a/b"): e(10*time.Second, 3)}, 0, 5 * time.Second, []names.Repo{rn("a/b")}, nil, 0},
		{"lapsed within grace kept", map[names.Repo]Entry{rn("a/b"): e(10*time.Second, 3)}, 0, 10*time.Second + g - 1, nil, nil, 0},
		{"lapsed within grace, deleted: pruned", map[names.Repo]Entry{rn("a/b"): e(10*time.Second, 3)}, 0, 10 * time.Second, []names.Repo{rn("a/b")}, []names.Repo{rn("a/b")}, 3},
		{"lapsed a grace ago pruned", map[names.Repo]Entry{rn("a/b"): e(10*time.Second, 3)}, 0, 10*time.Second + g, nil, []names.Repo{rn("a/b")}, 3},
		{"floor takes the highest pruned epoch", map[names.Repo]Entry{rn("a/b"): e(0, 3), rn("c/d"): e(0, 9), rn("e/f"): e(g, 20)}, 0, g, nil, []names.Repo{rn("a/b"), rn("c/d")}, 9},
		{"floor never lowered", map[names.Repo]Entry{rn("a/b"): e(0, 3)}, 7, g, nil, []names.Repo{rn("a/b")}, 7},
		{"nothing to prune keeps floor", nil, 5, g, []names.Repo{rn("x/y")}, nil, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := mapWith(c.entries)
			m.SetFloor(c.floor)
			p := m.Prune(at(c.now), c.gone)
			if !slices.Equal(p.Repos, c.pruned) || p.Floor != c.wantFlr || p.Write != (len(c.pruned) > 0) {
				t.Fatalf("Prune = %+v, want repos %v floor %d", p, c.pruned, c.wantFlr)
			}
			if m.Floor() != c.wantFlr || m.Len() != len(c.entries)-len(c.pruned) {
				t.Fatalf("map after prune: floor %d len %d", m.Floor(), m.Len())
			}
		})
	}
}

// A repo that comes back after its entry was pruned is granted an epoch
// above any it held, even when another repo's higher epoch set the floor.
func TestPruneEpochNeverGoesBack(t *testing.T) {
	m := mapWith(map[names.Repo]Entry{rn("a/b"): {Node: "rgit-1", Expires: at(0), Written: at(0), Epoch: 4}})
	m.Prune(at(PruneGrace), nil)
	d, err := m.Claim(rn("a/b"), "rgit-2", at(PruneGrace), nil, Options{})
	if err != nil || d.Entry.Epoch != 5 {
		t.Fatalf("claim after prune: epoch %d, %v; want 5", d.Entry.Epoch, err)
	}
	// An entry that outlived a prune of a higher epoch still climbs above the floor.
	m.SetFloor(10)
	d, _ = m.Claim(rn("c/d"), "rgit-2", at(PruneGrace), nil, Options{})
	if d.Entry.Epoch != 11 {
		t.Fatalf("fresh claim above floor 10: epoch %d", d.Entry.Epoch)
	}
}

func TestLapsed(t *testing.T) {
	m := mapWith(map[names.Repo]Entry{
		rn("a/b"): {Node: "rgit-1", Expires: at(10 * time.Second), Epoch: 1},
		rn("c/d"): {Node: "rgit-1", Expires: at(time.Second), Epoch: 1},
		rn("e/f"): {Node: "rgit-1", Expires: at(-PruneGrace), Epoch: 1},
	})
	if got := m.Lapsed(at(0), at(5*time.Second)); !slices.Equal(got, []names.Repo{rn("c/d")}) {
		t.Fatalf("Lapsed = %v, want [c/d]", got)
	}
}

func TestFloorEncoding(t *testing.T) {
	f, err := DecodeFloor(EncodeFloor(1 << 40))
	if err != nil || f != 1<<40 {
		t.Fatalf("round trip: %d, %v", f, err)
	}
	if _, err := DecodeFloor([]byte("x")); !errors.Is(err, ErrCorruptEntry) {
		t.Fatalf("bad floor: %v", err)
	}
}
