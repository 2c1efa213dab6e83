package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/testkit/redistest"
)

// fakeOrigin answers every request with a public JSON body of size
// bytes, counting calls; with gate set it waits for gate before answering
// (after entered is signalled).
type fakeOrigin struct {
	calls   atomic.Int32
	size    int
	entered chan struct{}
	gate    chan struct{}
	// fail, when set, is returned after the whole answer was written: the
	// origin found it wrong at its end.
	fail error
}

func (o *fakeOrigin) ServeAPI(w http.ResponseWriter, r *http.Request, q *Request, _ auth.Identity) error {
	n := o.calls.Add(1)
	if o.gate != nil {
		o.entered <- struct{}{}
		<-o.gate
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("ETag", etagFor(q))
	if q.Immutable() {
		h.Set("Cache-Control", ccImmutable)
	} else {
		h.Set("Cache-Control", ccRefs)
	}
	body := fmt.Sprintf(`{"call":%d}`, n)
	if o.size > len(body) {
		body += strings.Repeat(" ", o.size-len(body))
	}
	// Sized and flushed as the upstream does: the client has the answer
	// at its last byte, before the handler returns.
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(body))
	_ = http.NewResponseController(w).Flush()
	return o.fail
}

type noTokens struct{}

func (noTokens) TokenIdentity(context.Context, string) (auth.Identity, error) {
	return auth.Anonymous, auth.ErrUnknownCredential
}

// visibility answers Visibility: every repository is public unless
// named in private ("owner/name" as RepoKey spells it).
type visibility struct {
	mu      sync.Mutex
	private map[string]bool
	asked   atomic.Int32
}

func (v *visibility) Public(_ context.Context, r names.Repo) (bool, error) {
	v.asked.Add(1)
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.private[r.Key()], nil
}

func (v *visibility) set(repoKey string, private bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.private == nil {
		v.private = map[string]bool{}
	}
	v.private[repoKey] = private
}

func newTestHandler(t *testing.T, c *Cache, o Origin) *httptest.Server {
	t.Helper()
	return newTestHandlerWith(t, c, o, &visibility{})
}

func newTestHandlerWith(t *testing.T, c *Cache, o Origin, v Visibility) *httptest.Server {
	t.Helper()
	h, err := New(Config{Auth: noTokens{}, Origin: o, Cache: c, Visibility: v})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func fetch(t *testing.T, srv *httptest.Server, path string) (string, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b.String())
	}
	return resp.Header.Get("X-Cache"), strings.TrimSpace(b.String())
}

