package actors

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/storage/repo"
)

// fakeRunner records the workers repo actors start and stop.
type fakeRunner struct {
	mu      sync.Mutex
	queues  []*HookQueue
	running int
	started chan *HookQueue
}

type fakeWorker struct {
	r    *fakeRunner
	once sync.Once
}

func (r *fakeRunner) Start(q *HookQueue) HookWorker {
	r.mu.Lock()
	r.queues = append(r.queues, q)
	r.running++
	r.mu.Unlock()
	r.started <- q
	return &fakeWorker{r: r}
}

func (w *fakeWorker) Wake() {}
func (w *fakeWorker) Stop() {
	w.once.Do(func() {
		w.r.mu.Lock()
		w.r.running--
		w.r.mu.Unlock()
	})
}

func (r *fakeRunner) runningNow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

func (r *fakeRunner) waitStart(t *testing.T) *HookQueue {
	t.Helper()
	select {
	case q := <-r.started:
		return q
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery worker started")
		return nil
	}
}

// TestHookWorkerFollowsTheOutbox: the repo actor starts delivery when a
// push queues events (with the pusher from the session's context), stops
// it when it closes, and starts it again when it opens the database with
// deliveries still waiting (a new owner resumes); once the worker has
// recorded every delivery, opening starts nothing.
func TestHookWorkerFollowsTheOutbox(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	d := testDeps(t, st)
	run := &fakeRunner{started: make(chan *HookQueue, 4)}
	n := startNode(t, Config{Deps: d, WarmTTL: time.Minute, MaxWarm: 8, Hooks: run})
	if err := repo.Create(ctx, d, names.MustParse("alice/web")); err != nil {
		t.Fatal(err)
	}
	if err := n.AddHook(ctx, names.MustParse("alice/web"), outbox.Hook{ID: "a000000000000000", URL: "http://h/", Events: []string{outbox.KindPush}}); err != nil {
		t.Fatal(err)
	}
	if got := run.runningNow(); got != 0 {
		t.Fatalf("%d workers run with nothing queued", got)
	}
	s, err := n.Session(ctx, names.MustParse("alice/web"))
	if err != nil {
		t.Fatal(err)
	}
	pusher := auth.WithIdentity(ctx, auth.Identity{Owner: "bob", Authenticated: true, Key: "SHA256:k"})
	id := object.MustID("1111111111111111111111111111111111111111")
	if errs, err := s.UpdateRefs(pusher, nil, []repo.RefUpdate{{Name: "refs/heads/main", New: id}}, false); err != nil || errs[0] != nil {
		t.Fatalf("update: %v %v", errs, err)
	}
	s.Release()
	q := run.waitStart(t)
	v, err := q.Outbox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	head, err := v.Head("a000000000000000", 10)
	if err != nil || len(head) != 1 || head[0].Event.Actor.User != "bob" || head[0].Event.Actor.Key != "SHA256:k" {
		t.Fatalf("queued %+v, %v", head, err)
	}

	// Close (a crash or hand-over looks the same to the next opener):
	// the worker stops, and the next open resumes.
	if err := n.CloseRepo(ctx, names.MustParse("alice/web")); err != nil {
		t.Fatal(err)
	}
	if got := run.runningNow(); got != 0 {
		t.Fatalf("%d workers still run after close", got)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := q.Outbox(short); err == nil {
		t.Fatal("the closed actor's queue still answers")
	}
	if _, err := n.Outbox(ctx, names.MustParse("alice/web")); err != nil { // opens it again
		t.Fatal(err)
	}
	q = run.waitStart(t)
	r, _ := (outbox.Policy{Window: time.Hour}).After(head[0], outbox.Attempt{Status: 204}, time.Now(), 0)
	if err := q.Finish(ctx, []outbox.Result{r}); err != nil {
		t.Fatal(err)
	}
	if err := n.CloseRepo(ctx, names.MustParse("alice/web")); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Outbox(ctx, names.MustParse("alice/web")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.started:
		t.Fatal("a worker started with nothing waiting")
	default:
	}
}
