package engine

import (
	"context"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/testkit/faultstore"
	"github.com/rgit/rgit/transport/service/gitserve"
)

// TestColdOpenRoundTrips: a session on a repository that is not open on
// the node, whose name-index entry is not cached, costs two sequential
// store round trips: the index GET with the database LIST beside it
// (repo.ListAhead), then the database reads with the fence. Every call
// has latency L; the tracer counts the chains of calls, whatever the CPU
// time.
func TestColdOpenRoundTrips(t *testing.T) {
	ctx := context.Background()
	slow := faultstore.New(memstore.New(), 1)
	tr := faultstore.NewTracer(slow)
	deps, _, gate := gateOver(t, tr, "alice", "cold")
	deps.Meta.Forget(names.MustParse("alice/cold")) // cold: Create just wrote it
	slow.AddRule(faultstore.Rule{Latency: 50 * time.Millisecond})
	tr.Reset()
	sess, err := gate.Open(ctx, gitserve.UploadPack, names.MustParse("alice/cold"), auth.Identity{Owner: "alice", Authenticated: true})
	// Calls that ended by now belong to the open; the database's
	// background fence check (a LIST started as it opened) ends L later.
	spans := tr.EndedBy(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ops := faultstore.CountOps(spans)
	if ops[faultstore.OpGet] < 1 || ops[faultstore.OpList] != 1 || ops[faultstore.OpPutIfAbsent] != 1 {
		t.Fatalf("cold open calls: %v, want the index GET, one LIST, the fence", ops)
	}
	if rt := faultstore.SequentialDepth(spans); rt != 2 {
		t.Fatalf("cold open took %d sequential round trips, want 2 (calls %v)", rt, ops)
	}

	// Warm (open here, index entry cached): no store call, and no
	// listing started ahead.
	sess.Close()
	warm := time.Now()
	sess2, err := gate.Open(ctx, gitserve.UploadPack, names.MustParse("alice/cold"), auth.Identity{Owner: "alice", Authenticated: true})
	if err != nil {
		t.Fatal(err)
	}
	sess2.Close()
	deps.Ahead.Wait()
	for _, s := range tr.EndedBy(time.Now()) {
		if !s.Start.Before(warm) {
			t.Errorf("warm open: %s %s", s.Op, s.Key)
		}
	}
}
