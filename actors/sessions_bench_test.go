package actors

import (
	"context"
	"testing"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/repo"
)

// BenchmarkSessionActor measures what a session actor adds to every git
// request: spawning and stopping it (begin-end, what gitserve.Gate.Begin
// and its end function cost through transport/service/engine), and resolving a
// local repository through it (begin-resolve-end) against taking the repo
// actor's session directly (bare-session).
func BenchmarkSessionActor(b *testing.B) {
	ctx := context.Background()
	d := repo.Deps{Store: memstore.New()}
	n, err := NewNode(Config{Deps: d, MaintenanceSlots: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Shutdown(context.Background()) })
	if err := repo.Create(ctx, d, names.MustParse("alice/web")); err != nil {
		b.Fatal(err)
	}
	warm, err := n.Session(ctx, names.MustParse("alice/web")) // keeps the repo actor open
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(warm.Release)

	b.Run("bare-session", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := n.Session(ctx, names.MustParse("alice/web"))
			if err != nil {
				b.Fatal(err)
			}
			s.Release()
		}
	})
	b.Run("begin-end", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g, err := n.BeginSession(ctx, KindHTTP)
			if err != nil {
				b.Fatal(err)
			}
			g.End()
		}
		waitNoSessions(b, n)
	})
	b.Run("begin-resolve-end", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g, err := n.BeginSession(ctx, KindHTTP)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := g.Resolve(ctx, names.MustParse("alice/web")); err != nil {
				b.Fatal(err)
			}
			g.End()
		}
		waitNoSessions(b, n)
	})
}

// waitNoSessions waits for the stops End sent (asynchronous) to finish,
// inside the measurement: their cost is part of a session's.
func waitNoSessions(b *testing.B, n *Node) {
	if err := n.WaitSessions(context.Background()); err != nil {
		b.Fatal(err)
	}
}
