package actors

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/testkit/faultstore"
)

// claimResult is one asynchronous claim's answer.
type claimResult struct {
	d   cluster.Decision
	err error
}

// claimAsync sends a claim to svc and delivers its answer on the channel.
// In a bubble it returns once the claim is decided (or answered), so
// claims sent one after another arrive in that order.
func claimAsync(svc cluster.LeaderService, repo, node string) <-chan claimResult {
	ch := make(chan claimResult, 1)
	go func() {
		d, err := svc.Claim(context.Background(), cluster.ClaimLease{Repo: names.MustParse(repo), Node: node})
		ch <- claimResult{d, err}
	}()
	synctest.Wait()
	return ch
}

// answered reports whether ch has an answer now.
func answered(ch <-chan claimResult) bool { return len(ch) > 0 }

// mapWrites counts the writes of the ownership map's records.
func mapWrites(fs *faultstore.Store) int64 { return fs.Count(faultstore.OpPutIfAbsent) }

// Claims arriving while a write is in flight are decided at once and
// committed together in the next write; nobody is answered before the
// write carrying their decision is durable.
func TestLeaderGroupCommitsClaimsArrivingDuringAWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := faultstore.New(memstore.New(), 1)
		n := newLeader(t, fs)
		defer endBubble(n)
		svc := n.LeaderService()
		fs.ResetCounts()

		first := fs.Hold(faultstore.OpPutIfAbsent, OwnershipPrefix)
		a := claimAsync(svc, "alice/a", "rgit-1")
		if err := first.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		rest := []<-chan claimResult{
			claimAsync(svc, "alice/b", "rgit-1"),
			claimAsync(svc, "alice/c", "rgit-2"),
			// Refused on a grant that is not durable yet: answered with it.
			claimAsync(svc, "alice/b", "rgit-2"),
		}
		synctest.Wait()
		if answered(a) || answered(rest[0]) || answered(rest[1]) || answered(rest[2]) {
			t.Fatal("a claim was answered while the write of the first was held")
		}
		if w := mapWrites(fs); w != 1 {
			t.Fatalf("%d map writes while the first was held, want 1", w)
		}

		second := fs.Hold(faultstore.OpPutIfAbsent, OwnershipPrefix)
		first.Release()
		synctest.Wait()
		if r := <-a; r.err != nil || r.d.Outcome != cluster.Granted {
			t.Fatalf("first claim = %+v, %v", r.d, r.err)
		}
		for _, ch := range rest {
			if answered(ch) {
				t.Fatal("a claim was answered before the write of its batch landed")
			}
		}
		second.Release()
		synctest.Wait()
		want := []struct {
			outcome cluster.Outcome
			owner   string
		}{{cluster.Granted, "rgit-1"}, {cluster.Granted, "rgit-2"}, {cluster.Refused, "rgit-1"}}
		for i, ch := range rest {
			r := <-ch
			if r.err != nil || r.d.Outcome != want[i].outcome || r.d.Owner != want[i].owner {
				t.Fatalf("claim %d = %+v, %v; want %v for %s", i, r.d, r.err, want[i].outcome, want[i].owner)
			}
		}
		if w := mapWrites(fs); w != 2 {
			t.Fatalf("%d map writes for two batches, want 2", w)
		}
		if e, ok := n.OwnershipView().Get(names.MustParse("alice/c")); !ok || e.Node != "rgit-2" {
			t.Fatalf("alice/c in the map = %+v, %v", e, ok)
		}
	})
}

// A failed batch write fails every requester of the batch and every
// decision queued on top of it, and the map forgets them all (reloaded
// from the database).
func TestLeaderFailedBatchFailsEveryRequesterQueuedOnIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := faultstore.New(memstore.New(), 1)
		n := newLeader(t, fs)
		defer endBubble(n)
		svc := n.LeaderService()
		fs.ResetCounts()

		fs.FailNext(faultstore.OpPutIfAbsent, OwnershipPrefix, 1, false)
		g := fs.Hold(faultstore.OpPutIfAbsent, OwnershipPrefix)
		chs := []<-chan claimResult{claimAsync(svc, "alice/web", "rgit-1")}
		if err := g.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		chs = append(chs,
			claimAsync(svc, "alice/web", "rgit-2"), // refused on the failing grant
			claimAsync(svc, "alice/api", "rgit-2"), // granted on top of it, next batch
		)
		synctest.Wait()
		g.Release()
		synctest.Wait()
		for i, ch := range chs {
			if r := <-ch; !errors.Is(r.err, ErrLeaderUnreachable) {
				t.Fatalf("claim %d = %+v, %v; want ErrLeaderUnreachable", i, r.d, r.err)
			}
		}
		if w := mapWrites(fs); w != 1 {
			t.Fatalf("%d map writes, want 1: the batch queued on the failed one is not written", w)
		}
		// Both grants were forgotten: the repos go to whoever claims next,
		// at epoch 1.
		for _, repo := range []string{"alice/web", "alice/api"} {
			d, err := svc.Claim(context.Background(), cluster.ClaimLease{Repo: names.MustParse(repo), Node: "rgit-3"})
			if err != nil || d.Outcome != cluster.Granted || d.Owner != "rgit-3" || d.Entry.Epoch != 1 {
				t.Fatalf("claim of %s after the failure = %+v, %v", repo, d, err)
			}
		}
	})
}
