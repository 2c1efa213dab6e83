package clonecache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/memstore"
)

func newCache(t *testing.T, max int64) *Cache {
	t.Helper()
	c, err := New(t.TempDir(), max)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serve runs Serve with a producer that writes content and counts calls.
func serve(t *testing.T, c *Cache, key, content string, calls *int) (string, bool) {
	t.Helper()
	var buf bytes.Buffer
	hit, err := c.Serve(context.Background(), key, &buf, func(w io.Writer) error {
		*calls++
		_, err := io.WriteString(w, content)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.String(), hit
}

func TestMissThenHit(t *testing.T) {
	c := newCache(t, 1<<20)
	k := Key("packs", "want")
	calls := 0
	got, hit := serve(t, c, k, "PACK-one", &calls)
	if got != "PACK-one" || hit {
		t.Fatalf("first serve = %q hit=%v", got, hit)
	}
	got, hit = serve(t, c, k, "something else", &calls)
	if got != "PACK-one" || !hit || calls != 1 {
		t.Fatalf("second serve = %q hit=%v calls=%d; want the cached bytes without producing", got, hit, calls)
	}
	if s := c.Stats(); s.Hits != 1 || s.Misses != 1 || s.Entries != 1 || s.Bytes != 8 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestKeySeparatesParts(t *testing.T) {
	if Key("ab", "c") == Key("a", "bc") || Key("a") == Key("a", "") {
		t.Fatal("different part lists share a key")
	}
	if a, b := Key("x", "y"), Key("x", "y"); a != b {
		t.Fatal("Key is not deterministic")
	}
}

func TestInvalidKey(t *testing.T) {
	c := newCache(t, 1<<20)
	for _, k := range []string{"", "../x", "a/b", strings.Repeat("a", 200)} {
		if _, err := c.Serve(context.Background(), k, io.Discard, func(io.Writer) error { return nil }); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
}

// TestConcurrentIdenticalRequestsProduceOnce holds the producer until
// every other caller is waiting on it, then checks they all got its bytes
// from one production.
func TestConcurrentIdenticalRequestsProduceOnce(t *testing.T) {
	c := newCache(t, 1<<20)
	k := Key("burst")
	const n = 8
	content := strings.Repeat("0123456789", 1000)
	release := make(chan struct{})
	var mu sync.Mutex
	calls := 0
	outs := make([]bytes.Buffer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Serve(context.Background(), k, &outs[i], func(w io.Writer) error {
				mu.Lock()
				calls++
				mu.Unlock()
				<-release
				_, err := io.WriteString(w, content)
				return err
			})
		}()
	}
	// Exactly one caller produces; release it once the others wait.
	for c.Stats().Waits < n-1 {
		runtimeYield()
	}
	close(release)
	wg.Wait()
	if calls != 1 {
		t.Fatalf("produced %d times, want 1", calls)
	}
	for i := range n {
		if errs[i] != nil || outs[i].String() != content {
			t.Fatalf("caller %d: err=%v, %d bytes", i, errs[i], outs[i].Len())
		}
	}
}

func TestProducerFailureLetsWaiterProduce(t *testing.T) {
	c := newCache(t, 1<<20)
	k := Key("fail")
	started := make(chan struct{})
	fail := make(chan struct{})
	boom := errors.New("boom")
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, firstErr = c.Serve(context.Background(), k, io.Discard, func(w io.Writer) error {
			close(started)
			io.WriteString(w, "partial")
			<-fail
			return boom
		})
	}()
	<-started
	second := make(chan string)
	go func() {
		var buf bytes.Buffer
		_, err := c.Serve(context.Background(), k, &buf, func(w io.Writer) error {
			_, err := io.WriteString(w, "complete")
			return err
		})
		if err != nil {
			buf.WriteString("ERR " + err.Error())
		}
		second <- buf.String()
	}()
	for c.Stats().Waits < 1 {
		runtimeYield()
	}
	close(fail)
	<-done
	if !errors.Is(firstErr, boom) {
		t.Fatalf("first caller error = %v, want boom", firstErr)
	}
	if got := <-second; got != "complete" {
		t.Fatalf("waiter got %q, want its own complete production", got)
	}
	calls := 0
	if got, hit := serve(t, c, k, "x", &calls); !hit || got != "complete" {
		t.Fatalf("after retry: %q hit=%v; the failed partial pack must not be cached", got, hit)
	}
}

func TestWaiterHonoursContext(t *testing.T) {
	c := newCache(t, 1<<20)
	k := Key("slow")
	started, release, built := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := c.Serve(context.Background(), k, io.Discard, func(w io.Writer) error {
			close(started)
			<-release
			return nil
		})
		built <- err
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Serve(ctx, k, io.Discard, func(io.Writer) error { return nil })
	close(release)
	// The builder finishes its file before the test's directory goes.
	if berr := <-built; berr != nil {
		t.Fatalf("builder: %v", berr)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestClientFailureStillCaches(t *testing.T) {
	c := newCache(t, 1<<20)
	k := Key("gone")
	gone := errors.New("client went away")
	_, err := c.Serve(context.Background(), k, failWriter{gone}, func(w io.Writer) error {
		_, err := io.WriteString(w, "full pack")
		return err
	})
	if !errors.Is(err, gone) {
		t.Fatalf("err = %v, want the client's error", err)
	}
	calls := 0
	if got, hit := serve(t, c, k, "x", &calls); !hit || got != "full pack" {
		t.Fatalf("got %q hit=%v", got, hit)
	}
}

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	c := newCache(t, 25)
	calls := 0
	a, b, d := Key("a"), Key("b"), Key("d")
	serve(t, c, a, "aaaaaaaaaa", &calls) // 10 bytes
	serve(t, c, b, "bbbbbbbbbb", &calls) // 20
	serve(t, c, a, "", &calls)           // touch a: b is now the oldest
	serve(t, c, d, "dddddddddd", &calls) // 30 > 25: evict b
	if _, hit := serve(t, c, a, "", &calls); !hit {
		t.Fatal("recently used entry was evicted")
	}
	if got, hit := serve(t, c, b, "BBBBBBBBBB", &calls); hit || got != "BBBBBBBBBB" {
		t.Fatalf("least recently used entry still served: %q", got)
	}
	s := c.Stats()
	if s.Bytes > 25 || s.Evictions < 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestOversizedPackIsServedNotKept(t *testing.T) {
	c := newCache(t, 4)
	calls := 0
	k := Key("big")
	if got, _ := serve(t, c, k, "too large", &calls); got != "too large" {
		t.Fatalf("got %q", got)
	}
	if got, hit := serve(t, c, k, "too large", &calls); hit || calls != 2 || got != "too large" {
		t.Fatalf("oversized pack was cached (hit=%v calls=%d)", hit, calls)
	}
	if s := c.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestNewAdoptsPacksAndRemovesTemps(t *testing.T) {
	dir := t.TempDir()
	c, err := New(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	k := Key("kept")
	serve(t, c, k, "kept pack", &calls)
	temp := filepath.Join(dir, Key("old")+tempMarker+"123")
	other := filepath.Join(dir, "unrelated.txt")
	for _, p := range []string{temp, other} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c2, err := New(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got, hit := serve(t, c2, k, "new", &calls); !hit || got != "kept pack" {
		t.Fatalf("restarted cache: %q hit=%v, want the adopted pack", got, hit)
	}
	if _, err := os.Stat(temp); !errors.Is(err, os.ErrNotExist) {
		t.Error("unfinished temp file survived New")
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("New removed a file it does not own: %v", err)
	}
	if s := c2.Stats(); s.Entries != 1 || s.Bytes != int64(len("kept pack")) {
		t.Fatalf("stats = %+v", s)
	}
	// A smaller bound evicts adopted packs at once.
	c3, err := New(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	if s := c3.Stats(); s.Entries != 0 {
		t.Fatalf("over-bound adoption kept %d entries", s.Entries)
	}
	if _, err := New(dir, 0); err == nil {
		t.Error("New accepted a zero size bound")
	}
}

// runtimeYield lets the goroutines a test waits for run; tests poll
// Stats for a state the code under test must reach, never a duration.
func runtimeYield() { runtime.Gosched() }

func TestColdNodeReusesSharedPack(t *testing.T) {
	store := memstore.New()
	newShared := func() *Cache {
		c, err := New(t.TempDir(), 1<<20, WithStore(store, zap.NewNop()))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const place = "objects/o/r/clonepack/"
	k := Key("packs", "want")
	pack := strings.Repeat("PACK", 10000)
	a := newShared()
	calls := 0
	var buf bytes.Buffer
	if _, err := a.ServeShared(context.Background(), k, place, &buf, func(w io.Writer) error {
		calls++
		_, err := io.WriteString(w, pack)
		return err
	}); err != nil || buf.String() != pack {
		t.Fatalf("first node: %v", err)
	}
	a.Close() // the upload is done
	if s := a.Stats(); s.Misses != 1 || s.Uploads != 1 || s.UploadErrors != 0 {
		t.Fatalf("first node stats = %+v; want one build, uploaded", s)
	}

	b := newShared()
	for i, wantHit := range []bool{false, true} {
		buf.Reset()
		hit, err := b.ServeShared(context.Background(), k, place, &buf, func(io.Writer) error {
			t.Error("the cold node built a pack another node had stored")
			return errors.New("built")
		})
		if err != nil || buf.String() != pack || hit != wantHit {
			t.Fatalf("cold node, request %d: hit=%v err=%v, %d bytes", i, hit, err, buf.Len())
		}
	}
	b.Close()
	if s := b.Stats(); s.Misses != 0 || s.SharedHits != 1 || s.Hits != 1 || s.Uploads != 0 {
		t.Fatalf("cold node stats = %+v; want one shared hit, then a local hit, nothing built", s)
	}
}

func TestSharedPackMissingIsBuilt(t *testing.T) {
	c, err := New(t.TempDir(), 1<<20, WithStore(memstore.New(), zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	calls := 0
	if _, err := c.ServeShared(context.Background(), Key("x"), "objects/o/r/clonepack/", &buf, func(w io.Writer) error {
		calls++
		_, err := io.WriteString(w, "PACK")
		return err
	}); err != nil || calls != 1 || buf.String() != "PACK" {
		t.Fatalf("calls=%d err=%v", calls, err)
	}
	c.Close()
}

func TestStale(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	info := func(k string, age time.Duration) objstore.ObjectInfo {
		return objstore.ObjectInfo{Key: k, ModTime: now.Add(-age)}
	}
	for _, tc := range []struct {
		name   string
		infos  []objstore.ObjectInfo
		stored string
		want   []string
	}{
		{"only the new one", []objstore.ObjectInfo{info("a", 0)}, "a", nil},
		{"old ones go", []objstore.ObjectInfo{info("old", time.Hour), info("new", 0), info("older", 2*time.Hour)}, "new", []string{"old", "older"}},
		{"young ones stay (a node may read them)", []objstore.ObjectInfo{info("young", time.Minute), info("new", 0)}, "new", nil},
		{"the stored one stays when a newer exists", []objstore.ObjectInfo{info("newer", 0), info("stored", time.Hour)}, "stored", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stale(tc.infos, tc.stored, now); !slices.Equal(got, tc.want) {
				t.Fatalf("stale = %v, want %v", got, tc.want)
			}
		})
	}
}
