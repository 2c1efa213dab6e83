package cluster

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/actors"
	rc "github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
)

// TestRebalanceUnderTraffic: repositories first pushed through rgit-0
// before the leader steers land there (the requester), and stay warm
// under pushes through every node. The rebalancer moves each to its
// rendezvous winner within a minute; no push fails or is lost, and no
// two nodes commit under one epoch.
func TestRebalanceUnderTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		c, err := New(Options{Nodes: 3, Steer: actors.SteerOn, Rebalance: 2, Stagger: 7 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		repos := make([]string, 12)
		last := make([]uint64, len(repos))
		for i := range repos {
			repos[i] = fmt.Sprintf("a/r-%d", i)
			last[i] = 1
			if err := repo.Create(ctx, c.Deps(), names.MustParse(repos[i])); err != nil {
				t.Fatal(err)
			}
			if node, _, err := c.Push(ctx, "rgit-0", repos[i], "refs/heads/main", last[i]); err != nil || node != "rgit-0" {
				t.Fatalf("first push of %s: served by %q, %v; want rgit-0 (steering not settled)", repos[i], node, err)
			}
		}
		live := rc.LiveSet{{Node: "rgit-0", Weight: 1}, {Node: "rgit-1", Weight: 1}, {Node: "rgit-2", Weight: 1}}
		misplaced := 0
		for _, r := range repos {
			if rc.Rendezvous(names.MustParse(r), live) != "rgit-0" {
				misplaced++
			}
		}
		if misplaced == 0 {
			t.Fatal("every repository's winner is rgit-0: nothing to move")
		}
		for s := range 60 {
			for i, r := range repos {
				entry := c.Names()[(s+i)%3]
				if _, _, err := c.Push(ctx, entry, r, "refs/heads/main", last[i]+1); err != nil {
					t.Fatalf("push %d to %s through %s at %s: %v", last[i]+1, r, entry, time.Duration(s)*time.Second, err)
				}
				last[i]++
			}
			time.Sleep(time.Second)
		}
		for i, r := range repos {
			want := rc.Rendezvous(names.MustParse(r), live)
			if e, ok := c.Entry("rgit-0", r); !ok || e.Node != want {
				t.Errorf("%s held by %q, want its winner %s", r, e.Node, want)
			}
			refs, err := c.Refs(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if refs["refs/heads/main"] != last[i] {
				t.Errorf("%s main = %d, last acknowledged push %d", r, refs["refs/heads/main"], last[i])
			}
		}
		for _, v := range c.Violations() {
			t.Error(v)
		}
		t.Logf("rebalance: %d of %d repositories moved off rgit-0 under traffic", misplaced, len(repos))
	})
}

// TestRebalanceHandedOverBack: a leader that drains hands its
// repositories to the other nodes, which hold them without ever opening
// them. Once it is back, the rebalancer moves them to it, their winner,
// with no request for them in between: a holder told to release a
// repository it never opened lets it go all the same.
func TestRebalanceHandedOverBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		c, err := New(Options{Nodes: 4, Steer: actors.SteerOn, Rebalance: 2, Stagger: 7 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		time.Sleep(rc.SettleTime)
		live := liveSet(c.Names())
		var repos []string
		leaders := 0
		for i := range 16 {
			r := fmt.Sprintf("a/h-%d", i)
			if err := repo.Create(ctx, c.Deps(), names.MustParse(r)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.Push(ctx, "rgit-1", r, "refs/heads/main", 1); err != nil {
				t.Fatal(err)
			}
			if rc.Rendezvous(names.MustParse(r), live) == c.Leader() {
				leaders++
			}
			repos = append(repos, r)
		}
		if leaders == 0 {
			t.Fatal("no repository's winner is the leader: nothing handed over")
		}
		if err := c.rollingRestart(ctx, []string{c.Leader()}, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		for _, r := range repos {
			want := rc.Rendezvous(names.MustParse(r), live)
			if e, ok := c.Entry(c.Leader(), r); !ok || e.Node != want || !e.Live(time.Now()) {
				t.Errorf("%s held by %q (live %t), want its winner %s", r, e.Node, e.Live(time.Now()), want)
			}
		}
		for _, v := range c.Violations() {
			t.Error(v)
		}
	})
}
