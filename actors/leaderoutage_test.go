package actors

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
)

// While the store fails or hangs, the leader acknowledges renewals of live
// sessions from memory up to its horizon (a minute after its last landed
// commit), keeps an entry bound to such a session from anyone else, and
// acknowledges nothing else; once the store is back the next commit
// persists them, and a new leader process holds the sessions until the
// horizon plus a TTL.
func TestLeaderRenewsFromMemoryWhileTheStoreFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fs := faultstore.New(memstore.New(), 1)
		core, logs := observer.New(zap.InfoLevel)
		n, err := NewNode(Config{Deps: repo.Deps{Store: fs}, Log: zap.New(core), Cluster: &ClusterConfig{Self: "rgit-0"}})
		if err != nil {
			t.Fatal(err)
		}
		svc := n.LeaderService()
		open, err := svc.Renew(ctx, cluster.RenewLeases{Node: "rgit-1", Open: true})
		if err != nil {
			t.Fatal(err)
		}
		repo := names.MustParse("alice/a")
		if d, err := svc.Claim(ctx, cluster.ClaimLease{Repo: repo, Node: "rgit-1"}); err != nil || d.Outcome != cluster.Granted {
			t.Fatalf("claim = %+v, %v", d, err)
		}
		renew := func() error {
			r, err := svc.Renew(ctx, cluster.RenewLeases{Node: "rgit-1", Session: open.Session})
			if err == nil && r.SessionDeclined {
				return errors.New("session declined")
			}
			return err
		}
		committed := time.Now()

		// Failing at once: renewals answered, claims not.
		fs.SetOutage(true)
		for range 4 {
			time.Sleep(cluster.RenewEvery)
			if err := renew(); err != nil {
				t.Fatalf("renewal in the outage at +%s: %v", time.Since(committed), err)
			}
		}
		// The stored session lapsed at +10 s; the acknowledged one holds.
		// A claim that joins a batch with a write (the leader retries
		// persisting what it acknowledged) fails with it, unreachable, as
		// a node's claims do in an outage; the node asks again, and so
		// does this: never granted, and refused naming the owner once it
		// is decided alone.
		time.Sleep(cluster.RenewEvery)
		var d cluster.Decision
		for try := 0; ; try++ {
			d, err = svc.Claim(ctx, cluster.ClaimLease{Repo: repo, Node: "rgit-2"})
			if err == nil || try == 5 || !errors.Is(err, ErrLeaderUnreachable) {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil || d.Outcome != cluster.Refused || d.Owner != "rgit-1" {
			t.Fatalf("claim of a repository whose session was renewed from memory: %+v, %v", d, err)
		}
		if _, err := svc.Claim(ctx, cluster.ClaimLease{Repo: names.MustParse("alice/cold"), Node: "rgit-2"}); err == nil {
			t.Fatal("a grant was acknowledged without a durable write")
		}

		// Hanging: a renewal is answered within a second, from memory, up
		// to the horizon.
		fs.SetOutage(false)
		gate := fs.Hold(faultstore.AllOps, OwnershipPrefix)
		acks := 4
		for time.Since(committed)+cluster.RenewEvery < cluster.StoreGrace {
			time.Sleep(cluster.RenewEvery)
			start := time.Now()
			if err := renew(); err != nil || time.Since(start) > leaderSlowWrite {
				t.Fatalf("renewal in the hang at +%s: %v after %s", time.Since(committed), err, time.Since(start))
			}
			acks++
		}
		// Past the horizon nothing is acknowledged from memory.
		time.Sleep(time.Until(committed.Add(cluster.StoreGrace)))
		if err := renew(); err == nil {
			t.Fatalf("renewal acknowledged from memory at +%s, past the horizon", time.Since(committed))
		}
		if got := testutil.ToFloat64(n.metrics.unpersisted); got != float64(acks) {
			t.Errorf("rgit_lease_renewals_unpersisted_total = %v, want %d", got, acks)
		}
		gate.Release()
		if err := renew(); err != nil {
			t.Fatalf("renewal once the store is back: %v", err)
		}
		for _, msg := range []string{"store unavailable: acknowledging session renewals from memory until", "ownership map persisted again"} {
			if logs.FilterMessageSnippet(msg).Len() != 1 {
				t.Errorf("logged %q %d times, want once", msg, logs.FilterMessageSnippet(msg).Len())
			}
		}
		// Killed right after a commit: the next process holds the session
		// until that commit's horizon plus a TTL.
		last := time.Now()
		n.Shutdown(ctx)
		n = newLeader(t, fs)
		defer endBubble(n)
		svc = n.LeaderService()
		time.Sleep(cluster.StoreGrace)
		d, err = svc.Claim(ctx, cluster.ClaimLease{Repo: repo, Node: "rgit-2"})
		if err != nil || d.Outcome != cluster.Refused {
			t.Fatalf("claim at +%s after the last commit, within its horizon and a TTL: %+v, %v", time.Since(last), d, err)
		}
		time.Sleep(cluster.TTL)
		d, err = svc.Claim(ctx, cluster.ClaimLease{Repo: repo, Node: "rgit-2"})
		if err != nil || d.Outcome != cluster.Granted {
			t.Fatalf("claim at +%s after the last commit, past its horizon and a TTL: %+v, %v", time.Since(last), d, err)
		}
	})
}
