package actors

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
)

func newTestNode(t *testing.T, st objstore.Store, ttl time.Duration, maxWarm int) (*Node, repo.Deps) {
	t.Helper()
	cache, err := packcache.Open(t.TempDir(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	d := repo.Deps{Store: st, Cache: cache}
	n, err := NewNode(Config{Deps: d, WarmTTL: ttl, MaxWarm: maxWarm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	return n, d
}

func openRepos(t *testing.T, n *Node) []string {
	t.Helper()
	open, err := n.OpenRepos(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return open
}

// waitClosed polls until no repo actor is alive (the idle TTL fires inside
// the actor system's own timer; the bound only stops a broken test).
func waitClosed(t *testing.T, n *Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(openRepos(t, n)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("repos still open: %v", openRepos(t, n))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMissingRepoCreatesNothing(t *testing.T) {
	st := memstore.New()
	n, _ := newTestNode(t, st, time.Minute, 8)
	_, err := n.Session(context.Background(), "alice", "nope")
	if !errors.Is(err, repo.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	for info, err := range st.List(context.Background(), "", "") {
		t.Fatalf("store not empty: %v %v", info.Key, err)
	}
	if _, err := n.Session(context.Background(), "alice", "../x"); !errors.Is(err, repo.ErrInvalidName) {
		t.Fatalf("bad name err = %v", err)
	}
}

func TestSessionKeepsRepoOpenUntilIdle(t *testing.T) {
	st := memstore.New()
	n, d := newTestNode(t, st, 50*time.Millisecond, 8)
	ctx := context.Background()
	if err := repo.Create(ctx, d, "alice", "web"); err != nil {
		t.Fatal(err)
	}
	s, err := n.Session(ctx, "alice", "web")
	if err != nil {
		t.Fatal(err)
	}
	if s.Snapshot.Head != "refs/heads/main" || s.Info.Owner != "alice" {
		t.Fatalf("snapshot %+v info %+v", s.Snapshot, s.Info)
	}
	// Several TTLs pass while the session is held: the repo stays open.
	time.Sleep(200 * time.Millisecond)
	if got := openRepos(t, n); len(got) != 1 || got[0] != "alice/web" {
		t.Fatalf("open = %v while a session holds it", got)
	}
	s.Release()
	waitClosed(t, n)
	// A later session reopens it.
	s2, err := n.Session(ctx, "alice", "web")
	if err != nil {
		t.Fatal(err)
	}
	s2.Release()
}

func TestWritesAreSerializedThroughTheActor(t *testing.T) {
	st := memstore.New()
	n, d := newTestNode(t, st, time.Minute, 8)
	ctx := context.Background()
	if err := repo.Create(ctx, d, "alice", "web"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	inside := 0
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := n.Do(ctx, "alice", "web", func(r *repo.Repo) (any, error) {
				mu.Lock()
				inside++
				if inside != 1 {
					t.Errorf("%d writers inside the actor at once", inside)
				}
				mu.Unlock()
				err := r.SetVisibility(ctx, true)
				mu.Lock()
				inside--
				mu.Unlock()
				return nil, err
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	s, err := n.Session(ctx, "alice", "web")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if !s.Info.Public {
		t.Fatal("visibility change lost")
	}
}

func TestMaxWarmEvictsIdleRepos(t *testing.T) {
	st := memstore.New()
	n, d := newTestNode(t, st, time.Hour, 2)
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c", "d"} {
		if err := repo.Create(ctx, d, "alice", name); err != nil {
			t.Fatal(err)
		}
	}
	held, err := n.Session(ctx, "alice", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	for _, name := range []string{"b", "c", "d"} {
		s, err := n.Session(ctx, "alice", name)
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		open := openRepos(t, n)
		if len(open) <= 3 && strings.Contains(strings.Join(open, ","), "alice/a") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("open = %v: want at most MaxWarm+1 with the held repo kept", open)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFencedRepoActorStops(t *testing.T) {
	st := memstore.New()
	n, d := newTestNode(t, st, time.Hour, 8)
	ctx := context.Background()
	if err := repo.Create(ctx, d, "alice", "web"); err != nil {
		t.Fatal(err)
	}
	s, err := n.Session(ctx, "alice", "web")
	if err != nil {
		t.Fatal(err)
	}
	s.Release()
	// Another writer (another node, or a direct admin process) opens it.
	other, err := repo.Open(ctx, d, "alice", "web")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	_, err = n.Do(ctx, "alice", "web", func(r *repo.Repo) (any, error) { return nil, r.SetVisibility(ctx, true) })
	if !errors.Is(err, refdb.ErrFenced) {
		t.Fatalf("write after fencing: err = %v, want ErrFenced", err)
	}
	waitClosed(t, n)
}

func TestPanicRestartsRepoActor(t *testing.T) {
	st := memstore.New()
	n, d := newTestNode(t, st, time.Hour, 8)
	ctx := context.Background()
	if err := repo.Create(ctx, d, "alice", "web"); err != nil {
		t.Fatal(err)
	}
	_, err := n.Do(ctx, "alice", "web", func(*repo.Repo) (any, error) { panic("boom") })
	if err == nil {
		t.Fatal("a panicking call reported success")
	}
	if _, err := n.Do(ctx, "alice", "web", func(r *repo.Repo) (any, error) { return nil, r.SetVisibility(ctx, true) }); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
