package actors

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/refdb"
)

// TestLeaderAnswersWhileScanning: the leader actor runs the rebalancer's
// scan of the map on a goroutine of its own, so a claim is answered while
// the scan is held inside the map's base (where a scan inside the actor
// would keep the claim waiting until its timeout); once let go, the
// scan's result reaches the actor, the next round starts the move it
// found, and the target is told to prewarm in the answer to its
// heartbeat. Stopping the actor waits for no scan left behind.
func TestLeaderAnswersWhileScanning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New()
		n := newLeader(t, st) // the actor system, metrics and log
		defer endBubble(n)
		db, err := refdb.Open(ctx, st, "test/scanning-leader", refdb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		live := cluster.LiveSet{{Node: "rgit-1", Weight: 1}, {Node: "rgit-2", Weight: 1}}
		// repo: held by rgit-1, placed on rgit-2.
		var repo names.Repo
		for _, r := range []string{"a/0", "a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7"} {
			if cluster.Rendezvous(names.MustParse(r), live) == "rgit-2" {
				repo = names.MustParse(r)
				break
			}
		}
		if repo == (names.Repo{}) {
			t.Fatal("no repository placed on rgit-2")
		}
		now := time.Now()
		base := &gatedBase{entries: map[names.Repo]cluster.Entry{repo: {Node: "rgit-1", Epoch: 1, Session: 1, Written: now}},
			entered: make(chan struct{}), release: make(chan struct{})}
		m := cluster.NewMapOver(cluster.DefaultTimings(), base)
		for _, nw := range live {
			if err := m.PutSession(nw.Node, cluster.NodeSession{ID: 1, Expires: now.Add(time.Hour), Started: now}); err != nil {
				t.Fatal(err)
			}
		}
		a := &leaderActor{node: n, db: db, m: m, live: func() cluster.LiveSet { return live },
			liveness: cluster.NewLiveness("rgit-0", cluster.TTL, nil, now), outage: outage{unpersisted: cluster.Unpersisted{}},
			rebal: cluster.NewRebalancer(cluster.DefaultRebalanceLimits(1))}
		pid, err := n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), "scanning-leader")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(cluster.SettleTime)
		n.system.Root.Send(pid, &leaderRebalance{})
		<-base.entered
		other := names.MustParse("b/claimed")
		r, err := askLeader(ctx, n, pid, &cluster.ClaimLease{Repo: other, Node: "rgit-2"})
		if err != nil || r.err != nil || r.d.Outcome != cluster.Granted {
			t.Fatalf("claim while the scan runs: %+v, %v", r, err)
		}
		prewarms := func() []names.Repo {
			t.Helper()
			r, err := askLeader(ctx, n, pid, &cluster.RenewLeases{Node: "rgit-2", Session: 1})
			if err != nil || r.err != nil {
				t.Fatalf("heartbeat of rgit-2: %+v, %v", r, err)
			}
			return r.renew.Prewarm
		}
		n.system.Root.Send(pid, &leaderRebalance{})
		if got := prewarms(); len(got) != 0 {
			t.Fatalf("prewarm %v before the scan's result", got)
		}
		close(base.release)
		synctest.Wait() // the scan ends, and its result reaches the actor
		n.system.Root.Send(pid, &leaderRebalance{})
		if got := prewarms(); !slices.Equal(got, []names.Repo{repo}) {
			t.Fatalf("prewarm %v after the scan, want %v", got, repo)
		}
		if err := n.system.Root.StopFuture(pid).Wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// gatedBase is a map's base over fixed entries whose Range tells entered
// (once: a second Range panics) and waits for release.
type gatedBase struct {
	entries          map[names.Repo]cluster.Entry
	entered, release chan struct{}
}

func (b *gatedBase) Get(repo names.Repo) (cluster.Entry, bool) {
	e, ok := b.entries[repo]
	return e, ok
}

func (b *gatedBase) Range(yield func(names.Repo, cluster.Entry) bool) {
	close(b.entered)
	<-b.release
	for r, e := range b.entries {
		if !yield(r, e) {
			return
		}
	}
}

func (b *gatedBase) Fixed() cluster.Base { return b }
