package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
)

// The scenario tests of whole clusters live in testkit/cluster; these
// check the leader's persistence and the single-node defaults directly.

func newLeader(t *testing.T, st objstore.Store) *Node {
	t.Helper()
	n, err := NewNode(Config{Deps: repo.Deps{Store: st}, Cluster: &ClusterConfig{Self: "rgit-0"}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// endBubble shuts n down and lets fake time pass protoactor's dead-letter
// throttle ticker so the bubble ends with no goroutine left.
func endBubble(n *Node) {
	n.Shutdown(context.Background())
	time.Sleep(2 * time.Second)
}

func TestLeaderPersistsAndReloadsMap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New()
		n := newLeader(t, st)
		svc := n.LeaderService()
		d, err := svc.Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("alice/web"), Node: "rgit-1"})
		if err != nil || d.Outcome != cluster.Granted || d.Entry.Epoch != 1 {
			t.Fatalf("claim = %+v, %v", d, err)
		}
		n.Shutdown(ctx)

		// A restarted leader loads the entry: the lease is still rgit-1's,
		// and a later grant continues the epoch sequence.
		n = newLeader(t, st)
		defer endBubble(n)
		svc = n.LeaderService()
		if d, err := svc.Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("alice/web"), Node: "rgit-2"}); err != nil || d.Outcome != cluster.Refused || d.Owner != "rgit-1" {
			t.Fatalf("claim after restart = %+v, %v", d, err)
		}
		time.Sleep(cluster.TTL)
		d, err = svc.Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("alice/web"), Node: "rgit-2"})
		if err != nil || d.Outcome != cluster.Granted || d.Entry.Epoch != 2 {
			t.Fatalf("claim after expiry = %+v, %v", d, err)
		}
		if e, ok := n.OwnershipView().Get(names.MustParse("alice/web")); !ok || e.Node != "rgit-2" || e.Epoch != 2 {
			t.Fatalf("leader view = %+v %v", e, ok)
		}
	})
}

func TestLeaderFailedCommitAnswersUnreachableAndForgetsDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fs := faultstore.New(memstore.New(), 1)
		n := newLeader(t, fs)
		defer endBubble(n)
		svc := n.LeaderService()
		fs.FailNext(faultstore.WriteOps, OwnershipPrefix, 1, false)
		if _, err := svc.Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("alice/web"), Node: "rgit-1"}); !errors.Is(err, ErrLeaderUnreachable) {
			t.Fatalf("claim with a failing store: err = %v, want ErrLeaderUnreachable", err)
		}
		// The unpersisted grant was dropped with the reload: another node
		// is granted the repo with epoch 1, not refused in favour of rgit-1.
		d, err := svc.Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("alice/web"), Node: "rgit-2"})
		if err != nil || d.Outcome != cluster.Granted || d.Owner != "rgit-2" || d.Entry.Epoch != 1 {
			t.Fatalf("claim after failure = %+v, %v", d, err)
		}
	})
}

func TestLeaderRefusesCorruptMap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New()
		db, err := refdb.Open(ctx, st, OwnershipPrefix, refdb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(ctx, refdb.Txn{refdb.Set(cluster.KeyPrefix+"alice/web", []byte{1, 0} /* version 1, epoch 0 */)}); err != nil {
			t.Fatal(err)
		}
		db.Close(ctx)
		if _, err := NewNode(Config{Deps: repo.Deps{Store: st}, Cluster: &ClusterConfig{Self: "rgit-0"}}); !errors.Is(err, cluster.ErrCorruptEntry) {
			t.Fatalf("start on a corrupt map: err = %v", err)
		}
		time.Sleep(2 * time.Second)
	})
}

