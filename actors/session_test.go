package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
)

// sessionCluster starts a leader (no steering) and returns it with a
// function starting follower rgit-1 on the same store.
func sessionCluster(t *testing.T, st objstore.Store) (*Node, func() *Node) {
	t.Helper()
	leader, err := NewNode(Config{Deps: repo.Deps{Store: st}, Cluster: &ClusterConfig{Self: "rgit-0", Steer: SteerOff}})
	if err != nil {
		t.Fatal(err)
	}
	return leader, func() *Node {
		n, err := NewNode(Config{Deps: testDeps(t, st), Cluster: &ClusterConfig{Self: "rgit-1", Leader: leader.LeaderService()}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// Renewing a node's session renews every entry bound to it, with one
// small write per heartbeat; a restarted node opens a new session, which
// ends the old incarnation's entries at once, and a renewal of the old
// session is declined.
func TestSessionRenewsEntriesAndRestartEndsThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New()
		if err := repo.Create(ctx, repo.Deps{Store: st}, names.MustParse("alice/web")); err != nil {
			t.Fatal(err)
		}
		leader, start := sessionCluster(t, st)
		defer endBubble(leader)
		n1 := start()
		if r, err := n1.Route(ctx, names.MustParse("alice/web")); err != nil || !r.Local {
			t.Fatalf("Route = %+v, %v", r, err)
		}
		e, ok := leader.OwnershipView().Get(names.MustParse("alice/web"))
		if !ok || e.Node != "rgit-1" || e.Session == 0 {
			t.Fatalf("entry %+v (present %v), want bound to rgit-1's session", e, ok)
		}
		first := e
		// Three TTLs of heartbeats: the entry lives on, never rewritten.
		time.Sleep(3 * cluster.TTL)
		synctest.Wait()
		e, _ = leader.OwnershipView().Get(names.MustParse("alice/web"))
		if !e.Live(time.Now()) || e.Written != first.Written || e.Epoch != first.Epoch {
			t.Fatalf("after 3 TTLs: entry %+v, want %+v live and unwritten", e, first)
		}

		// Kill (a shutdown keeps its leases, as a crash) and restart.
		n1.Shutdown(ctx)
		n1 = start()
		defer n1.Shutdown(ctx)
		time.Sleep(cluster.RenewEvery + time.Millisecond) // its first heartbeat opens a session
		synctest.Wait()
		if e, _ := leader.OwnershipView().Get(names.MustParse("alice/web")); e.Live(time.Now()) {
			t.Fatalf("entry of the old incarnation still live after the restart: %+v", e)
		}
		r, err := leader.LeaderService().Renew(ctx, cluster.RenewLeases{Node: "rgit-1", Session: first.Session})
		if err != nil || !r.SessionDeclined || r.Session == first.Session {
			t.Fatalf("renewal of the old session = %+v, %v; want declined", r, err)
		}
		if r, err := n1.Route(ctx, names.MustParse("alice/web")); err != nil || !r.Local {
			t.Fatalf("Route after the restart = %+v, %v", r, err)
		}
		e, _ = leader.OwnershipView().Get(names.MustParse("alice/web"))
		if e.Epoch != first.Epoch+1 || e.Session == first.Session || !e.Live(time.Now()) {
			t.Fatalf("claim after the restart: entry %+v, want epoch %d under the new session", e, first.Epoch+1)
		}
	})
}

// A node learns it lost one repository (force-granted elsewhere) from its
// map view after a heartbeat, without the leader listing it, and closes it.
func TestSessionHolderClosesRepoGrantedElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New()
		if err := repo.Create(ctx, repo.Deps{Store: st}, names.MustParse("alice/web")); err != nil {
			t.Fatal(err)
		}
		leader, start := sessionCluster(t, st)
		defer endBubble(leader)
		n1 := start()
		defer n1.Shutdown(ctx)
		if _, err := n1.Route(ctx, names.MustParse("alice/web")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(cluster.ForceGrantQuietPeriod)
		d, err := leader.LeaderService().ForceGrant(ctx, cluster.ForceGrantLease{Repo: names.MustParse("alice/web"), Requester: "rgit-2", Dead: "rgit-1"})
		if err != nil || d.Outcome != cluster.Granted {
			t.Fatalf("force-grant = %+v, %v", d, err)
		}
		if open := openRepos(t, n1); len(open) != 1 {
			t.Fatalf("open before the heartbeat: %v", open)
		}
		time.Sleep(cluster.RenewEvery)
		synctest.Wait()
		if open := openRepos(t, n1); len(open) != 0 {
			t.Fatalf("rgit-1 still holds %v after its heartbeat; the map gave it to rgit-2", open)
		}
	})
}
