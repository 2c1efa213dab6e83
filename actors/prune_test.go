package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
)

// The leader prunes the entry of a deleted repository at its next pass and
// a lapsed entry after the grace period, and persists the epoch floor: a
// restarted leader grants the returning repository a higher epoch.
func TestLeaderPrunesDeletedAndLapsedEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New()
		deps := repo.Deps{Store: st}
		for _, r := range [][2]string{{"alice", "web"}, {"bob", "gone"}} {
			if err := repo.Create(ctx, deps, names.MustParse(r[0]+"/"+r[1])); err != nil {
				t.Fatal(err)
			}
		}
		n := newLeader(t, st)
		defer func() { endBubble(n) }()
		svc := n.LeaderService()
		for range 3 {
			if _, err := svc.Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("alice/web"), Node: "rgit-1"}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(cluster.TTL) // lapse, then claim again: epoch 3
		}
		if _, err := svc.Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("bob/gone"), Node: "rgit-1"}); err != nil {
			t.Fatal(err)
		}
		if err := repo.Delete(ctx, deps, names.MustParse("bob/gone")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(cluster.PruneEvery + time.Second)
		synctest.Wait()
		view := n.OwnershipView()
		if _, ok := view.Get(names.MustParse("bob/gone")); ok {
			t.Fatal("entry of the deleted repository survived a pruning pass")
		}
		if _, ok := view.Get(names.MustParse("alice/web")); !ok {
			t.Fatal("entry of an existing repository pruned before its grace period")
		}
		time.Sleep(cluster.PruneGrace)
		synctest.Wait()
		if _, ok := n.OwnershipView().Get(names.MustParse("alice/web")); ok {
			t.Fatal("entry lapsed longer than the grace period survived")
		}
		n.Shutdown(ctx)

		n = newLeader(t, st)
		d, err := n.LeaderService().Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("alice/web"), Node: "rgit-2"})
		if err != nil || d.Outcome != cluster.Granted || d.Entry.Epoch != 4 {
			t.Fatalf("claim of a pruned repository after restart = %+v, %v; want epoch 4", d, err)
		}
	})
}
