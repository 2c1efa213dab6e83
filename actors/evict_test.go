package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
)

// TestRequestQueuedBehindEvictionIsAnswered: a request that reached a
// repo actor's mailbox just behind the max-warm eviction that closes it
// must still be answered (and served by a fresh actor), not dropped with
// the stopping mailbox, which left its caller waiting OpenTimeout and
// then failing with ErrBusy (a 503 under many-repository load).
func TestRequestQueuedBehindEvictionIsAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := faultstore.New(memstore.New(), 1)
		n, d := newTestNode(t, fs, time.Hour, 1)
		defer endBubble(n)
		ctx := context.Background()
		for _, name := range []string{"a", "b"} {
			if err := repo.Create(ctx, d, names.MustParse("alice/"+name)); err != nil {
				t.Fatal(err)
			}
		}
		s, err := n.Session(ctx, names.MustParse("alice/a"))
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
		synctest.Wait()

		// Keep a's actor busy in a write, so what follows queues behind it.
		gate := fs.Hold(faultstore.OpPutIfAbsent, "repo/alice/a/wal/")
		wrote := make(chan error, 1)
		go func() { wrote <- n.SetHead(ctx, names.MustParse("alice/a"), "refs/heads/dev") }()
		if err := gate.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		// Opening b (max warm 1) asks a to close: queued behind the write.
		sb, err := n.Session(ctx, names.MustParse("alice/b"))
		if err != nil {
			t.Fatal(err)
		}
		sb.Release()
		// A request for a, handed a's actor before it closed, queues too.
		got := make(chan error, 1)
		go func() {
			s, err := n.Session(ctx, names.MustParse("alice/a"))
			if err == nil {
				s.Release()
			}
			got <- err
		}()
		synctest.Wait()
		gate.Release()
		if err := <-wrote; err != nil {
			t.Fatalf("set head: %v", err)
		}
		start := time.Now()
		if err := <-got; err != nil {
			t.Fatalf("session on a after %v: %v", time.Since(start), err)
		}
		if waited := time.Since(start); waited > time.Second {
			t.Fatalf("session on a answered after %v", waited)
		}
	})
}