func realCache(t *testing.T, directives ...string) (*Cache, *redistest.Server) {
	t.Helper()
	rs := redistest.Start(t, directives...)
	c, err := OpenCache(rs.URL(), nil, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rs
}

var treePath = "/api/alice/site/tree/" + oidA

// TestCacheHit: the second request is answered from Redis without the
// origin.
func TestCacheHit(t *testing.T) {
	c, rs := realCache(t)
	o := &fakeOrigin{}
	srv := newTestHandler(t, c, o)
	// A second connection, open before writes stall, sees what is stored.
	ctx := context.Background()
	peekOpt, _ := redis.ParseURL(rs.URL())
	peek := redis.NewClient(peekOpt)
	defer peek.Close()
	if err := peek.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Writes stall for a while: the answer must still be stored before
	// the client sees its end, so the next request is a hit.
	if err := peek.Do(ctx, "CLIENT", "PAUSE", "300", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	if x, body := fetch(t, srv, treePath); x != "miss" || body != `{"call":1}` {
		t.Fatalf("first: %q %s", x, body)
	}
	if n, err := peek.Exists(ctx, entryKey(0, names.MustParse("alice/site").Key(), "tree/"+oidA)).Result(); err != nil || n != 1 {
		t.Fatalf("the answer was not in Redis when the client had it: %d %v", n, err)
	}
	if x, body := fetch(t, srv, treePath); x != "hit" || body != `{"call":1}` || o.calls.Load() != 1 {
		t.Fatalf("second: %q %s, %d origin calls", x, body, o.calls.Load())
	}
	// Any spelling of the repository shares the entry.
	if x, _ := fetch(t, srv, "/api/ALICE/Site.git/tree/"+oidA); x != "hit" {
		t.Errorf("other spelling: %q", x)
	}
}

// TestPurgeRacingMiss: a purge that lands while a miss is being answered
// leaves that answer out of reach, because the generation was read
// before the origin was asked.
func TestPurgeRacingMiss(t *testing.T) {
	c, _ := realCache(t)
	o := &fakeOrigin{entered: make(chan struct{}), gate: make(chan struct{})}
	srv := newTestHandler(t, c, o)
	done := make(chan string)
	go func() {
		_, body := fetch(t, srv, treePath)
		done <- body
	}()
	<-o.entered
	if err := c.Purge(context.Background(), names.MustParse("alice/site")); err != nil {
		t.Fatal(err)
	}
	close(o.gate)
	if body := <-done; body != `{"call":1}` {
		t.Fatalf("first answer %s", body)
	}
	o.gate = nil
	if x, body := fetch(t, srv, treePath); x == "hit" || body != `{"call":2}` {
		t.Fatalf("after the purge: %q %s (the answer computed before the purge was served)", x, body)
	}
}

// TestGenerationErrorMeansNoCache: when the generation cannot be read the
// request is answered by the origin and nothing is stored (never
// "generation 0").
func TestGenerationErrorMeansNoCache(t *testing.T) {
	mr := miniredis.RunT(t)
	c := NewCache(redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1}), nil, CacheOptions{})
	o := &fakeOrigin{}
	srv := newTestHandler(t, c, o)
	fetch(t, srv, treePath)
	mr.Set(genKey("alice/site"), "not a number")
	for i := 2; i <= 3; i++ {
		if x, body := fetch(t, srv, treePath); x == "hit" || body != fmt.Sprintf(`{"call":%d}`, i) {
			t.Fatalf("request %d with an unreadable generation: %q %s", i, x, body)
		}
	}
	commit := "/api/alice/site/commit/" + oidA
	fetch(t, srv, commit)
	if k := entryKey(0, "alice/site", "commit/"+oidA); mr.Exists(k) {
		t.Errorf("%s stored although the generation was unreadable", k)
	}
	mr.SetError("LOADING")
	if x, body := fetch(t, srv, treePath); x == "hit" || body != `{"call":5}` {
		t.Fatalf("Redis failing: %q %s", x, body)
	}
}

// TestCacheTTLs: refs answers live 5 s, object answers 7 days, answers
// over 1 MiB are not stored, and the generation counter has no TTL.
func TestCacheTTLs(t *testing.T) {
	mr := miniredis.RunT(t)
	c := NewCache(redis.NewClient(&redis.Options{Addr: mr.Addr()}), nil, CacheOptions{})
	o := &fakeOrigin{}
	srv := newTestHandler(t, c, o)
	fetch(t, srv, "/api/alice/site/refs")
	fetch(t, srv, treePath)
	if err := c.Purge(context.Background(), names.MustParse("alice/site")); err != nil {
		t.Fatal(err)
	}
	fetch(t, srv, "/api/alice/site/refs")
	fetch(t, srv, treePath)
	refs, tree := entryKey(1, "alice/site", "refs"), entryKey(1, "alice/site", "tree/"+oidA)
	if got := mr.TTL(refs); got != 5*time.Second {
		t.Errorf("refs TTL %s", got)
	}
	if got := mr.TTL(tree); got != 7*24*time.Hour {
		t.Errorf("tree TTL %s", got)
	}
	if got := mr.TTL(genKey("alice/site")); got != 0 {
		t.Errorf("generation TTL %s", got)
	}
	mr.FastForward(6 * time.Second)
	if mr.Exists(refs) || !mr.Exists(tree) {
		t.Errorf("after 6 s: refs %v tree %v", mr.Exists(refs), mr.Exists(tree))
	}
	mr.FastForward(7 * 24 * time.Hour)
	if mr.Exists(tree) || !mr.Exists(genKey("alice/site")) {
		t.Errorf("after 7 days: tree %v gen %v", mr.Exists(tree), mr.Exists(genKey("alice/site")))
	}
	big := &fakeOrigin{size: DefaultMaxEntry + 1}
	bsrv := newTestHandler(t, c, big)
	fetch(t, bsrv, "/api/alice/site/commit/"+oidA)
	if x, _ := fetch(t, bsrv, "/api/alice/site/commit/"+oidA); x == "hit" || big.calls.Load() != 2 {
		t.Errorf("an answer over 1 MiB was cached")
	}
}

