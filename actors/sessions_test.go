package actors

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
)

// TestSessionActors: each git session is an actor under the transport
// supervisor; a resolved session holds the repository open until it ends;
// WaitSessions returns only once every session ended; the gauge counts
// live sessions by kind.
func TestSessionActors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, d := newTestNode(t, memstore.New(), time.Minute, 8)
		defer endBubble(n)
		ctx := context.Background()
		if err := repo.Create(ctx, d, names.MustParse("alice/web")); err != nil {
			t.Fatal(err)
		}
		ssh, err := n.BeginSession(ctx, KindSSH)
		if err != nil {
			t.Fatal(err)
		}
		http, err := n.BeginSession(ctx, KindHTTP)
		if err != nil {
			t.Fatal(err)
		}
		// A failed resolve binds nothing: the session may resolve again.
		if _, _, err := ssh.Resolve(ctx, names.MustParse("alice/missing")); !errors.Is(err, repo.ErrNotFound) {
			t.Fatalf("Resolve of a missing repository = %v, want ErrNotFound", err)
		}
		s, route, err := ssh.Resolve(ctx, names.MustParse("alice/web"))
		if err != nil || s == nil || !route.Local || s.Info.Repo.Owner() != "alice" {
			t.Fatalf("Resolve = %v, %+v, %v", s, route, err)
		}
		if _, _, err := ssh.Resolve(ctx, names.MustParse("alice/web")); err == nil {
			t.Error("a session resolved twice")
		}
		synctest.Wait()
		if got := testutil.ToFloat64(n.metrics.sessions.WithLabelValues("ssh")); got != 1 {
			t.Errorf("ssh sessions gauge = %v, want 1", got)
		}

		waited := make(chan error, 1)
		wctx, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		go func() { waited <- n.WaitSessions(wctx) }()
		http.End()
		synctest.Wait()
		select {
		case err := <-waited:
			t.Fatalf("WaitSessions returned with a session live: %v", err)
		default:
		}
		// The session holds the repository open past its idle TTL.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if open := openRepos(t, n); len(open) != 1 {
			t.Fatalf("open = %v while a session holds it", open)
		}
		ssh.End()
		ssh.End() // idempotent
		synctest.Wait()
		if err := <-waited; err != nil {
			t.Fatalf("WaitSessions: %v", err)
		}
		if got := testutil.ToFloat64(n.metrics.sessions.WithLabelValues("ssh")); got != 0 {
			t.Errorf("ssh sessions gauge after End = %v", got)
		}
		// Its repo session was released with it: the repository closes
		// after the idle TTL.
		time.Sleep(2 * time.Minute)
		waitClosed(t, n)
	})
}