func TestSingleNodeRoutesLocally(t *testing.T) {
	n, _ := newTestNode(t, memstore.New(), time.Minute, 8)
	r, err := n.Route(context.Background(), names.MustParse("alice/web"))
	if err != nil || !r.Local {
		t.Fatalf("route = %+v, %v", r, err)
	}
	if n.LeaderService() != nil || n.Draining() {
		t.Fatal("single node has a leader service or drains")
	}
	if err := n.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestFollowerNeedsLeaderClient(t *testing.T) {
	if _, err := NewNode(Config{Deps: repo.Deps{Store: memstore.New()}, Cluster: &ClusterConfig{Self: "rgit-1"}}); err == nil {
		t.Fatal("a follower without a leader client started")
	}
	if _, err := NewNode(Config{Deps: repo.Deps{Store: memstore.New()}, Cluster: &ClusterConfig{Self: "nonumber"}}); !errors.Is(err, cluster.ErrInvalidName) {
		t.Fatalf("bad self name: err = %v", err)
	}
}

// TestMovedStep: after a moved answer, an entry still naming the node
// that answered is waited out when it expires within the deadline (a
// release shortened it to the drain), re-read every poll until the
// deadline when it lasts longer (held while sessions finish), and given up
// on at the deadline (the release was lost: it lapses only at its TTL);
// any other entry routes now.
func TestMovedStep(t *testing.T) {
	movedAt := time.Unix(999, 0)
	now := time.Unix(1000, 0)
	deadline := now.Add(700 * time.Millisecond)
	soon := cluster.Entry{Node: "rgit-1", Epoch: 3, Expires: now.Add(300 * time.Millisecond)}
	for _, tc := range []struct {
		name string
		e    cluster.Entry
		ok   bool
		want movedDecision
	}{
		{"no entry", cluster.Entry{}, false, movedDecision{}},
		{"expired", cluster.Entry{Node: "rgit-1", Expires: now}, true, movedDecision{}},
		{"names another node", cluster.Entry{Node: "rgit-2", Expires: now.Add(cluster.TTL)}, true, movedDecision{}},
		{"released, expiring soon", soon, true, movedDecision{until: soon.Expires}},
		{"expires at the deadline", cluster.Entry{Node: "rgit-1", Expires: deadline}, true, movedDecision{until: deadline}},
		{"held longer: re-read", cluster.Entry{Node: "rgit-1", Expires: now.Add(cluster.TTL)}, true, movedDecision{until: now.Add(cluster.FollowerPoll)}},
		// Written for the node after its moved answer: a restarted
		// process of it (or the lease come back) holds it now.
		{"written after the moved answer", cluster.Entry{Node: "rgit-1", Written: movedAt.Add(time.Millisecond), Expires: now.Add(cluster.TTL)}, true, movedDecision{again: true}},
		{"written after, for another node", cluster.Entry{Node: "rgit-2", Written: movedAt.Add(time.Millisecond), Expires: now.Add(cluster.TTL)}, true, movedDecision{}},
	} {
		if got := movedStep(tc.e, tc.ok, "rgit-1", movedAt, now, deadline); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	held := cluster.Entry{Node: "rgit-1", Expires: now.Add(cluster.TTL)}
	if got := movedStep(held, true, "rgit-1", movedAt, deadline.Add(-time.Millisecond), deadline); got != (movedDecision{until: deadline}) {
		t.Errorf("held, last poll: %+v, want one at the deadline", got)
	}
	if got := movedStep(held, true, "rgit-1", movedAt, deadline, deadline); !got.giveUp {
		t.Errorf("held at the deadline (release lost): %+v, want give up", got)
	}
}

// TestMovedErrorClassifies: a draining node's refusal is an ErrDraining
// (503 where nothing can route again) the engine can tell apart.
func TestMovedErrorClassifies(t *testing.T) {
	var err error = fmt.Errorf("route: %w", &MovedError{Repo: "a/b", Node: "rgit-1"})
	var m *MovedError
	if !errors.Is(err, ErrDraining) || !errors.As(err, &m) || m.Repo != "a/b" {
		t.Errorf("MovedError: %v", err)
	}
}

// A joining node claims nothing: a request needing a claim waits until
// Serve, and is then granted (OnGrant hears of it); the leader's map view
// is current from the start.
func TestJoiningNodeClaimsOnlyAfterServe(t *testing.T) {
	ctx := context.Background()
	d := testDeps(t, memstore.New())
	if err := repo.Create(ctx, d, names.MustParse("alice/web")); err != nil {
		t.Fatal(err)
	}
	grants := make(chan names.Repo, 1)
	n := startNode(t, Config{Deps: d, Cluster: &ClusterConfig{Self: "rgit-0", Joining: true,
		OnGrant: func(r names.Repo) { grants <- r }}})
	if age, ok := n.MapAge(time.Now()); !ok || age != 0 {
		t.Fatalf("leader MapAge = %v, %v; want 0, true", age, ok)
	}
	if !n.LeaderReachable(time.Now()) {
		t.Fatal("the leader node does not reach itself")
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := n.Route(short, names.MustParse("alice/web")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Route while joining = %v, want it held until the deadline", err)
	}
	if _, ok := n.OwnershipView().Get(names.MustParse("alice/web")); ok {
		t.Fatal("a joining node claimed alice/web")
	}
	n.Serve()
	r, err := n.Route(ctx, names.MustParse("alice/web"))
	if err != nil || !r.Local {
		t.Fatalf("Route after Serve = %+v, %v", r, err)
	}
	if got := <-grants; got.String() != "alice/web" {
		t.Fatalf("OnGrant heard %q", got)
	}
}

// A joining node sends no heartbeat (it stays out of placement), so it
// has heard nothing from the leader; Serve sends the first one at once.
func TestJoiningNodeSendsNoHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		leader := newLeader(t, st)
		defer endBubble(leader)
		n, err := NewNode(Config{Deps: repo.Deps{Store: st}, Cluster: &ClusterConfig{Self: "rgit-1", Joining: true,
			Leader: leader.LeaderService()}})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Shutdown(context.Background())
		time.Sleep(2*cluster.RenewEvery + time.Second)
		synctest.Wait()
		if n.LeaderReachable(time.Now()) {
			t.Fatal("a joining node renewed with the leader")
		}
		if _, ok := n.MapAge(time.Now()); !ok {
			t.Fatal("the follower has no view of the map")
		}
		n.Serve()
		synctest.Wait() // the first heartbeat goes at once, not a period later
		if !n.LeaderReachable(time.Now()) {
			t.Fatal("a serving node has not renewed with the leader")
		}
	})
}

// TestNewlyNamedHere: a grant to this node is listed once, at the first
// mark after it; grants to others and unchanged entries are not.
func TestNewlyNamedHere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		n := newLeader(t, memstore.New())
		defer endBubble(n)
		svc := n.LeaderService()
		claim := func(repo, node string) {
			if d, err := svc.Claim(ctx, cluster.ClaimLease{Repo: names.MustParse(repo), Node: node}); err != nil || d.Outcome != cluster.Granted {
				t.Fatalf("claim %s for %s = %+v, %v", repo, node, d, err)
			}
		}
		claim("alice/old", "rgit-0")
		named, mark := n.NewlyNamedHere(MapMark{})
		if !slices.Equal(named, []names.Repo{names.MustParse("alice/old")}) {
			t.Fatalf("zero mark: %v", named)
		}
		claim("alice/new", "rgit-0")
		claim("bob/elsewhere", "rgit-1")
		if named, mark = n.NewlyNamedHere(mark); !slices.Equal(named, []names.Repo{names.MustParse("alice/new")}) {
			t.Fatalf("after two grants: %v", named)
		}
		if named, _ = n.NewlyNamedHere(mark); len(named) != 0 {
			t.Fatalf("nothing changed: %v", named)
		}
	})
}
