package hooks

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/hookrecv"
)

// TestSweepResumesADeadOwnersDeliveries: a writer queues a delivery and
// dies without closing (a crash: its worker never ran, and it removed
// nothing). Nothing touches the repository afterwards; a node's sweep
// finds the writer's marker, opens the repository, and the delivery
// reaches the receiver. Once nothing waits, the next sweep removes the
// marker, and a sweep with no markers opens nothing.
func TestSweepResumesADeadOwnersDeliveries(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	cache, err := packcache.Open(t.TempDir(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	d := repo.Deps{Store: st, Cache: cache}
	const secret = "sweep-secret-0123456789"
	rcv, err := hookrecv.Start(secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rcv.Close)

	if err := repo.Create(ctx, d, names.MustParse("alice/web")); err != nil {
		t.Fatal(err)
	}
	dead, err := repo.Open(ctx, d, names.MustParse("alice/web"))
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.AddHook(ctx, outbox.Hook{ID: "a000000000000000", URL: rcv.URL, Secret: secret,
		Events: []string{outbox.KindVisibility}}); err != nil {
		t.Fatal(err)
	}
	if err := dead.SetVisibility(ctx, true); err != nil {
		t.Fatal(err)
	}
	// dead is never closed.

	svc := New(Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Timeout: 5 * time.Second})
	node, err := actors.NewNode(actors.Config{Deps: d, WarmTTL: time.Minute, MaxWarm: 8, Hooks: svc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown(context.Background()) })
	if open, err := node.OpenRepos(ctx); err != nil || len(open) != 0 {
		t.Fatalf("open before the sweep: %v, %v", open, err)
	}

	sweepOnce(ctx, node, d, zap.NewNop())
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got, err := rcv.Wait(wctx, func(ds []hookrecv.Delivery) bool { return len(ds) >= 1 })
	if err != nil {
		t.Fatalf("no delivery after the sweep: %v", err)
	}
	if got[0].Event != outbox.KindVisibility || !got[0].SignatureOK {
		t.Fatalf("delivered %+v", got[0])
	}

	// The marker stays while the delivery is being recorded, and goes at
	// the first sweep after.
	for {
		sweepOnce(ctx, node, d, zap.NewNop())
		pending, err := repo.PendingRepos(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			break
		}
		select {
		case <-wctx.Done():
			t.Fatalf("markers left after the delivery: %v", pending)
		case <-time.After(20 * time.Millisecond):
		}
	}

	if err := node.CloseRepo(ctx, names.MustParse("alice/web")); err != nil {
		t.Fatal(err)
	}
	sweepOnce(ctx, node, d, zap.NewNop())
	if open, err := node.OpenRepos(ctx); err != nil || len(open) != 0 {
		t.Fatalf("a sweep without markers opened %v, %v", open, err)
	}
	if n := len(rcv.Received()); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
}
