package actors

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
)

func newTestNode(t *testing.T, st objstore.Store, ttl time.Duration, maxWarm int) (*Node, repo.Deps) {
	t.Helper()
	d := testDeps(t, st)
	return startNode(t, Config{Deps: d, WarmTTL: ttl, MaxWarm: maxWarm}), d
}

// testDeps gives st a pack cache in a temporary directory.
func testDeps(t *testing.T, st objstore.Store) repo.Deps {
	t.Helper()
	cache, err := packcache.Open(t.TempDir(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	return repo.Deps{Store: st, Cache: cache}
}

// startNode starts a node shut down when the test ends.
func startNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	return n
}

func openRepos(t *testing.T, n *Node) []string {
	t.Helper()
	open, err := n.OpenRepos(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return open
}

// waitClosed waits, in a synctest bubble, until every actor of n is idle
// and checks that no repo actor is left open.
func waitClosed(t *testing.T, n *Node) {
	t.Helper()
	synctest.Wait()
	if open := openRepos(t, n); len(open) > 0 {
		t.Fatalf("repos still open: %v", open)
	}
}

func TestMissingRepoCreatesNothing(t *testing.T) {
	st := memstore.New()
	n, _ := newTestNode(t, st, time.Minute, 8)
	_, err := n.Session(context.Background(), names.MustParse("alice/nope"))
	if !errors.Is(err, repo.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	for info, err := range st.List(context.Background(), "", "") {
		t.Fatalf("store not empty: %v %v", info.Key, err)
	}
}

func TestSessionKeepsRepoOpenUntilIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		n, d := newTestNode(t, st, time.Minute, 8)
		defer endBubble(n)
		ctx := context.Background()
		if err := repo.Create(ctx, d, names.MustParse("alice/web")); err != nil {
			t.Fatal(err)
		}
		s, err := n.Session(ctx, names.MustParse("alice/web"))
		if err != nil {
			t.Fatal(err)
		}
		if s.Snapshot.Head != "refs/heads/main" || s.Info.Repo.Owner() != "alice" {
			t.Fatalf("snapshot %+v info %+v", s.Snapshot, s.Info)
		}
		// Several TTLs pass while the session is held: the repo stays open.
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := openRepos(t, n); len(got) != 1 || got[0] != "alice/web" {
			t.Fatalf("open = %v while a session holds it", got)
		}
		// The TTL counts from the last use, the release.
		s.Release()
		time.Sleep(time.Minute - time.Second)
		synctest.Wait()
		if got := openRepos(t, n); len(got) != 1 {
			t.Fatalf("open = %v a second before the TTL", got)
		}
		time.Sleep(time.Second)
		waitClosed(t, n)
		// A later session reopens it.
		s2, err := n.Session(ctx, names.MustParse("alice/web"))
		if err != nil {
			t.Fatal(err)
		}
		s2.Release()
	})
}

// TestWritesAreSerializedThroughTheActor: twenty pushes racing to create
// the same branch each send a compare-and-swap from "no branch"; written
// one after the other, exactly one wins and every other one sees the
// branch the winner created.
func TestWritesAreSerializedThroughTheActor(t *testing.T) {
	st := memstore.New()
	n, d := newTestNode(t, st, time.Minute, 8)
	ctx := context.Background()
	if err := repo.Create(ctx, d, names.MustParse("alice/web")); err != nil {
		t.Fatal(err)
	}
	const pushers = 20
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range pushers {
		wg.Go(func() {
			s, err := n.Session(ctx, names.MustParse("alice/web"))
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Release()
			var id object.ID
			id[0], id[19] = byte(i), 1
			errs, err := s.UpdateRefs(ctx, nil, []repo.RefUpdate{{Name: "refs/heads/main", New: id}}, true)
			if err != nil {
				t.Error(err)
				return
			}
			if errs[0] == nil {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if got := won.Load(); got != 1 {
		t.Fatalf("%d of %d racing creations of one branch succeeded, want exactly 1", got, pushers)
	}
}

// TestMaxWarmEvictsIdleRepos: with two warm repositories allowed, opening
// a fourth closes the least recently used idle one and keeps the one a
// session holds.
func TestMaxWarmEvictsIdleRepos(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		n, d := newTestNode(t, st, time.Hour, 2)
		defer endBubble(n)
		ctx := context.Background()
		for _, name := range []string{"a", "b", "c", "d"} {
			if err := repo.Create(ctx, d, names.MustParse("alice/"+name)); err != nil {
				t.Fatal(err)
			}
		}
		held, err := n.Session(ctx, names.MustParse("alice/a"))
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release()
		for _, name := range []string{"b", "c", "d"} {
			time.Sleep(time.Second)
			s, err := n.Session(ctx, names.MustParse("alice/"+name))
			if err != nil {
				t.Fatal(err)
			}
			s.Release()
			synctest.Wait()
		}
		// Opening c asked a (held: it stays); opening d asked b, the least
		// recently used, which closed.
		if open := openRepos(t, n); !slices.Equal(open, []string{"alice/a", "alice/c", "alice/d"}) {
			t.Fatalf("open = %v, want alice/a (held), alice/c and alice/d", open)
		}
	})
}

func TestFencedRepoActorStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		n, d := newTestNode(t, st, time.Hour, 8)
		defer endBubble(n)
		ctx := context.Background()
		if err := repo.Create(ctx, d, names.MustParse("alice/web")); err != nil {
			t.Fatal(err)
		}
		s, err := n.Session(ctx, names.MustParse("alice/web"))
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
		// Another writer (another node, or a direct admin process) opens it.
		other, err := repo.Open(ctx, d, names.MustParse("alice/web"))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close(ctx)
		err = n.SetVisibility(ctx, names.MustParse("alice/web"), true)
		if !errors.Is(err, refdb.ErrFenced) {
			t.Fatalf("write after fencing: err = %v, want ErrFenced", err)
		}
		waitClosed(t, n)
	})
}

func TestPanicRestartsRepoActor(t *testing.T) {
	st := memstore.New()
	n, d := newTestNode(t, st, time.Hour, 8)
	ctx := context.Background()
	if err := repo.Create(ctx, d, names.MustParse("alice/web")); err != nil {
		t.Fatal(err)
	}
	// A repack commit without a build is a bug that panics in the write.
	r, err := ask(ctx, n, names.MustParse("alice/web"), &commitRepack{}, time.Minute, true)
	if err != nil || r == nil || !errors.Is(r.err, errPanic) {
		t.Fatalf("a panicking write answered %#v, %v; want errPanic", r, err)
	}
	if err := n.SetVisibility(ctx, names.MustParse("alice/web"), true); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
