package actors

import (
	"context"
	"fmt"
	"sync/atomic"
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

// cutLeader is a leader client that a test cuts off: every call then
// fails as unreachable, as across a partition.
type cutLeader struct {
	cluster.LeaderService
	cut atomic.Bool
}

func (c *cutLeader) check() error {
	if c.cut.Load() {
		return fmt.Errorf("cut off: %w", ErrLeaderUnreachable)
	}
	return nil
}

func (c *cutLeader) Claim(ctx context.Context, m cluster.ClaimLease) (cluster.Decision, error) {
	if err := c.check(); err != nil {
		return cluster.Decision{}, err
	}
	return c.LeaderService.Claim(ctx, m)
}

func (c *cutLeader) Renew(ctx context.Context, m cluster.RenewLeases) (cluster.LeasesRenewed, error) {
	if err := c.check(); err != nil {
		return cluster.LeasesRenewed{}, err
	}
	return c.LeaderService.Renew(ctx, m)
}

// A node's repository is never moved while the node may still serve it:
// a force-grant from a node renewing its session is refused, and once the
// node is cut off from the leader it stops serving (its ServeLease ends)
// before its session lapses and the force-grant goes through.
func TestForceGrantWaitsForTheOwnersServeLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New()
		key := names.MustParse("alice/web")
		if err := repo.Create(ctx, repo.Deps{Store: st}, key); err != nil {
			t.Fatal(err)
		}
		leader, _ := sessionCluster(t, st)
		defer endBubble(leader)
		link := &cutLeader{LeaderService: leader.LeaderService()}
		n1, err := NewNode(Config{Deps: testDeps(t, st), Cluster: &ClusterConfig{Self: "rgit-1", Leader: link}})
		if err != nil {
			t.Fatal(err)
		}
		defer n1.Shutdown(ctx)
		if r, err := n1.Route(ctx, key); err != nil || !r.Local {
			t.Fatalf("Route = %+v, %v", r, err)
		}
		force := func() cluster.Decision {
			t.Helper()
			d, err := leader.LeaderService().ForceGrant(ctx, cluster.ForceGrantLease{Repo: key, Requester: "rgit-2", Dead: "rgit-1"})
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		// Alive and renewing: refused however long ago the entry was
		// written, and told to wait for its session's lapse.
		time.Sleep(2 * cluster.TTL)
		synctest.Wait()
		if d := force(); d.Outcome != cluster.Refused || d.Reason != cluster.ReasonQuiet || !cluster.ForceAt(d.Entry, cluster.ForceGrantQuietPeriod).After(time.Now()) {
			t.Fatalf("force-grant from a renewing owner = %+v", d)
		}

		// Cut off just after a heartbeat: it serves until its ServeLease
		// ends, and no longer.
		link.cut.Store(true)
		cut := time.Now()
		sessionAt := func(at time.Time) error {
			t.Helper()
			time.Sleep(time.Until(at))
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			s, err := n1.Session(rctx, key)
			if err == nil {
				s.Release()
			}
			return err
		}
		// The last acknowledged heartbeat was sent within a period before
		// the cut.
		lease := cluster.TTL - cluster.ServeMargin(cluster.TTL)
		if err := sessionAt(cut.Add(lease - cluster.RenewEvery - time.Second)); err != nil {
			t.Fatalf("no session within the serve lease: %v", err)
		}
		if err := sessionAt(cut.Add(lease + time.Millisecond)); err == nil {
			t.Fatal("served a session after the serve lease ended")
		}
		// Only now, its session lapsed, may the repository move.
		d := force()
		if d.Outcome == cluster.Refused {
			time.Sleep(time.Until(cluster.ForceAt(d.Entry, cluster.ForceGrantQuietPeriod)))
			d = force()
		}
		if d.Outcome != cluster.Granted || d.Owner != "rgit-2" {
			t.Fatalf("force-grant after the owner's session lapsed = %+v", d)
		}
		if open := openRepos(t, n1); len(open) != 0 {
			t.Fatalf("rgit-1 still holds %v open", open)
		}
	})
}