// TestEvictionKeepsCounters: under memory pressure with volatile-lru,
// Redis evicts answers (they have a TTL) and never a generation counter.
func TestEvictionKeepsCounters(t *testing.T) {
	c, rs := realCache(t, "maxmemory 4mb", "maxmemory-policy volatile-lru")
	if p := c.CheckPolicy(context.Background()); p != "volatile-lru" {
		t.Fatalf("policy %q", p)
	}
	ctx := context.Background()
	const repos = 200
	for i := range repos {
		for range i%3 + 1 {
			if err := c.Purge(ctx, names.MustParse("o/r"+strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	body := bytes.Repeat([]byte("x"), 64<<10)
	for i := range 400 { // ~25 MiB of answers into 4 MiB
		repo := "o/r" + strconv.Itoa(i%repos)
		c.Put(ctx, 1, repo, "blob/"+strconv.Itoa(i), &entry{ContentType: "application/json", Body: body}, time.Hour)
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "evicted_keys:") || strings.Contains(info, "evicted_keys:0\r") {
		t.Fatalf("no eviction happened; the test proves nothing:\n%s", info)
	}
	for i := range repos {
		gen, err := c.Generation(ctx, "o/r"+strconv.Itoa(i))
		if err != nil || gen != int64(i%3+1) {
			t.Fatalf("generation of o/r%d is %d (%v), want %d: a counter was evicted", i, gen, err, i%3+1)
		}
	}
}

// TestCheckPolicyWarns: a policy that may evict counters is logged as an
// error, and the check reports it.
func TestCheckPolicyWarns(t *testing.T) {
	rs := redistest.Start(t, "maxmemory-policy allkeys-lru")
	core, logs := observer.New(zap.WarnLevel)
	c, err := OpenCache(rs.URL(), zap.New(core), CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.CheckPolicy(context.Background()); p != "allkeys-lru" {
		t.Fatalf("policy %q", p)
	}
	if e := logs.FilterMessageSnippet("must be volatile-lru").All(); len(e) != 1 || e[0].Level != zap.ErrorLevel {
		t.Errorf("logged %v", logs.All())
	}
}

// TestHeadIsNotStored: a HEAD miss stores nothing (it has no body), and a
// later GET gets the whole answer.
func TestHeadIsNotStored(t *testing.T) {
	mr := miniredis.RunT(t)
	c := NewCache(redis.NewClient(&redis.Options{Addr: mr.Addr()}), nil, CacheOptions{})
	o := &fakeOrigin{}
	srv := newTestHandler(t, c, o)
	resp, err := http.Head(srv.URL + treePath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if x, body := fetch(t, srv, treePath); x == "hit" || body != `{"call":2}` {
		t.Errorf("GET after HEAD: %q %s", x, body)
	}
}

// TestPolicyProblem: each wrong maxmemory-policy is refused for its own
// reason.
func TestPolicyProblem(t *testing.T) {
	for p, want := range map[string]string{
		"volatile-lru":   "",
		"volatile-ttl":   "",
		"allkeys-lru":    "may evict a generation counter",
		"allkeys-random": "may evict a generation counter",
		"noeviction":     "a full Redis refuses every write, generation bumps included",
		"":               "knows only the volatile-* policies",
	} {
		got := PolicyProblem(p)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("PolicyProblem(%q) = %q, want %q", p, got, want)
		}
	}
}

// TestCheckPolicyNoEviction: a real Redis under noeviction is logged as
// an error with noeviction's reason, not allkeys-*'s.
func TestCheckPolicyNoEviction(t *testing.T) {
	rs := redistest.Start(t, "maxmemory-policy noeviction")
	core, logs := observer.New(zap.WarnLevel)
	c, err := OpenCache(rs.URL(), zap.New(core), CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.CheckPolicy(context.Background()); p != "noeviction" {
		t.Fatalf("policy %q", p)
	}
	e := logs.All()
	if len(e) != 1 || e[0].Level != zap.ErrorLevel || !strings.Contains(e[0].Message, "refuses every write") ||
		strings.Contains(e[0].Message, "evict a generation counter") {
		t.Errorf("logged %v", e)
	}
}

// TestUnreachableRedisIsOneLine: a Redis that cannot be reached is one
// warning that says so and names it; go-redis's own lines go to the same
// logger at debug level, not as plain text to stderr.
func TestUnreachableRedisIsOneLine(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	core, logs := observer.New(zap.DebugLevel)
	c, err := OpenCache("redis://"+addr+"/0", zap.New(core), CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.CheckPolicy(context.Background()); p != "" {
		t.Fatalf("policy %q from no Redis", p)
	}
	var warns []observer.LoggedEntry
	for _, e := range logs.All() {
		switch {
		case e.Level >= zap.WarnLevel:
			warns = append(warns, e)
		case e.LoggerName != "redis":
			t.Errorf("debug line not from go-redis: %v", e)
		}
	}
	if len(warns) != 1 || !strings.Contains(warns[0].Message, "Redis is unreachable") || warns[0].ContextMap()["redis"] != addr {
		t.Fatalf("warnings %v, want one saying Redis at %s is unreachable", warns, addr)
	}
	if logs.FilterLoggerName("redis").Len() == 0 {
		t.Errorf("go-redis logged nothing through zap: %v", logs.All())
	}
}

// TestCacheServedOnlyWhilePublic: a repository made private stops being
// answered from the cache at the next request although nothing purged
// it (the nodes may not know Redis), and an answer computed meanwhile is
// not stored; public again, the stored answers serve again.
func TestCacheServedOnlyWhilePublic(t *testing.T) {
	mr := miniredis.RunT(t)
	c := NewCache(redis.NewClient(&redis.Options{Addr: mr.Addr()}), nil, CacheOptions{})
	o := &fakeOrigin{}
	v := &visibility{}
	srv := newTestHandlerWith(t, c, o, v)
	commit := "/api/alice/site/commit/" + oidA
	fetch(t, srv, commit)
	if x, _ := fetch(t, srv, commit); x != "hit" {
		t.Fatalf("public: %q", x)
	}
	v.set("alice/site", true)
	if x, body := fetch(t, srv, commit); x == "hit" || body != `{"call":2}` {
		t.Fatalf("private: %q %s, served from the cache", x, body)
	}
	fetch(t, srv, treePath)
	if k := entryKey(0, "alice/site", "tree/"+oidA); mr.Exists(k) {
		t.Errorf("%s stored while the repository is private", k)
	}
	v.set("alice/site", false)
	if x, body := fetch(t, srv, commit); x != "hit" || body != `{"call":1}` {
		t.Fatalf("public again: %q %s", x, body)
	}
	if _, err := New(Config{Auth: noTokens{}, Origin: o, Cache: c}); err == nil {
		t.Error("a handler with a cache and no visibility check was made")
	}
}

// TestOriginFailureNotStored: an answer whose every byte was written but
// whose origin reports it failed (a read that fails at its end, after the
// last byte) is not stored.
func TestOriginFailureNotStored(t *testing.T) {
	mr := miniredis.RunT(t)
	c := NewCache(redis.NewClient(&redis.Options{Addr: mr.Addr()}), nil, CacheOptions{})
	o := &fakeOrigin{fail: errors.New("checksum mismatch after the last byte")}
	srv := newTestHandler(t, c, o)
	for i := 1; i <= 2; i++ {
		if x, body := fetch(t, srv, treePath); x != "miss" || body != fmt.Sprintf(`{"call":%d}`, i) {
			t.Fatalf("request %d: %q %s", i, x, body)
		}
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("stored %v", keys)
	}
}
